// bench-dra's switch scenario: a second config on every node switches spec.publish from DevicePlugin to
// DRA and back, while pods asking for `<resourceName>: 1` go through the real scheduler. Per node, the time
// from its old path stopping (allocatable 0, or its slices empty) to its new path advertising (slices with
// every device, or allocatable back); the whole switch's time; and the pods rejected at admission, counted
// as bench-upgrade counts them (UnexpectedAdmissionError on the pod's node).
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { NODES, PODS, RESOURCE_SLICES } from "../../src/kube/resources.js";
import { nodeKeys } from "../../src/operator/model/targeting.js";
import { podStream } from "../../tools/upgrade-load/pod-stream.js";
import { waitFor } from "../../tools/cluster/wait.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import type { AdmittedPod, RejectedPod } from "../../tools/kubelet-sim/workload-pods.js";
import { intKnob } from "../upgrade/knobs.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
export const SWITCH_CONFIG = "bench-dra-switch";
const SWITCH_DRIVER = "gpu.bench-dra-switch.example";
export const SWITCH_RESOURCE = "bench-dra-switch.example/x100";
const REPLACE_TAINT = nodeKeys(SWITCH_CONFIG).replace;
const SWITCH_DEVICES = 4;
const env = process.env;
/** Nodes switched at once (spec.upgrade.maxUnavailable). */
const SWITCH_MAX_UNAVAILABLE = intKnob(env, "DPO_BENCH_SWITCH_MAX_UNAVAILABLE", 10, 1);
/** Pods a second asking for `<resourceName>: 1` through the scheduler during each switch. */
const PODS_PER_S = intKnob(env, "DPO_BENCH_SCHEDULED_PODS_PER_S", 10);
/** 0: the switch to DRA only. */
const SWITCH_BACK = intKnob(env, "DPO_BENCH_SWITCH_BACK", 1) > 0;

type Path = "DevicePlugin" | "DRA";

interface Slice extends KubernetesObject {
  spec: { nodeName: string; devices?: unknown[] };
}

/** One direction's figures. */
export interface SwitchFigures {
  target: Path;
  totalMs: number;
  perNodeMs: number[];
  created: number;
  admitted: number;
  /**
   * Pods the simulated kubelet started with a device (each pod once): from the device plugin, or a prepared DRA claim. The rest of
   * `created` not rejected were still unscheduled when the stream stopped (a node between paths has none).
   */
  throughDevicePlugin: number;
  throughDra: number;
  unexpectedAdmission: number;
  otherRejections: number;
  rejectedNodes: number;
  /** Observations of a node advertising the name through both paths at once (want 0). */
  bothPaths: number;
  samples: string[];
}

/** Both paths of the switch config per node, from a Node and a ResourceSlice informer. */
class PathWatch {
  readonly allocatable = new Map<string, number>();
  private readonly slices = new Map<string, { node: string; devices: number }>();
  readonly stopped = new Map<string, number>();
  readonly advertised = new Map<string, number>();
  /** When each node was first seen carrying the switch config's Replace taint (the fence), this direction. */
  readonly fenced = new Map<string, number>();
  bothPaths = 0;
  private target: Path | undefined;
  private nodeInformer: Informer<V1Node> | undefined;
  private sliceInformer: Informer<Slice> | undefined;

  sliceDevices(node: string): number {
    let n = 0;
    for (const s of this.slices.values()) if (s.node === node) n += s.devices;
    return n;
  }

  async start(kc: KubeConfig): Promise<void> {
    this.nodeInformer = createInformer<V1Node>(kc, { resource: NODES });
    const node = (n: V1Node, gone = false): void => {
      const name = n.metadata?.name ?? "";
      this.allocatable.set(name, gone ? 0 : Number(n.status?.allocatable?.[SWITCH_RESOURCE] ?? "0"));
      const fence = (n.spec?.taints ?? []).some((t) => t.key === REPLACE_TAINT);
      if (fence && this.target !== undefined && !this.fenced.has(name))
        this.fenced.set(name, performance.now());
      this.observe(name);
    };
    this.nodeInformer.onAdd((n) => node(n));
    this.nodeInformer.onUpdate((_o, n) => node(n));
    this.nodeInformer.onDelete((n) => node(n, true));
    this.sliceInformer = createInformer<Slice>(kc, {
      resource: RESOURCE_SLICES,
      fieldSelector: `spec.driver=${SWITCH_DRIVER}`,
    });
    const slice = (s: Slice, gone = false): void => {
      const key = s.metadata?.name ?? "";
      if (gone) this.slices.delete(key);
      else this.slices.set(key, { node: s.spec.nodeName, devices: s.spec.devices?.length ?? 0 });
      this.observe(s.spec.nodeName);
    };
    this.sliceInformer.onAdd((s) => slice(s));
    this.sliceInformer.onUpdate((_o, s) => slice(s));
    this.sliceInformer.onDelete((s) => slice(s, true));
    this.nodeInformer.start();
    this.sliceInformer.start();
    await Promise.all([this.nodeInformer.waitForSync(), this.sliceInformer.waitForSync()]);
  }

