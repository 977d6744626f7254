// `make bench-upgrade`: a plugin upgrade on N simulated nodes, three ways, in one run on the local control
// plane (KWOK nodes, the kubelet simulator running a real `dpo plugin` process per plugin pod):
//
//   1. dpo, strategy Surge (kubelets v1.37.0: one endpoint per socket);
//   2. dpo, strategy Replace;
//   3. a baseline without the operator: the same rendered plugin DaemonSet with RollingUpdate
//      (maxUnavailable as dpo's), created and updated by this benchmark.
//
// For each: spec change → every node running only the new revision with its devices back (rollout
// time), per node the time the Node's status.allocatable for the resource is 0 (from a Node watch),
// and the failed admissions of a workload that keeps asking every node's kubelet for one device.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { API_VERSION, KIND } from "../src/api/v1beta1/config.js";
import { configLabelValue } from "../src/contract/names.js";
import { createInformer, type Informer } from "../src/kube/informer.js";
import { DAEMON_SETS, NODES, PODS } from "../src/kube/resources.js";
import { LABEL_REVISION, pluginObjectName, type RenderContext } from "../src/operator/render/index.js";
import type { ClusterHandle } from "../tools/cluster/cluster.js";
import { waitFor } from "../tools/cluster/wait.js";
import { KubeletSimulator, type PluginProcessInfo } from "../tools/kubelet-sim/node-simulator.js";
import {
  plainPluginRevision,
  rollPlainPluginTo,
  type PlainPluginRevision,
} from "../test/e2e/upgrade-support.js";
import { percentile } from "../tools/stats.js";
import { startBenchCluster, startBenchOperator } from "./support.js";

const NODE_COUNT = Number(process.env["DPO_BENCH_NODES"] ?? 100);
/** Nodes in flight at once, for dpo (spec.upgrade.maxUnavailable) and the baseline's RollingUpdate alike. */
const MAX_UNAVAILABLE = Number(process.env["DPO_BENCH_MAX_UNAVAILABLE"] ?? 1);
/** Admissions in flight at once, each on its own node, round-robin over every node. */
const WORKERS = Number(process.env["DPO_BENCH_WORKERS"] ?? 2);
/**
 * At most one admission per node per this many ms, so that a failure (which comes back at once) is not
 * retried in a tight loop: failed admissions are then about a node's time without devices / this.
 */
const ADMISSION_INTERVAL_MS = Number(process.env["DPO_BENCH_ADMISSION_INTERVAL_MS"] ?? 100);
const SCENARIOS = (process.env["DPO_BENCH_SCENARIOS"] ?? "baseline,surge,replace").split(",");
const KUBELET_VERSION = "v1.37.0";
const DEVICES = 4;
const NAMESPACE = "dpo-system";
const PLUGIN_IMAGE = "dpo:bench";
const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
/** The rendering context the operator runs with below (its flags' defaults, --plugin-image dpo:bench). */
const RENDER_CONTEXT: RenderContext = {
  namespace: NAMESPACE,
  operatorImage: PLUGIN_IMAGE,
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};
const ROLLOUT_TIMEOUT_MS = Math.max(600_000, NODE_COUNT * 20_000);

type Scenario = "surge" | "replace" | "baseline";

interface Result {
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
  steps: ReturnType<Timeline["summary"]>;
  gaps: ReturnType<Timeline["gaps"]>;
  /** Plugin processes running at once, at most; their summed RSS then and per process. */
  peakProcesses: number;
  peakPluginRssMiB: number;
  rssPerProcessMiB: number[];
  anonPerProcessMiB: number[];
  minMemAvailableMiB: number;
  /** MemAvailable once the scenario's plugins were gone, for the system-wide cost of its processes. */
  memAvailableAfterMiB?: number;
}

/**
 * A process's RSS and its anonymous part, MiB. The rest is file-backed (the node binary, the bundle):
 * pages every plugin process shares through the page cache, so N processes cost about N × anonymous.
 */
function rssMiB(pid: number): { rss: number; anon: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
    return { rss: kb("VmRSS") / 1024, anon: kb("RssAnon") / 1024 };
  } catch {
    return undefined;
  }
}

