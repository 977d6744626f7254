// A takeover on the real node (ADR 0012, issue 32 acceptance 1): the upstream sample device plugin, from an
// image built here, serves example.com/resource as a DaemonSet dpo does not own, a pod holds one of its
// devices, and a config with spec.takeover hands the node over to dpo's plugin (Mock, the same ids) while a
// workload creates pods through the scheduler. On the pinned kubelet (1.37.2, Surge): a config whose plugin
// never registers is rolled back and the node stays the incumbent's; then the takeover: 0 failed admissions,
// allocatable never 0, the holder keeps its device, no id held twice, the incumbent parked with no pod.
// Restarted as the oldest supported kubelet (1.35.4, Replace behind the fence with dpo's plugin standing by
// for the incumbent's socket): the same, with the kubelet's window held to the Replace window's target.
import type { V1DaemonSetUpdateStrategy } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, repo, startOperator, type OperatorProcess } from "../e2e/support.js";
import {
  core,
  dpoImage,
  realNode,
  removeConfig,
  restartRealKubelet,
  waitForKubelet,
  workloadImage,
} from "./support.js";
import {
  apps,
  createHolder,
  createTakeoverConfig,
  deletePod,
  describeTakeover,
  heldTwice,
  importSamplePlugin,
  incumbentDaemonSet,
  incumbentPods,
  INCUMBENT,
  kubeletHolders,
  readIncumbent,
  SAMPLE_IDS,
  statusWhere,
  underLoad,
  waitForDevices,
  waitForIncumbentServing,
} from "./takeover-scenario.js";
import { REPLACE_WINDOW_MS } from "./upgrade-scenario.js";

/** An image with no `plugin` command: a plugin container from it never starts, so it never registers. */
const NEVER_REGISTERS = "dpo.dev/busybox";

let operator: OperatorProcess;
let pinnedKubelet: string;
/** The incumbent's update strategy as the API server stored it (with its defaults), before any takeover. */
let ownStrategy: V1DaemonSetUpdateStrategy | undefined;
const holders: string[] = [];

beforeAll(async () => {
  pinnedKubelet = (await core().readNode({ name: realNode() })).status!.nodeInfo!.kubeletVersion;
  const image = await importSamplePlugin();
  await installDpo();
  // The operator runs as its ServiceAccount: the takeover's rights, as the opt-in component grants them.
  for (const file of ["cluster_role.yaml", "cluster_role_binding.yaml"])
    await kubectl(["apply", "--server-side", "-f", `${repo}/config/components/takeover/${file}`]);
  // The rollback's plugin image is the workload's busybox, which the policy must let through.
  operator = await startOperator(
    ["--status-write-interval", "250"],
    { DPO_PLUGIN_IMAGE_ALLOW: [dpoImage().replace(/:[^:/]+$/, ""), NEVER_REGISTERS].join(",") },
    { pluginImage: dpoImage() },
  );
  const created = await apps().createNamespacedDaemonSet({
    namespace: INCUMBENT.namespace,
    body: incumbentDaemonSet(image),
  });
  ownStrategy = created.spec?.updateStrategy;
  expect(ownStrategy?.type).toBe("RollingUpdate");
  await waitForIncumbentServing();
}, 300_000);

afterAll(async () => {
  for (const name of holders) await deletePod(name);
  await apps()
    .deleteNamespacedDaemonSet(INCUMBENT)
    .catch(() => undefined);
  await operator?.stop();
  const node = await core().readNode({ name: realNode() });
  if (node.status?.nodeInfo?.kubeletVersion !== pinnedKubelet) {
    await restartRealKubelet(`${inject("clusterBinDir")}/kubelet`);
    await waitForKubelet(pinnedKubelet);
  }
}, 300_000);

/** Runs a test's steps, then removes its config and holder whatever happened, so the next starts clean. */
async function cleanly(config: string, steps: () => Promise<void>): Promise<void> {
  try {
    await steps();
  } finally {
    await removeConfig(config);
    for (const name of holders.splice(0)) await deletePod(name);
  }
}

/** A holder pod, its devices as the kubelet records them before the takeover. */
async function holder(tag: string): Promise<{ name: string; ids: string[] }> {
  const name = uniqueName(`holder-${tag}`);
  holders.push(name);
  await createHolder(name);
  const ids = (await kubeletHolders()).get(`default/${name}`) ?? [];
  expect(ids, `${name}'s devices before the takeover`).toHaveLength(1);
  return { name, ids };
}

/** After a takeover: the holder kept its device, no id is held twice, and the incumbent is parked. */
async function expectHandedOver(config: string, kept: { name: string; ids: string[] }): Promise<void> {
  const held = await kubeletHolders();
  expect(held.get(`default/${kept.name}`), "the holder's devices after the takeover").toEqual(kept.ids);
  expect(heldTwice(held), `device ids held by two pods: ${JSON.stringify([...held])}`).toEqual([]);
  for (const ids of held.values()) for (const id of ids) expect(SAMPLE_IDS).toContain(id);
  const status = await statusWhere(config, "the takeover Complete", (s) => s.takeover?.phase === "Complete");
  expect(status.takeover).toEqual({
    incumbent: `${INCUMBENT.namespace}/${INCUMBENT.name}`,
    phase: "Complete",
  });
  expect(await incumbentPods(), "the incumbent's pods after the takeover").toEqual([]);
  const parked = await readIncumbent();
  expect(parked.spec?.updateStrategy).toEqual({ type: "OnDelete" });
  // The DaemonSet controller counts the parked incumbent's nodes on its own time, after the operator's write.
  await waitFor("the parked incumbent scheduled on no node", async (observe) => {
    const { status } = await readIncumbent();
    observe(status);
    return status?.desiredNumberScheduled === 0;
  });
  expect((await core().readNamespacedPod({ namespace: "default", name: kept.name })).status?.phase).toBe(
    "Running",
  );
}

