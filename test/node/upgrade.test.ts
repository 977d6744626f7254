// Plugin upgrades on the real node, with a workload creating pods through the scheduler throughout: on the
// pinned kubelet (1.37.2, per-socket endpoints) Auto surges and not one pod fails admission, and the Node
// never advertises 0; restarted as the oldest supported kubelet (1.35.4), Auto replaces, and the window the
// node advertises nothing and the pods it failed are measured (docs/benchmarks.md).
import { CustomObjectsApi, Watch, type V1Node } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "../e2e/support.js";
import { configStatusWhere, podStream, RolloutWatch, type PodStreamResult } from "../e2e/upgrade-support.js";
import {
  advertised,
  core,
  KubeletAllocatablePoller,
  dpoImage,
  ON_REAL_NODE,
  realNode,
  restartRealKubelet,
  waitForAdvertised,
  workloadImage,
} from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("node-upg");
const RESOURCE = `upgrade.example/${NAME}`;
const DEVICES = 4;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
let operator: OperatorProcess;
let pinnedKubelet: string;

const statusWhere = (
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs = 180_000,
): Promise<DevicePluginConfigStatus> => configStatusWhere(custom, NAME, what, pred, timeoutMs);

/** The real node's allocatable for the resource as a Node watch sees it: its lowest, and how long it sat at 0. */
class AllocatableWatch {
  min = Number.POSITIVE_INFINITY;
  zeroMs = 0;
  private zeroSince: number | undefined;
  private abort: (() => void) | undefined;

  async start(): Promise<void> {
    const request = await new Watch(kc).watch(
      "/api/v1/nodes",
      { fieldSelector: `metadata.name=${realNode()}` },
      (_type: string, node: V1Node) => this.seen(advertised(node, RESOURCE).allocatable),
      () => undefined,
    );
    this.abort = () => request.abort();
  }

  private seen(allocatable: number): void {
    this.min = Math.min(this.min, allocatable);
    if (allocatable === 0 && this.zeroSince === undefined) this.zeroSince = performance.now();
    if (allocatable > 0 && this.zeroSince !== undefined) {
      this.zeroMs += performance.now() - this.zeroSince;
      this.zeroSince = undefined;
    }
  }

  stop(): { min: number; zeroMs: number } {
    this.abort?.();
    if (this.zeroSince !== undefined) this.zeroMs += performance.now() - this.zeroSince;
    return { min: this.min, zeroMs: Math.round(this.zeroMs) };
  }
}

/** Changes the plugin pods (their log level) so the config rolls to a new revision, and waits for the end. */
async function rollOnce(logLevel: "debug" | "info"): Promise<{
  rollout: RolloutWatch;
  allocatable: { min: number; zeroMs: number };
  kubelet: { min: number; zeroMs: number; samples: number };
  pods: PodStreamResult;
  ms: number;
}> {
  const before = await statusWhere("a settled revision", (s) => s.upgrade?.phase === "Complete");
  const rollout = new RolloutWatch(1);
  await rollout.start(kc, NAMESPACE, NAME);
  const allocatable = new AllocatableWatch();
  await allocatable.start();
  const kubelet = new KubeletAllocatablePoller(RESOURCE);
  kubelet.start();
  const stream = podStream(kc, "default", RESOURCE, {
    perSecond: 2,
    holdMs: 1_500,
    name: `${NAME}-${logLevel}`,
    image: workloadImage(),
    command: ["sleep", "3600"],
    ...ON_REAL_NODE,
  });
  const started = performance.now();
  await custom.patchClusterCustomObject({
    ...GROUP,
    name: NAME,
    body: [{ op: "replace", path: "/spec/plugin/logLevel", value: logLevel }],
  });
  await statusWhere(
    `rolled from ${before.upgrade!.updateRevision}`,
    (s) => s.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== before.upgrade!.updateRevision,
  );
  const ms = Math.round(performance.now() - started);
  // Keep pods coming a little after the end, so the new plugin's first admissions count too.
  await waitForAdvertised(RESOURCE, { capacity: DEVICES, allocatable: DEVICES });
  const pods = await stream.stop();
  rollout.stop();
  return { rollout, allocatable: allocatable.stop(), kubelet: await kubelet.stop(), pods, ms };
}