function memAvailableMiB(): number {
  return Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]) / 1024;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** MemAvailable a few seconds after processes exited (the kernel frees their memory at once). */
async function settledMemAvailable(): Promise<number> {
  await sleep(3_000);
  return memAvailableMiB();
}

/** The Node's allocatable for `resource`, as a number (undefined when absent). */
function allocatableOf(node: V1Node, resource: string): number | undefined {
  const value = node.status?.allocatable?.[resource];
  return value === undefined ? undefined : Number(value);
}

/**
 * Per node, when each step of its handover first happened (ms since the change), from a pod informer,
 * the simulator's events and the Node informer: where a node's time goes.
 */
class Timeline {
  readonly steps = new Map<string, Map<string, number>>();
  private readonly undo: (() => void)[] = [];
  private t0 = 0;
  private running = false;

  constructor(
    sim: KubeletSimulator,
    pods: Informer<V1Pod>,
    nodes: readonly string[],
    config: string,
    resource: string,
    fromRevision: string,
  ) {
    const prefix = `${NAMESPACE}/${configLabelValue(config)}/`;
    const isOld = (pod: V1Pod): boolean => pod.metadata?.labels?.[LABEL_REVISION] === fromRevision;
    const pod = (p: V1Pod, deleted = false): void => {
      const node = p.spec?.nodeName;
      if (node === undefined) return;
      const which = isOld(p) ? "old" : "new";
      if (deleted) this.record(node, `${which} pod gone`);
      else if (p.metadata?.deletionTimestamp) this.record(node, `${which} pod deleting`);
      // The old pods ran before the rollout began: their updates (status patches) are not a step of it.
      else if (p.status?.phase === "Running" && which === "new") this.record(node, "new pod Running");
      if (!deleted && which === "new") this.record(node, "new pod created");
    };
    this.undo.push(pods.onAdd((p) => pod(p)));
    this.undo.push(pods.onUpdate((_o, p) => pod(p)));
    this.undo.push(pods.onDelete((p) => pod(p, true)));
    const started = (info: PluginProcessInfo): void => {
      if (info.slot.startsWith(prefix) && info.slot !== `${prefix}${fromRevision}`)
        this.record(info.node, "new plugin started");
    };
    const exited = (info: PluginProcessInfo): void => {
      if (info.slot === `${prefix}${fromRevision}`) this.record(info.node, "old plugin exited");
    };
    sim.on("pluginStarted", started);
    sim.on("pluginExited", exited);
    this.undo.push(() => sim.off("pluginStarted", started));
    this.undo.push(() => sim.off("pluginExited", exited));
    for (const node of nodes) {
      const registered = (r: { resourceName: string }): void => {
        if (r.resourceName === resource && this.steps.get(node)?.has("new plugin started"))
          this.record(node, "new plugin registered (kubelet)");
      };
      const dm = sim.deviceManager(node);
      dm.on("registered", registered);
      this.undo.push(() => dm.off("registered", registered));
    }
  }

  start(): void {
    this.t0 = performance.now();
    this.running = true;
  }

  record(node: string, step: string, at = performance.now()): void {
    if (!this.running) return;
    let steps = this.steps.get(node);
    if (steps === undefined) this.steps.set(node, (steps = new Map<string, number>()));
    if (!steps.has(step)) steps.set(step, at - this.t0);
  }

  stop(): void {
    this.running = false;
    for (const u of this.undo) u();
  }

  /** Per step, the p50 and p99 over nodes of its time after the node's first step, in order of p50. */
  summary(): { step: string; p50: number; p99: number; nodes: number }[] {
    const offsets = new Map<string, number[]>();
    for (const steps of this.steps.values()) {
      const first = Math.min(...steps.values());
      for (const [step, at] of steps) {
        let list = offsets.get(step);
        if (list === undefined) offsets.set(step, (list = []));
        list.push(at - first);
      }
    }
    return [...offsets]
      .map(([step, list]) => ({
        step,
        p50: percentile(list, 50),
        p99: percentile(list, 99),
        nodes: list.length,
      }))
      .sort((a, b) => a.p50 - b.p50);
  }