/** The config deleted: the incumbent back as it was, serving, and dpo's plugin gone. */
async function giveBack(config: string): Promise<void> {
  await removeConfig(config);
  const restored = await waitForIncumbentServing();
  expect(restored.spec?.updateStrategy).toEqual(ownStrategy);
  expect(restored.spec?.template.spec?.affinity).toBeUndefined();
}

describe("a takeover from the upstream sample device plugin on the real node", () => {
  it("rolls back a config whose plugin never registers: the node stays the incumbent's", async () => {
    const config = uniqueName("takeover-rb");
    await cleanly(config, async () => {
      const before = await incumbentPods();
      expect(before).toHaveLength(1);
      const kept = await holder("rb");
      const figures = await underLoad(config, "rollback", async () => {
        await createTakeoverConfig(config, { pluginImage: workloadImage(), progressDeadlineSeconds: 20 });
        await statusWhere(config, "RolledBack after the deadline", (s) => s.upgrade?.phase === "RolledBack");
      });
      console.log(describeTakeover(`real node, takeover rolled back on kubelet ${pinnedKubelet}`, figures));
      expect(figures.pods.rejected).toEqual([]);
      expect(figures.holders.samples).toBeGreaterThan(0);
      expect(figures.holders.violations, "what the kubelet's PodResources showed held").toEqual([]);
      expect(figures.pods.unscheduled).toEqual([]);
      expect(figures.pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
      expect(figures.allocatable.samples).toBeGreaterThan(0);
      expect(figures.allocatable.gaps).toEqual([]);
      expect(figures.allocatable.min).toBe(SAMPLE_IDS.length);
      // The incumbent's own pod served throughout: never replaced, never stopped.
      expect(await incumbentPods()).toEqual(before);
      expect((await kubeletHolders()).get(`default/${kept.name}`)).toEqual(kept.ids);
      await giveBack(config);
      expect(await incumbentPods()).toEqual(before);
    });
  });

  it("hands the node over on the pinned kubelet (Surge): 0 failed admissions, never 0 devices", async () => {
    const config = uniqueName("takeover-surge");
    await cleanly(config, async () => {
      const kept = await holder("surge");
      const figures = await underLoad(config, "surge", async () => {
        await createTakeoverConfig(config, { progressDeadlineSeconds: 120 });
        await statusWhere(
          config,
          "the takeover Complete",
          (s) =>
            s.takeover?.phase === "Complete" && s.upgrade?.phase === "Complete" && s.upgrade.updated === 1,
        );
      });
      console.log(describeTakeover(`real node, takeover (Surge) on kubelet ${pinnedKubelet}`, figures));
      expect(figures.pods.rejected).toEqual([]);
      expect(figures.holders.samples).toBeGreaterThan(0);
      expect(figures.holders.violations, "what the kubelet's PodResources showed held").toEqual([]);
      expect(figures.pods.unscheduled).toEqual([]);
      expect(figures.pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
      expect(figures.allocatable.samples).toBeGreaterThan(0);
      expect(figures.allocatable.gaps).toEqual([]);
      expect(figures.allocatable.min).toBe(SAMPLE_IDS.length);
      expect(figures.kubelet.samples).toBeGreaterThan(0);
      expect(figures.kubelet.min).toBeGreaterThan(0);
      expect(figures.fenceMs, "a surging node is never fenced").toBe(0);
      expect(figures.stoodBy, "dpo's plugin registers beside the incumbent").toBe(false);
      await expectHandedOver(config, kept);
      await giveBack(config);
    });
  });

  it("hands the node over on the oldest kubelet (Replace, standing by for the incumbent's socket)", async () => {
    await restartRealKubelet(inject("oldestKubeletBinary"));
    await waitForKubelet(inject("oldestKubeletVersion"));
    await waitForDevices();
    const config = uniqueName("takeover-replace");
    await cleanly(config, async () => {
      const kept = await holder("replace");
      const figures = await underLoad(config, "replace", async () => {
        await createTakeoverConfig(config, { progressDeadlineSeconds: 120 });
        await statusWhere(
          config,
          "the takeover Complete",
          (s) =>
            s.takeover?.phase === "Complete" && s.upgrade?.phase === "Complete" && s.upgrade.updated === 1,
        );
      });
      console.log(
        describeTakeover(
          `real node, takeover (Replace) on kubelet ${inject("oldestKubeletVersion")}`,
          figures,
        ),
      );
      expect(figures.pods.rejected).toEqual([]);
      expect(figures.holders.samples).toBeGreaterThan(0);
      expect(figures.holders.violations, "what the kubelet's PodResources showed held").toEqual([]);
      expect(figures.pods.unscheduled).toEqual([]);
      expect(figures.pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
      expect(figures.allocatable.samples).toBeGreaterThan(0);
      expect(figures.allocatable.gaps).toEqual([]);
      // The kubelet has no healthy device from the incumbent's stop to dpo's registration: held to the
      // Replace window's target, and the node fenced for longer, so no pod was placed into it.
      expect(figures.kubelet.samples).toBeGreaterThan(0);
      expect(figures.kubelet.zeroMs).toBeLessThanOrEqual(REPLACE_WINDOW_MS);
      expect(figures.fenceMs).toBeGreaterThan(figures.kubelet.zeroMs);
      // dpo's plugin served beside the incumbent unregistered, and registered when its socket (dp.*) went.
      expect(figures.stoodBy, "a report of dpo's plugin said StandingBy").toBe(true);
      await expectHandedOver(config, kept);
      await giveBack(config);
    });
  });
});