  /** From now on, records each node's old path stopping and new path advertising for `target`. */
  arm(target: Path): void {
    this.target = target;
    this.stopped.clear();
    this.advertised.clear();
    this.fenced.clear();
  }

  private observe(node: string): void {
    const alloc = this.allocatable.get(node) ?? 0;
    const devices = this.sliceDevices(node);
    if (alloc > 0 && devices > 0) this.bothPaths++;
    if (this.target === undefined) return;
    const now = performance.now();
    const [old, next] = this.target === "DRA" ? [alloc, devices] : [devices, alloc];
    if (old === 0 && !this.stopped.has(node)) this.stopped.set(node, now);
    if (old === 0 && next === SWITCH_DEVICES && !this.advertised.has(node)) this.advertised.set(node, now);
  }

  async stop(): Promise<void> {
    await this.nodeInformer?.stop();
    await this.sliceInformer?.stop();
  }
}

/**
 * Each rejected pod of the stream against its node's switch: when the bench saw it bound, and when the
 * simulated kubelet rejected it, from the node's fence (first seen carrying the Replace taint); with when
 * the node's old path stopped. Printed to stderr, to tell a scheduler that bound past the fence from a
 * pod bound before it and admitted after the old plugin stopped.
 */
class RejectionTrace {
  private readonly bound = new Map<string, number>();
  /** The pod's PodScheduled condition time (the scheduler's, whole seconds). */
  private readonly scheduled = new Map<string, string>();
  private readonly rejections: { pod: string; node: string; at: number; message: string }[] = [];
  private informer: Informer<V1Pod> | undefined;

  readonly rejected = (pod: RejectedPod): void => {
    this.rejections.push({ pod: pod.pod, node: pod.node, at: performance.now(), message: pod.message });
  };

  async start(kc: KubeConfig, namespace: string, name: string): Promise<void> {
    this.informer = createInformer<V1Pod>(kc, {
      resource: PODS,
      namespace,
      labelSelector: `dpo.dev/e2e-workload=${name}`,
    });
    const seen = (pod: V1Pod): void => {
      const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
      if (pod.spec?.nodeName !== undefined && !this.bound.has(key)) this.bound.set(key, performance.now());
      const condition = pod.status?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "True");
      if (condition?.lastTransitionTime !== undefined)
        this.scheduled.set(key, new Date(condition.lastTransitionTime).toISOString().slice(11, 19));
    };
    this.informer.onAdd(seen);
    this.informer.onUpdate((_o, pod) => seen(pod));
    this.informer.start();
    await this.informer.waitForSync();
  }

  async stop(): Promise<void> {
    await this.informer?.stop();
  }

  print(target: Path, paths: PathWatch): void {
    // Wall-clock times of day, to set beside the operator's log (its Node patches) and the control plane's.
    const at = (t: number | undefined): string =>
      t === undefined ? "?" : new Date(performance.timeOrigin + t).toISOString().slice(11, 23);
    for (const r of this.rejections) {
      console.error(
        `bench-dra: switch to ${target}: ${r.pod} rejected on ${r.node}: fence seen ${at(paths.fenced.get(r.node))}, scheduled ${this.scheduled.get(r.pod) ?? "?"}, bound seen ${at(this.bound.get(r.pod))}, old path stopped ${at(paths.stopped.get(r.node))}, rejected ${at(r.at)} (${r.message})`,
      );
    }
  }
}

async function configStatus(custom: CustomObjectsApi): Promise<DevicePluginConfigStatus | undefined> {
  const obj = (await custom.getClusterCustomObject({ ...GROUP, name: SWITCH_CONFIG })) as {
    status?: DevicePluginConfigStatus;
  };
  return obj.status;
}

/** Creates the switch config on the device plugin path and waits until every node advertises it. */
async function createOnDevicePlugin(custom: CustomObjectsApi, paths: PathWatch, nodes: readonly string[]) {
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: SWITCH_CONFIG },
      spec: {
        resourceName: SWITCH_RESOURCE,
        backend: { type: "Mock", mock: { devices: SWITCH_DEVICES, idPrefix: "s" } },
        publish: "DevicePlugin",
        dra: { driverName: SWITCH_DRIVER },
        upgrade: { maxUnavailable: SWITCH_MAX_UNAVAILABLE, progressDeadlineSeconds: 600 },
      },
    },
  });
  await waitFor(
    `every node advertising ${SWITCH_RESOURCE} through its device plugin, the rollout Complete`,
    async (observe) => {
      const status = await configStatus(custom);
      const full = nodes.filter((n) => paths.allocatable.get(n) === SWITCH_DEVICES).length;
      const ready = status?.conditions?.find((c) => c.type === "Ready");
      const mapping = status?.conditions?.find((c) => c.type === "ExtendedResourceMapping");
      observe({
        full,
        ready: [ready?.status, ready?.message],
        phase: status?.upgrade?.phase,
        mapping: mapping?.status,
      });
      // Ready is not waited for: at 100 nodes on a loaded machine it lagged the rollout by minutes (see
      // docs/benchmarks.md); what the switch needs is every node on the device plugin path, rolled out.
      return full === nodes.length && status?.upgrade?.phase === "Complete" ? status : undefined;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 5_000), intervalMs: 1_000 },
  );
}