  /**
   * Per pair of steps that follow each other on a node, the p50 and p99 over nodes of the time between
   * them, most frequent pairs first: where a slow node lost its time, which the offsets hide.
   */
  gaps(): { from: string; to: string; p50: number; p99: number; nodes: number }[] {
    const gaps = new Map<string, { from: string; to: string; list: number[] }>();
    for (const steps of this.steps.values()) {
      const ordered = [...steps].sort((a, b) => a[1] - b[1]);
      for (let i = 1; i < ordered.length; i++) {
        const [from, fromAt] = ordered[i - 1]!;
        const [to, toAt] = ordered[i]!;
        const key = `${from}\n${to}`;
        let gap = gaps.get(key);
        if (gap === undefined) gaps.set(key, (gap = { from, to, list: [] }));
        gap.list.push(toAt - fromAt);
      }
    }
    return [...gaps.values()]
      .map(({ from, to, list }) => ({
        from,
        to,
        p50: percentile(list, 50),
        p99: percentile(list, 99),
        nodes: list.length,
      }))
      .sort((a, b) => b.nodes - a.nodes);
  }
}

/** Per node, time spent at allocatable 0 for one resource, from a Node informer, between start() and stop(). */
class ZeroWindows {
  private readonly since = new Map<string, number>();
  private readonly total = new Map<string, number>();
  private readonly touched = new Set<string>();
  private running = false;

  constructor(
    private readonly resource: string,
    private readonly nodes: Informer<V1Node>,
    private readonly timeline?: Timeline,
  ) {
    nodes.onUpdate((_old, node) => this.observe(node));
    nodes.onAdd((node) => this.observe(node));
  }

  start(): void {
    this.running = true;
    const now = performance.now();
    for (const node of this.nodes.list()) {
      if (allocatableOf(node, this.resource) === 0) this.since.set(node.metadata!.name!, now);
    }
  }

  stop(names: readonly string[]): { perNode: number[]; nodesAtZero: number } {
    const now = performance.now();
    this.running = false;
    for (const [name, since] of this.since) this.add(name, now - since);
    this.since.clear();
    return { perNode: names.map((n) => this.total.get(n) ?? 0), nodesAtZero: this.touched.size };
  }

  private observe(node: V1Node): void {
    if (!this.running) return;
    const name = node.metadata!.name!;
    const zero = allocatableOf(node, this.resource) === 0;
    const since = this.since.get(name);
    if (zero && since === undefined) {
      this.since.set(name, performance.now());
      this.touched.add(name);
      this.timeline?.record(name, "allocatable 0 (Node)");
    } else if (!zero && since !== undefined) {
      this.since.delete(name);
      this.timeline?.record(name, "allocatable back (Node)");
      this.add(name, performance.now() - since);
    }
  }

  private add(name: string, ms: number): void {
    this.total.set(name, (this.total.get(name) ?? 0) + ms);
  }
}