beforeAll(async () => {
  pinnedKubelet = (await core().readNode({ name: realNode() })).status!.nodeInfo!.kubeletVersion;
  await installDpo();
  operator = await startOperator(["--status-write-interval", "250"], {}, { pluginImage: dpoImage() });
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "u" } },
        plugin: { logLevel: "info" },
        upgrade: { strategy: "Auto", maxUnavailable: 1, progressDeadlineSeconds: 120 },
        ...ON_REAL_NODE,
      },
    },
  });
  await statusWhere(
    "Ready on the real node",
    (s) => s.conditions?.find((c) => c.type === "Ready")?.status === "True",
  );
  await waitForAdvertised(RESOURCE, { capacity: DEVICES, allocatable: DEVICES });
}, 300_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await operator?.stop();
  // Later files expect the pinned kubelet back.
  const node = await core().readNode({ name: realNode() });
  if (node.status?.nodeInfo?.kubeletVersion !== pinnedKubelet) {
    await restartRealKubelet(`${inject("clusterBinDir")}/kubelet`);
    await waitForKubelet(pinnedKubelet);
  }
}, 300_000);

async function waitForKubelet(version: string): Promise<void> {
  await waitFor(
    `${realNode()} to run kubelet ${version} and be Ready`,
    async (observe) => {
      const node = await core().readNode({ name: realNode() });
      const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status;
      observe({ version: node.status?.nodeInfo?.kubeletVersion, ready });
      return node.status?.nodeInfo?.kubeletVersion === version && ready === "True";
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

describe("plugin upgrades on the real node", () => {
  it(`surges on the pinned kubelet: 0 failed admissions, the Node never at 0`, async () => {
    const { rollout, allocatable, kubelet, pods, ms } = await rollOnce("debug");
    console.log(
      `Surge on kubelet ${pinnedKubelet}: rollout ${ms} ms, Node allocatable min ${allocatable.min} (0 for ${allocatable.zeroMs} ms), ` +
        `kubelet's own min ${kubelet.min} (0 for ${kubelet.zeroMs} ms, ${kubelet.samples} samples), ` +
        `${pods.created} pods created, ${[...pods.admitted.values()].reduce((a, b) => a + b, 0)} admitted, ${pods.rejected.length} rejected`,
    );
    expect(rollout.violations).toEqual([]);
    expect([...rollout.surged]).toEqual([realNode()]);
    expect(pods.rejected).toEqual([]);
    expect(pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
    expect(allocatable.min).toBeGreaterThan(0);
    expect(kubelet.samples).toBeGreaterThan(0);
    expect(kubelet.min).toBeGreaterThan(0);
  });

  it("replaces on the oldest supported kubelet, and the window is measured", async () => {
    await restartRealKubelet(inject("oldestKubeletBinary"));
    await waitForKubelet(inject("oldestKubeletVersion"));
    await waitForAdvertised(RESOURCE, { capacity: DEVICES, allocatable: DEVICES }, 120_000);
    const { rollout, allocatable, kubelet, pods, ms } = await rollOnce("info");
    console.log(
      `Replace on kubelet ${inject("oldestKubeletVersion")}: rollout ${ms} ms, Node allocatable min ${allocatable.min} (0 for ${allocatable.zeroMs} ms), ` +
        `kubelet's own min ${kubelet.min} (0 for ${kubelet.zeroMs} ms, ${kubelet.samples} samples), ` +
        `${pods.created} pods created, ${[...pods.admitted.values()].reduce((a, b) => a + b, 0)} admitted, ${pods.rejected.length} rejected: ` +
        JSON.stringify(pods.rejected.slice(0, 3)),
    );
    expect(rollout.violations).toEqual([]);
    expect([...rollout.replaced]).toEqual([realNode()]);
    // Replace stops the old plugin before the new one registers: only rejections for want of devices.
    for (const rejected of pods.rejected) expect(rejected.reason).toBe("UnexpectedAdmissionError");
    // The kubelet itself had no healthy device for a while: that window is what Replace costs.
    expect(kubelet.min).toBe(0);
    expect(pods.admitted.get(realNode()) ?? 0).toBeGreaterThan(0);
  });
});
