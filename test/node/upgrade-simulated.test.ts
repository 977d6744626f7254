// The real node's upgrade scenario (upgrade.test.ts) on a simulated node of the same cluster: the same config,
// workload and measurements, with the simulated kubelet as 1.37.2 (Surge) and then as 1.35.4 (Replace), so
// docs/benchmarks.md can set the simulator's windows beside the real kubelet's.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { injectedCluster, kubeConfigFromInjected, uniqueName } from "../cluster/helpers.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import { HOST_POD_RESOURCES_DIR, KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { dpoImage } from "./support.js";
import { describeRollout, REPLACE_WINDOW_MS, UpgradeScenario } from "./upgrade-scenario.js";

let operator: OperatorProcess;
let sim: KubeletSimulator | undefined;
let scenario: UpgradeScenario;
let node: string;

/** (Re)starts the simulator with the node's kubelet at `version`; its plugins start again as a kubelet's would. */
async function simulate(version: string): Promise<void> {
  await sim?.stop();
  sim = await KubeletSimulator.start({
    kubeconfig: kubeConfigFromInjected(),
    nodes: [node],
    kubeletVersions: { [node]: version },
    // As a real kubelet: device counts reach the Node at its 10 s status sync.
    nodeStatusUpdateIntervalMs: 10_000,
  });
}

beforeAll(async () => {
  node = injectedCluster().nodeNames[0]!;
  await installDpo();
  await simulate(inject("clusterKubernetesVersion"));
  operator = await startOperator(["--status-write-interval", "250"], {}, { pluginImage: dpoImage() });
  scenario = new UpgradeScenario(uniqueName("sim-upg"), {
    node,
    placement: { nodeSelector: { "kubernetes.io/hostname": node } },
    podResourcesSocket: () => join(sim!.hostPath(node, HOST_POD_RESOURCES_DIR), "kubelet.sock"),
  });
  await scenario.create();
}, 300_000);

afterAll(async () => {
  await scenario?.delete();
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("the real node's upgrade scenario on a simulated node", () => {
  it("surges on a simulated 1.37.2 kubelet: 0 failed admissions", async () => {
    const figures = await scenario.rollOnce("debug");
    console.log(
      describeRollout(`simulated node, Surge on kubelet ${inject("clusterKubernetesVersion")}`, figures),
    );
    // Held as the real node's test holds it (upgrade.test.ts).
    expect(figures.rollout.violations).toEqual([]);
    expect([...figures.rollout.surged]).toEqual([node]);
    expect(figures.pods.rejected).toEqual([]);
    expect(figures.pods.admitted.get(node) ?? 0).toBeGreaterThan(0);
    expect(figures.allocatable.samples).toBeGreaterThan(0);
    expect(figures.allocatable.gaps).toEqual([]);
    expect(figures.allocatable.min).toBeGreaterThan(0);
    expect(figures.fenceMs, "a surging node is never fenced").toBe(0);
    expect(figures.kubelet.samples).toBeGreaterThan(0);
    expect(figures.kubelet.min).toBeGreaterThan(0);
  });

  it("replaces on a simulated oldest kubelet with the new plugin standing by; the window is measured", async () => {
    await simulate(inject("oldestKubeletVersion"));
    await scenario.waitForAllDevices(120_000);
    const figures = await scenario.rollOnce("info");
    console.log(
      describeRollout(`simulated node, Replace on kubelet ${inject("oldestKubeletVersion")}`, figures),
    );
    // Auto on a kubelet before v1.37: replaced, with the new plugin started beside the old one and
    // standing by, unregistered, until the old one had stopped.
    expect([...figures.rollout.stoodBy]).toEqual([node]);
    expect([...figures.rollout.reportedStandingBy], "the new plugin's report said StandingBy").toEqual([
      node,
    ]);
    expect([...figures.rollout.replaced]).toEqual([]);
    // Held to the real node's test: the window within the same target, and the fence keeps the scheduler's
    // pods out of it.
    expect(figures.rollout.violations).toEqual([]);
    expect(figures.kubelet.samples).toBeGreaterThan(0);
    expect(figures.kubelet.zeroMs).toBeLessThanOrEqual(REPLACE_WINDOW_MS);
    expect(figures.fenceMs).toBeGreaterThan(figures.kubelet.zeroMs);
    expect(figures.allocatable.samples).toBeGreaterThan(0);
    expect(figures.allocatable.gaps).toEqual([]);
    expect(figures.pods.rejected).toEqual([]);
    expect(figures.pods.admitted.get(node) ?? 0).toBeGreaterThan(0);
  });
});