async function switchTo(
  kc: KubeConfig,
  sim: KubeletSimulator,
  custom: CustomObjectsApi,
  paths: PathWatch,
  nodes: readonly string[],
  target: Path,
  workloads: string,
): Promise<SwitchFigures> {
  const before = await configStatus(custom);
  const fromRevision = before?.upgrade?.updateRevision;
  const bothBefore = paths.bothPaths;
  const stream = podStream(kc, workloads, SWITCH_RESOURCE, {
    perSecond: PODS_PER_S,
    holdMs: 1_000,
    name: `switch-${target.toLowerCase()}`,
  });
  const through = { dp: new Set<string>(), dra: new Set<string>() };
  const prefix = `${workloads}/switch-${target.toLowerCase()}-`;
  const admitted = (pod: AdmittedPod): void => {
    if (!pod.pod.startsWith(prefix)) return;
    if (pod.containers.some((c) => (c.devices[SWITCH_RESOURCE] ?? []).length > 0)) through.dp.add(pod.uid);
    if (Object.values(pod.cdiDeviceIds).some((ids) => ids.length > 0)) through.dra.add(pod.uid);
  };
  sim.on("podAdmitted", admitted);
  const trace = new RejectionTrace();
  await trace.start(kc, workloads, `switch-${target.toLowerCase()}`);
  sim.on("podRejected", trace.rejected);
  paths.arm(target);
  const started = performance.now();
  let totalMs = 0;
  let result: Awaited<ReturnType<typeof stream.stop>>;
  try {
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: SWITCH_CONFIG,
      body: [{ op: "replace", path: "/spec/publish", value: target }],
    });
    await waitFor(
      `every node on ${target} alone, the switch Complete`,
      async (observe) => {
        const done = nodes.filter((n) => paths.advertised.has(n)).length;
        const status = await configStatus(custom);
        const u = status?.upgrade;
        observe({ done, phase: u?.phase, updated: u?.updated, message: u?.message });
        if (done === nodes.length && totalMs === 0)
          totalMs = Math.max(...nodes.map((n) => paths.advertised.get(n)!)) - started;
        return done === nodes.length &&
          u?.phase === "Complete" &&
          u.updateRevision !== fromRevision &&
          u.updated === nodes.length
          ? true
          : undefined;
      },
      { timeoutMs: Math.max(600_000, nodes.length * 10_000), intervalMs: 1_000 },
    );
  } finally {
    result = await stream.stop();
    sim.off("podAdmitted", admitted);
    sim.off("podRejected", trace.rejected);
    await trace.stop();
  }
  trace.print(target, paths);
  const unexpected = result.rejected.filter((r) => r.reason === "UnexpectedAdmissionError");
  return {
    target,
    totalMs,
    perNodeMs: nodes.map((n) => paths.advertised.get(n)! - paths.stopped.get(n)!),
    created: result.created,
    admitted: [...result.admitted.values()].reduce((a, b) => a + b, 0),
    throughDevicePlugin: through.dp.size,
    throughDra: through.dra.size,
    unexpectedAdmission: unexpected.length,
    otherRejections: result.rejected.length - unexpected.length,
    rejectedNodes: new Set(unexpected.map((r) => r.node)).size,
    bothPaths: paths.bothPaths - bothBefore,
    samples: [...new Set(result.rejected.map((r) => `${r.reason}: ${r.message}`))].slice(0, 3),
  };
}

/** The switch scenario: DevicePlugin → DRA, then back unless DPO_BENCH_SWITCH_BACK=0. */
export async function switchScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodes: readonly string[],
  workloads: string,
): Promise<SwitchFigures[]> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const paths = new PathWatch();
  await paths.start(kc);
  const out: SwitchFigures[] = [];
  try {
    const t0 = performance.now();
    await createOnDevicePlugin(custom, paths, nodes);
    console.error(
      `bench-dra: switch config on the device plugin path on ${nodes.length} nodes after ${Math.round((performance.now() - t0) / 1000)} s`,
    );
    for (const target of SWITCH_BACK ? (["DRA", "DevicePlugin"] as const) : (["DRA"] as const)) {
      console.error(`bench-dra: switching to ${target}`);
      out.push(await switchTo(kc, sim, custom, paths, nodes, target, workloads));
    }
  } finally {
    await paths.stop();
  }
  return out;
}

export const SWITCH_SETUP = {
  maxUnavailable: SWITCH_MAX_UNAVAILABLE,
  podsPerS: PODS_PER_S,
  devices: SWITCH_DEVICES,
};
