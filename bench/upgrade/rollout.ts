// One rollout measured: the change applied with the workload and the watches running, until every node
// runs the new revision with its devices back; and the result the tables are made of.
import type { KubeConfig, V1Node, V1Pod } from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { configLabelValue } from "../../src/contract/names.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { PODS } from "../../src/kube/resources.js";
import { waitFor } from "../../tools/cluster/wait.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { memAvailableMiB } from "../proc.js";
import { DEVICES, NAMESPACE, ROLLOUT_TIMEOUT_MS } from "./knobs.js";
import { startMemorySampler, startScheduledWorkload, startWorkload, type ScheduledFigures } from "./load.js";
import type { ScaleFigures } from "./scale-figures.js";
import { allocatableOf, Timeline, ZeroWindows, type IncumbentView } from "./timeline.js";

export type Scenario = "surge" | "replace" | "standby" | "takeover" | "baseline";

export interface Result {
  scenario: Scenario;
  rolloutMs: number;
  /** dpo's own status says Complete (undefined for the baseline). */
  completeMs: number | undefined;
  /** Per node, the summed time at allocatable 0 during the rollout. */
  zeroWindowsMs: number[];
  /** Nodes that reached allocatable 0 at all. */
  nodesAtZero: number;
  admissions: number;
  failures: number;
  failedNodes: number;
  failureSamples: string[];
  /** The pods created through the API and bound by the scheduler, and how the simulated kubelets took them. */
  scheduled: ScheduledFigures;
  steps: ReturnType<Timeline["summary"]>;
  gaps: ReturnType<Timeline["gaps"]>;
  /** Plugin processes running at once, at most; their summed RSS then and per process. */
  peakProcesses: number;
  peakPluginRssMiB: number;
  rssPerProcessMiB: number[];
  anonPerProcessMiB: number[];
  minMemAvailableMiB: number;
  /** The benchmark process's own RSS at most (the simulator; with processless plugins, them too). */
  peakBenchRssMiB: number;
  /** MemAvailable once the scenario's plugins were gone, for the system-wide cost of its processes. */
  memAvailableAfterMiB?: number;
  /** The operator's figures over the rollout (dpo's scenarios). */
  scale?: ScaleFigures;
  /** The takeover: the pods that held devices from before it began, and how many of them lost them. */
  holders?: HolderFigures;
}

/** Pods that hold a device from the start of a rollout to its end, as the kubelet sees them at the end. */
export interface HolderFigures {
  pods: number;
  /** Gone, no longer Running, or holding a device the node's kubelet no longer lists as healthy. */
  lost: number;
  samples: string[];
}

/** MemAvailable a few seconds after processes exited (the kernel frees their memory at once). */
export async function settledMemAvailable(): Promise<number> {
  await sleep(3_000);
  return memAvailableMiB();
}

/**
 * Every node runs exactly one plugin process of the config, of `revision`, and no plugin of the incumbent
 * slot (a takeover's), and its Node advertises every device: the rollout is over as the kubelet sees it,
 * whatever any controller's status says.
 */
export function allOnRevision(
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  config: string,
  resource: string,
  revision: string,
  incumbentSlot?: string,
): { done: boolean; moved: number; pending: string[] } {
  const prefix = `${NAMESPACE}/${configLabelValue(config)}/`;
  const byName = new Map(nodeInformer.list().map((n) => [n.metadata!.name!, n]));
  let moved = 0;
  const pending: string[] = [];
  for (const node of nodes) {
    const plugins = sim.plugins(node);
    const running = plugins.filter((p) => p.running && p.slot.startsWith(prefix));
    const incumbent = plugins.some((p) => p.running && p.slot === incumbentSlot);
    const advertised = byName.get(node);
    const api = advertised === undefined ? undefined : allocatableOf(advertised, resource);
    const kubelet = sim.capacity(node, resource)?.allocatable;
    if (
      running.length === 1 &&
      !incumbent &&
      running[0]!.slot === `${prefix}${revision}` &&
      api === DEVICES &&
      kubelet === DEVICES
    ) {
      moved++;
    } else if (pending.length < 5) {
      // What a timeout prints: the first few nodes not there yet, and why.
      pending.push(
        `${node}: plugins [${running.map((p) => p.slot.slice(prefix.length)).join(", ")}]${incumbent ? " and the incumbent's" : ""}, allocatable ${api} (Node) / ${kubelet} (kubelet)`,
      );
    }
  }
  return { done: moved === nodes.length, moved, pending };
}

export async function waitAllAdvertise(
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  resource: string,
  what: string,
): Promise<void> {
  await waitFor(
    what,
    (observe) => {
      const byName = new Map(nodeInformer.list().map((n) => [n.metadata!.name!, n]));
      const ready = nodes.filter((n) => allocatableOf(byName.get(n)!, resource) === DEVICES).length;
      observe(`${ready}/${nodes.length}`);
      return ready === nodes.length;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 500 },
  );
}