/** A workload on every node: one device at a time, like pods admitted one after another. */
function startWorkload(
  sim: KubeletSimulator,
  nodes: readonly string[],
  resource: string,
): { stop(): Promise<{ admissions: number; failures: number; failedNodes: number; samples: string[] }> } {
  let admissions = 0;
  const failures: string[] = [];
  const failedNodes = new Set<string>();
  const lastAttempt = new Map<string, number>();
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (!stopped) {
      const node = nodes[next++ % nodes.length]!;
      const wait = (lastAttempt.get(node) ?? -Infinity) + ADMISSION_INTERVAL_MS - performance.now();
      if (wait > 0) await sleep(wait);
      lastAttempt.set(node, performance.now());
      try {
        await sim.allocate(node, resource, 1);
        admissions++;
      } catch (err) {
        failures.push(`${node}: ${(err as Error).message}`);
        failedNodes.add(node);
      }
      // The simulated device manager keeps what it handed out; give it back like a finished pod.
      sim.deviceManager(node).resources.get(resource)?.allocated.clear();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  const workers = Array.from({ length: Math.min(WORKERS, nodes.length) }, () => worker());
  return {
    async stop() {
      stopped = true;
      await Promise.all(workers);
      const distinct = [...new Set(failures.map((f) => f.replace(/^[^:]+: /, "")))].slice(0, 3);
      return { admissions, failures: failures.length, failedNodes: failedNodes.size, samples: distinct };
    },
  };
}

/** Plugin processes and memory while a scenario runs, sampled every second. */
function startMemorySampler(sim: KubeletSimulator): {
  stop(): {
    peakProcesses: number;
    peakRss: number;
    perProcess: number[];
    anonPerProcess: number[];
    minAvailable: number;
  };
} {
  let peakProcesses = 0;
  let peakRss = 0;
  let minAvailable = Infinity;
  const perProcess: number[] = [];
  const anonPerProcess: number[] = [];
  const sample = (): void => {
    const running = sim.plugins().filter((p) => p.running && p.pid !== undefined);
    const mem = running.map((p) => rssMiB(p.pid!)).filter((v) => v !== undefined && v.rss > 0);
    const rss = mem.map((m) => m!.rss);
    anonPerProcess.push(...mem.map((m) => m!.anon));
    const sum = rss.reduce((a, b) => a + b, 0);
    peakProcesses = Math.max(peakProcesses, running.length);
    if (sum > peakRss) peakRss = sum;
    perProcess.push(...rss);
    minAvailable = Math.min(minAvailable, memAvailableMiB());
  };
  sample();
  const timer = setInterval(sample, 1_000);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { peakProcesses, peakRss, perProcess, anonPerProcess, minAvailable };
    },
  };
}

/**
 * Every node runs exactly one plugin process of the config, of `revision`, and its Node advertises
 * every device: the rollout is over as the kubelet sees it, whatever any controller's status says.
 */
function allOnRevision(
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  config: string,
  resource: string,
  revision: string,
): { done: boolean; moved: number; pending: string[] } {
  const prefix = `${NAMESPACE}/${configLabelValue(config)}/`;
  const byName = new Map(nodeInformer.list().map((n) => [n.metadata!.name!, n]));
  let moved = 0;
  const pending: string[] = [];
  for (const node of nodes) {
    const running = sim.plugins(node).filter((p) => p.running && p.slot.startsWith(prefix));
    const advertised = byName.get(node);
    const api = advertised === undefined ? undefined : allocatableOf(advertised, resource);
    const kubelet = sim.capacity(node, resource)?.allocatable;
    if (
      running.length === 1 &&
      running[0]!.slot === `${prefix}${revision}` &&
      api === DEVICES &&
      kubelet === DEVICES
    ) {
      moved++;
    } else if (pending.length < 5) {
      // What a timeout prints: the first few nodes not there yet, and why.
      pending.push(
        `${node}: plugins [${running.map((p) => p.slot.slice(prefix.length)).join(", ")}], allocatable ${api} (Node) / ${kubelet} (kubelet)`,
      );
    }
  }
  return { done: moved === nodes.length, moved, pending };
}

