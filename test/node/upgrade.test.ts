// Plugin upgrades on the real node, with a workload creating pods through the scheduler throughout: on the
// pinned kubelet (1.37.2, per-socket endpoints) Auto surges and not one pod fails admission, and the node never
// advertises 0, on the Node or in the kubelet; restarted as the oldest supported kubelet (1.35.4), Auto
// replaces behind a fence (a NoSchedule taint), so again not one pod fails admission; the window the kubelet has
// no device and the time the node was fenced are measured (docs/benchmarks.md, beside
// upgrade-simulated.test.ts, the same scenario on a simulated node).
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { uniqueName } from "../cluster/helpers.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import { core, dpoImage, ON_REAL_NODE, realNode, restartRealKubelet, waitForKubelet } from "./support.js";
import { describeRollout, REPLACE_WINDOW_MS, UpgradeScenario } from "./upgrade-scenario.js";

let operator: OperatorProcess;
let pinnedKubelet: string;
let scenario: UpgradeScenario;

beforeAll(async () => {
  pinnedKubelet = (await core().readNode({ name: realNode() })).status!.nodeInfo!.kubeletVersion;
  await installDpo();
  operator = await startOperator(["--status-write-interval", "250"], {}, { pluginImage: dpoImage() });
  scenario = new UpgradeScenario(uniqueName("node-upg"), {
    node: realNode(),
    placement: ON_REAL_NODE,
    podResourcesSocket: () => "/var/lib/kubelet/pod-resources/kubelet.sock",
  });
  await scenario.create();
}, 300_000);

afterAll(async () => {
  await scenario?.delete();
  await operator?.stop();
  // Later files expect the pinned kubelet back.
  const node = await core().readNode({ name: realNode() });
  if (node.status?.nodeInfo?.kubeletVersion !== pinnedKubelet) {
    await restartRealKubelet(`${inject("clusterBinDir")}/kubelet`);
    await waitForKubelet(pinnedKubelet);
  }
}, 300_000);

describe("plugin upgrades on the real node", () => {
  it("surges on the pinned kubelet: 0 failed admissions, never 0 devices on the Node or in the kubelet", async () => {
    const figures = await scenario.rollOnce("debug");
    console.log(describeRollout(`real node, Surge on kubelet ${pinnedKubelet}`, figures));
    expect(figures.rollout.violations).toEqual([]);
    expect([...figures.rollout.surged]).toEqual([realNode()]);
    expect(figures.pods.rejected).toEqual([]);
    expect(figures.pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
    // The Node watch saw the rollout without a hole (it is caught up at the end, rollOnce checks).
    expect(figures.allocatable.samples).toBeGreaterThan(0);
    expect(figures.allocatable.gaps).toEqual([]);
    expect(figures.allocatable.min).toBeGreaterThan(0);
    expect(figures.fenceMs, "a surging node is never fenced").toBe(0);
    expect(figures.kubelet.samples).toBeGreaterThan(0);
    expect(figures.kubelet.min).toBeGreaterThan(0);
  });

  it("replaces on the oldest supported kubelet with the new plugin standing by; the window is measured", async () => {
    await restartRealKubelet(inject("oldestKubeletBinary"));
    await waitForKubelet(inject("oldestKubeletVersion"));
    await scenario.waitForAllDevices(120_000);
    const figures = await scenario.rollOnce("info");
    console.log(describeRollout(`real node, Replace on kubelet ${inject("oldestKubeletVersion")}`, figures));
    expect(figures.rollout.violations).toEqual([]);
    // Auto on a kubelet before v1.37: replaced, with the new plugin started beside the old one and
    // standing by, unregistered, until the old one had stopped.
    expect([...figures.rollout.stoodBy]).toEqual([realNode()]);
    expect([...figures.rollout.reportedStandingBy], "the new plugin's report said StandingBy").toEqual([
      realNode(),
    ]);
    expect([...figures.rollout.replaced]).toEqual([]);
    // The kubelet has no healthy device from the old plugin's stop to the new one's registration (a
    // kubelet before v1.37 marks the resource unhealthy when a plugin goes): a window short enough that
    // the 20 ms poll may not see it, held to the Replace window's target. The node was fenced before the old plugin
    // stopped and until the new one's devices were advertised, so the scheduler placed no pod into the
    // window: not one failed admission.
    expect(figures.kubelet.samples).toBeGreaterThan(0);
    expect(figures.kubelet.zeroMs).toBeLessThanOrEqual(REPLACE_WINDOW_MS);
    expect(figures.fenceMs).toBeGreaterThan(figures.kubelet.zeroMs);
    expect(figures.allocatable.samples).toBeGreaterThan(0);
    expect(figures.allocatable.gaps).toEqual([]);
    expect(figures.pods.rejected).toEqual([]);
    expect(figures.pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
  });
});