/** Waits until no plugin process of the config runs on any node (its pods are gone). */
export async function waitPluginsGone(
  sim: KubeletSimulator,
  config: string,
  namespace = NAMESPACE,
): Promise<void> {
  const prefix = `${namespace}/${configLabelValue(config)}/`;
  await waitFor(
    `the plugins of ${config} to stop`,
    (observe) => {
      const left = sim.plugins().filter((p) => p.running && p.slot.startsWith(prefix)).length;
      observe(left);
      return left === 0;
    },
    { timeoutMs: 300_000, intervalMs: 500 },
  );
}

interface Measured {
  rolloutMs: number;
  zero: { perNode: number[]; nodesAtZero: number };
  work: { admissions: number; failures: number; failedNodes: number; samples: string[] };
  scheduled: ScheduledFigures;
  steps: ReturnType<Timeline["summary"]>;
  gaps: ReturnType<Timeline["gaps"]>;
  mem: ReturnType<ReturnType<typeof startMemorySampler>["stop"]>;
}

/**
 * Starts the workload and the watches, applies the change, waits until every node is on `revision()` (and,
 * for a takeover, runs no plugin of the incumbent).
 */
export async function measure(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  config: string,
  resource: string,
  fromRevision: string,
  change: () => Promise<void>,
  revision: () => string | undefined,
  onTick?: (elapsedMs: number) => Promise<void>,
  incumbent?: IncumbentView,
): Promise<Measured> {
  const pods = createInformer<V1Pod>(kc, {
    resource: PODS,
    namespace: NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(config)}`,
  });
  pods.start();
  await pods.waitForSync();
  const timeline = new Timeline(sim, pods, nodes, config, resource, fromRevision, incumbent);
  const zero = new ZeroWindows(resource, nodeInformer, timeline);
  const workload = startWorkload(sim, nodes, resource);
  const scheduled = startScheduledWorkload(kc, resource, config);
  const mem = startMemorySampler(sim);
  // Whatever fails below, the workloads and watches stop: left running they would keep the process alive.
  let stopping: Promise<Omit<Measured, "rolloutMs" | "zero" | "steps" | "gaps">> | undefined;
  const stopAll = (): Promise<Omit<Measured, "rolloutMs" | "zero" | "steps" | "gaps">> =>
    (stopping ??= (async () => {
      const work = await workload.stop();
      const sched = await scheduled.stop();
      timeline.stop();
      await pods.stop();
      return { work, scheduled: sched, mem: mem.stop() };
    })());
  let t0: number;
  let rolloutMs: number | undefined;
  try {
    // A second of workload before the change: every node admits before anything moves.
    await sleep(1_000);
    zero.start();
    timeline.start();
    t0 = performance.now();
    await change();
    let last: ReturnType<typeof allOnRevision> | undefined;
    let lastLog = 0;
    while (rolloutMs === undefined) {
      const elapsed = performance.now() - t0;
      if (elapsed > ROLLOUT_TIMEOUT_MS) {
        throw new Error(
          `${config}: rollout not done after ${elapsed} ms; last seen: ${last === undefined ? "no new revision" : `${last.moved}/${nodes.length} moved, ${last.pending.join("; ")}`}`,
        );
      }
      const rev = revision();
      if (rev !== undefined) {
        const state = allOnRevision(sim, nodeInformer, nodes, config, resource, rev, incumbent?.slot);
        last = state;
        if (state.done) rolloutMs = performance.now() - t0;
        else if (elapsed - lastLog > 15_000) {
          lastLog = elapsed;
          console.error(
            `bench-upgrade: ${config}: ${state.moved}/${nodes.length} nodes moved after ${(elapsed / 1000).toFixed(0)} s`,
          );
        }
      }
      await onTick?.(elapsed);
      await sleep(100);
    }
    // The workload runs a second past the end, so a late drop would still count.
    await sleep(1_000);
  } catch (err) {
    await stopAll().catch(() => undefined);
    throw err;
  }
  const done = await stopAll();
  return {
    rolloutMs,
    zero: zero.stop(nodes),
    ...done,
    steps: timeline.summary(),
    gaps: timeline.gaps(),
  };
}

export function toResult(scenario: Scenario, m: Measured, completeMs: number | undefined): Result {
  return {
    scenario,
    rolloutMs: m.rolloutMs,
    completeMs,
    zeroWindowsMs: m.zero.perNode,
    nodesAtZero: m.zero.nodesAtZero,
    admissions: m.work.admissions,
    failures: m.work.failures,
    failedNodes: m.work.failedNodes,
    failureSamples: m.work.samples,
    scheduled: m.scheduled,
    steps: m.steps,
    gaps: m.gaps,
    peakProcesses: m.mem.peakProcesses,
    peakPluginRssMiB: m.mem.peakRss,
    rssPerProcessMiB: m.mem.perProcess,
    anonPerProcessMiB: m.mem.anonPerProcess,
    minMemAvailableMiB: m.mem.minAvailable,
    peakBenchRssMiB: m.mem.peakSelfRss,
  };
}