async function waitAllAdvertise(
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
async function waitPluginsGone(sim: KubeletSimulator, config: string): Promise<void> {
  const prefix = `${NAMESPACE}/${configLabelValue(config)}/`;
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
  steps: ReturnType<Timeline["summary"]>;
  gaps: ReturnType<Timeline["gaps"]>;
  mem: ReturnType<ReturnType<typeof startMemorySampler>["stop"]>;
}

/** Starts the workload and the watches, applies the change, waits until every node is on `revision()`. */
async function measure(
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
): Promise<Measured> {
  const pods = createInformer<V1Pod>(kc, {
    resource: PODS,
    namespace: NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(config)}`,
  });
  pods.start();
  await pods.waitForSync();
  const timeline = new Timeline(sim, pods, nodes, config, resource, fromRevision);
  const zero = new ZeroWindows(resource, nodeInformer, timeline);
  const workload = startWorkload(sim, nodes, resource);
  const mem = startMemorySampler(sim);
  // A second of workload before the change: every node admits before anything moves.
  await sleep(1_000);
  zero.start();
  timeline.start();
  const t0 = performance.now();
  let rolloutMs: number | undefined;
  let lastLog = 0;
  try {
    await change();
    let last: ReturnType<typeof allOnRevision> | undefined;
    while (rolloutMs === undefined) {
      const elapsed = performance.now() - t0;
      if (elapsed > ROLLOUT_TIMEOUT_MS) {
        throw new Error(
          `${config}: rollout not done after ${elapsed} ms; last seen: ${last === undefined ? "no new revision" : `${last.moved}/${nodes.length} moved, ${last.pending.join("; ")}`}`,
        );
      }
      const rev = revision();
      if (rev !== undefined) {
        const state = allOnRevision(sim, nodeInformer, nodes, config, resource, rev);
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
  } finally {
    // The workload runs a second past the end, so a late drop would still count.
    await sleep(1_000);
  }
  const work = await workload.stop();
  timeline.stop();
  await pods.stop();
  return {
    rolloutMs,
    zero: zero.stop(nodes),
    work,
    mem: mem.stop(),
    steps: timeline.summary(),
    gaps: timeline.gaps(),
  };
}

function toResult(scenario: Scenario, m: Measured, completeMs: number | undefined): Result {
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
    steps: m.steps,
    gaps: m.gaps,
    peakProcesses: m.mem.peakProcesses,
    peakPluginRssMiB: m.mem.peakRss,
    rssPerProcessMiB: m.mem.perProcess,
    anonPerProcessMiB: m.mem.anonPerProcess,
    minMemAvailableMiB: m.mem.minAvailable,
  };
}

/** dpo moves the config's nodes to a new revision (spec.plugin.logLevel changes) with `strategy`. */
async function dpoScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  strategy: "Surge" | "Replace",
): Promise<Result> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const name = `bench-${strategy.toLowerCase()}`;
  const resource = `upgrade-bench.example/${strategy.toLowerCase()}`;
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name },
      spec: {
        resourceName: resource,
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "b" } },
        upgrade: { strategy, maxUnavailable: MAX_UNAVAILABLE, progressDeadlineSeconds: 300 },
      },
    },
  });
  type Status = { upgrade?: { phase?: string; updateRevision?: string; updated?: number } };
  const status = async (): Promise<Status | undefined> =>
    ((await custom.getClusterCustomObject({ ...GROUP, name })) as { status?: Status }).status;
  const first = await waitFor(
    `${name}: the first revision Complete on every node`,
    async (observe) => {
      const s = await status();
      observe(s?.upgrade);
      return s?.upgrade?.phase === "Complete" && s.upgrade.updated === nodes.length ? s : undefined;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 1_000 },
  );
  await waitAllAdvertise(nodeInformer, nodes, resource, `${name}: every node advertising ${DEVICES} devices`);
  const from = first.upgrade!.updateRevision!;

  // The new revision: the DaemonSet of the config that is not `from` (the operator creates it).
  const daemonSets = createInformer<V1DaemonSet>(kc, {
    resource: DAEMON_SETS,
    namespace: NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(name)}`,
  });
  daemonSets.start();
  await daemonSets.waitForSync();
  let completeMs: number | undefined;
  let lastStatusRead = -Infinity;
  let result: Result;
  try {
    const m = await measure(
      kc,
      sim,
      nodeInformer,
      nodes,
      name,
      resource,
      from,
      async () => {
        await custom.patchClusterCustomObject({
          ...GROUP,
          name,
          body: [{ op: "add", path: "/spec/plugin/logLevel", value: "debug" }],
        });
      },
      () =>
        daemonSets
          .list()
          .map((ds) => ds.metadata?.labels?.[LABEL_REVISION])
          .find((r) => r !== undefined && r !== from),
      async (elapsed) => {
        if (completeMs !== undefined || elapsed - lastStatusRead < 500) return;
        lastStatusRead = elapsed;
        const s = await status();
        if (
          s?.upgrade?.phase === "Complete" &&
          s.upgrade.updateRevision !== from &&
          s.upgrade.updated === nodes.length
        )
          completeMs = elapsed;
      },
    );
    if (completeMs === undefined) {
      const done = performance.now();
      await waitFor(
        `${name}: status Complete`,
        async () => {
          const s = await status();
          return s?.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== from;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      completeMs = m.rolloutMs + (performance.now() - done);
    }
    result = toResult(strategy === "Surge" ? "surge" : "replace", m, completeMs);
  } finally {
    await daemonSets.stop();
    await custom.deleteClusterCustomObject({ ...GROUP, name });
    await waitPluginsGone(sim, name);
  }
  return { ...result, memAvailableAfterMiB: await settledMemAvailable() };
}

/**
 * The baseline: the plugin DaemonSet dpo renders, made into one plain DaemonSet (fixed name, a selector
 * without the revision, RollingUpdate), created and updated here with no operator running. This is
 * what a device plugin shipped as a DaemonSet does on an upgrade.
 */
async function baselineScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
): Promise<Result> {
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const name = "bench-baseline";
  const resource = "upgrade-bench.example/baseline";
  const dsName = pluginObjectName(name);
  const render = (logLevel: "info" | "debug"): PlainPluginRevision =>
    plainPluginRevision({
      name,
      resource,
      devices: DEVICES,
      idPrefix: "b",
      logLevel,
      maxUnavailable: MAX_UNAVAILABLE,
      context: RENDER_CONTEXT,
    });
  const before = render("info");
  const after = render("debug");
  for (const r of [before, after])
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: r.configMap });
  await apps.createNamespacedDaemonSet({ namespace: NAMESPACE, body: before.daemonSet });
  let result: Result;
  await waitFor(
    `${name}: the first revision's plugin on every node`,
    (observe) => {
      const state = allOnRevision(sim, nodeInformer, nodes, name, resource, before.revision);
      observe({ moved: state.moved, pending: state.pending });
      return state.done;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 500 },
  );
  try {
    const m = await measure(
      kc,
      sim,
      nodeInformer,
      nodes,
      name,
      resource,
      before.revision,
      () => rollPlainPluginTo(apps, after),
      () => after.revision,
    );
    result = toResult("baseline", m, undefined);
  } finally {
    await apps.deleteNamespacedDaemonSet({
      name: dsName,
      namespace: NAMESPACE,
      propagationPolicy: "Foreground",
    });
    await waitPluginsGone(sim, name);
  }
  return { ...result, memAvailableAfterMiB: await settledMemAvailable() };
}

function fmtS(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function fmtMs(ms: number): string {
  return ms >= 10_000 ? fmtS(ms) : `${Math.round(ms)} ms`;
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), "dpo-bench-upgrade-"));
  let cluster: ClusterHandle | undefined;
  let sim: KubeletSimulator | undefined;
  let operator: ChildProcess | undefined;
  let nodeInformer: Informer<V1Node> | undefined;
  const results: Result[] = [];
  try {
    const started = await startBenchCluster(stateDir, NODE_COUNT);
    cluster = started.cluster;
    const { kc, nodes } = started;

    nodeInformer = createInformer<V1Node>(kc, { resource: NODES });
    nodeInformer.start();
    await nodeInformer.waitForSync();
    sim = await KubeletSimulator.start({
      kubeconfig: kc,
      nodes,
      gracePeriodMs: 60_000,
      kubeletVersions: Object.fromEntries(nodes.map((n) => [n, KUBELET_VERSION])),
    });
    console.error(`bench-upgrade: ${NODE_COUNT} nodes Ready, kubelet simulator on every node`);

    // The baseline first, while no operator runs: its DaemonSet is nobody's but this benchmark's.
    if (SCENARIOS.includes("baseline")) {
      console.error("bench-upgrade: baseline (plain DaemonSet, RollingUpdate)");
      results.push(await baselineScenario(kc, sim, nodeInformer, nodes));
    }
    operator = await startBenchOperator(kc, {
      stateDir,
      namespace: NAMESPACE,
      pluginImage: PLUGIN_IMAGE,
      label: "bench-upgrade",
    });
    for (const strategy of ["Surge", "Replace"] as const) {
      if (!SCENARIOS.includes(strategy.toLowerCase())) continue;
      console.error(`bench-upgrade: dpo ${strategy}`);
      results.push(await dpoScenario(kc, sim, nodeInformer, nodes, strategy));
    }
  } catch (err) {
    console.error(`bench-upgrade failed; state (operator and plugin logs) kept in ${stateDir}`);
    throw err;
  } finally {
    operator?.kill("SIGTERM");
    await sim?.stop().catch(() => undefined);
    await nodeInformer?.stop();
    await cluster?.stop();
  }

  const label: Record<Scenario, string> = {
    surge: "dpo, Surge",
    replace: "dpo, Replace",
    baseline: `DaemonSet RollingUpdate, maxUnavailable ${MAX_UNAVAILABLE}`,
  };
  const target: Record<Scenario, string> = {
    surge: "0 s window, 0 failed",
    replace: "window p99 ≤ 1 s",
    baseline: "(failures expected)",
  };
  const ok = (r: Result): string => {
    if (r.scenario === "surge")
      return Math.max(...r.zeroWindowsMs) === 0 && r.failures === 0 ? "ok" : "MISSED";
    if (r.scenario === "replace") return percentile(r.zeroWindowsMs, 99) <= 1_000 ? "ok" : "MISSED";
    return "";
  };
  console.log(
    `\nbench-upgrade: ${NODE_COUNT} nodes (kubelets ${KUBELET_VERSION}), maxUnavailable ${MAX_UNAVAILABLE}, ${WORKERS} admissions in flight, one per node per ${ADMISSION_INTERVAL_MS} ms at most\n`,
  );
  console.log(
    "| scenario | rollout | allocatable-0 window per node: p50 / p99 / max (nodes at 0) | failed admissions | target | |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const r of results) {
    const w = r.zeroWindowsMs;
    const rollout =
      r.completeMs === undefined
        ? fmtS(r.rolloutMs)
        : `${fmtS(r.rolloutMs)} (status Complete ${fmtS(r.completeMs)})`;
    console.log(
      `| ${label[r.scenario]} | ${rollout} | ${fmtMs(percentile(w, 50))} / ${fmtMs(percentile(w, 99))} / ${fmtMs(Math.max(...w))} (${r.nodesAtZero}) | ${r.failures} of ${r.admissions + r.failures} (${r.failedNodes} nodes) | ${target[r.scenario]} | ${ok(r)} |`,
    );
  }
  console.log(
    "\n| scenario | plugin processes at once (max) | their RSS summed (max) | RSS per process p50 / max (anonymous p50) | MemAvailable at the peak |",
  );
  console.log("|---|---|---|---|---|");
  for (const r of results) {
    console.log(
      `| ${label[r.scenario]} | ${r.peakProcesses} | ${(r.peakPluginRssMiB / 1024).toFixed(2)} GiB | ${percentile(r.rssPerProcessMiB, 50).toFixed(1)} / ${Math.max(...r.rssPerProcessMiB).toFixed(1)} MiB (${percentile(r.anonPerProcessMiB, 50).toFixed(1)} MiB) | ${(r.minMemAvailableMiB / 1024).toFixed(1)} GiB (${((r.memAvailableAfterMiB ?? NaN) / 1024).toFixed(1)} GiB once they were gone: ${(((r.memAvailableAfterMiB ?? NaN) - r.minMemAvailableMiB) / r.peakProcesses).toFixed(1)} MiB per process) |`,
    );
  }
  console.log("\nWhere a node's time goes (ms after the node's first step, p50 / p99 over nodes):\n");
  for (const r of results) {
    console.log(
      `- ${label[r.scenario]}: ${r.steps.map((s) => `${s.step} ${Math.round(s.p50)} / ${Math.round(s.p99)}`).join(" → ")}`,
    );
  }
  console.log(
    "\nBetween two steps that follow each other on a node (p50 / p99 over the nodes where they do):\n",
  );
  for (const r of results) {
    console.log(
      `- ${label[r.scenario]}: ${r.gaps
        .filter((g) => g.nodes >= r.gaps[0]!.nodes / 2)
        .map((g) => `${g.from} → ${g.to} ${Math.round(g.p50)} / ${Math.round(g.p99)}`)
        .join("; ")}`,
    );
  }
  for (const r of results) {
    if (r.failureSamples.length > 0)
      console.log(
        `\n${label[r.scenario]}: failures such as ${r.failureSamples.map((s) => JSON.stringify(s)).join(", ")}`,
      );
  }
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
  rmSync(stateDir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
