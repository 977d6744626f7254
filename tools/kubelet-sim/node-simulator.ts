// Stands in for the kubelet of KWOK nodes, and for nothing else: per node, a host directory tree with the
// device manager's kubelet.sock and the PodResources API's, Node.status capacity/allocatable patches, and
// the real `dpo plugin` process for every plugin pod KWOK reports Running there.
import {
  KubeConfig,
  type V1ConfigMap,
  type V1Container,
  type V1Node,
  type V1Pod,
  type V1PodStatus,
} from "@kubernetes/client-node";
import semver from "semver";
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { constants as osConstants, tmpdir } from "node:os";
import { dirname, isAbsolute, join, posix } from "node:path";
import { pino, type Logger } from "pino";
import { DEFAULT_CDI_DIR } from "../../src/cdi/spec.js";
import { shareConnections } from "../../src/kube/connections.js";
import { isNotFound } from "../../src/kube/errors.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { kubeRequest } from "../../src/kube/request.js";
import { PODS } from "../../src/kube/resources.js";
import { PLUGIN_CONFIG_KEY } from "../../src/operator/render/configmap.js";
import type { AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { freePort } from "../cluster/tcp-relay.js";
import { DRA_PLUGINS_DIR } from "../../src/kubelet-paths.js";
import { SimulatedDeviceManager } from "./device-manager.js";
import { SimulatedDraManager, type DraPreparedPod } from "./dra-manager.js";
import { FAILED_PREPARE_DYNAMIC_RESOURCES, type ClaimForPrepare } from "./dra-rules.js";
import { reportsDeviceHealthInPodStatus } from "./kubelet-rules.js";
import { NodeStatusWriter } from "./node-status.js";
import { podResourcesPod, SimulatedPodResourcesServer } from "./pod-resources.js";
import {
  allocatedResourcesStatus,
  containerDeviceRequests,
  isPluginPod,
  rejectedPodStatus,
  requestsExtendedResources,
  runningPodStatus,
  UNEXPECTED_ADMISSION_ERROR,
  unexpectedAdmissionMessage,
  usesResourceClaims,
} from "./pod-admission.js";
import {
  configMapFileAt,
  creationTime,
  desiredPluginPods,
  expandVariableReferences,
  flagValue,
  imageNodeFlags,
  isActivePod,
  resolveContainerEnv,
  rewritePluginArgs,
  simulatedPluginConfigText,
  simulatedPluginEnv,
  type PluginProcessPaths,
} from "./plugin-pod.js";

/** Where the kubelet keeps what the device manager and the plugin watcher look at, on every node. */
export const HOST_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
export const HOST_PLUGINS_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry";
/** The kubelet's PodResources API, under its default root directory. */
export const HOST_POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources";
/** Where DRA plugins put their sockets, one directory per driver (the kubelet's plugins dir). */
export const HOST_DRA_PLUGINS_DIR = DRA_PLUGINS_DIR;
/** How soon a pod whose claims could not be prepared is tried again (the kubelet's pod worker backs off). */
const DRA_PREPARE_RETRY_MS = 2_000;
const POD_RESOURCES_SOCKET = "kubelet.sock";

const osSignals: Partial<Record<string, number>> = osConstants.signals;

const DEFAULT_DPO_ENTRYPOINT = join(import.meta.dirname, "..", "..", "dist", "dpo.js");
const DEFAULT_STOP_GRACE_MS = 5_000;
const COMPILE_CACHE_WARMUP_TIMEOUT_MS = 20_000;
const CONFIG_RETRY_MS = 1_000;
/** TokenRequest's own minimum is 10 minutes; an hour outlasts any test, so no refresh is simulated. */
const TOKEN_EXPIRATION_SECONDS = 3_600;

export interface KubeletSimulatorOptions {
  /** Admin credentials: the simulator patches node status, watches pods, reads ConfigMaps, mints tokens. */
  kubeconfig: KubeConfig;
  /** KWOK nodes to stand in for; other nodes are left alone. */
  nodes: readonly string[];
  /** How long a resource whose plugin went away is kept before it is removed (the kubelet's is 5 min). */
  gracePeriodMs?: number;
  /**
   * The kubelet version of some nodes: written to the Node's `status.nodeInfo.kubeletVersion`, and the
   * node gets that version's device manager (before v1.37.0 one endpoint per resource name, see
   * SimulatedDeviceManager). Other nodes keep the version their Node reports.
   */
  kubeletVersions?: Readonly<Record<string, string>>;
  /** The built CLI; defaults to dist/dpo.js (the bundled CLI the image runs) of this repository. */
  dpoEntrypoint?: string;
  /**
   * Other builds by image reference: a pod whose container has one of these images runs that
   * entrypoint instead (an older dpo built from git history, a broken build). See also addImage().
   */
  images?: Readonly<Record<string, string>>;
  /** Time between SIGTERM and SIGKILL when a plugin pod goes away. */
  stopGraceMs?: number;
  /**
   * The kubelet's node-status sync period (`nodeStatusUpdateFrequency`, 10 s on a real node): device
   * counts reach the Node at the next tick, so the scheduler sees a plugin's restart late, as in a
   * real cluster. 0 (the default) writes every change at once.
   */
  nodeStatusUpdateIntervalMs?: number;
  /**
   * Plugins serve /metrics on their probe port (127.0.0.1:<port>, see PluginProcessInfo.metricsUrl), as
   * the real endpoint a test scrapes. Off by default: every plugin then also runs the process-metrics
   * observers, which cost CPU in runs with many nodes.
   */
  pluginMetrics?: boolean;
  /**
   * The API server address plugins are given (in their pod's kubeconfig), when it is not the simulator's
   * own: in a cluster pods reach the API through a Service; tests put a fault-injecting proxy there.
   */
  pluginApiServer?: string;
  logger?: Logger;
}

/** A container the simulated kubelet admitted: the devices it got and the env its Allocate answer set. */
export interface AdmittedContainer {
  name: string;
  /** Extended resource → device ids. */
  devices: Record<string, string[]>;
  env: Record<string, string>;
}

/** A pod admitted through the device manager and running on a simulated node. */
export interface AdmittedPod {
  node: string;
  /** `namespace/name`. */
  pod: string;
  uid: string;
  containers: AdmittedContainer[];
  /**
   * For a pod with ResourceClaims: each claim (by its name in spec.resourceClaims) → the CDI device ids
   * NodePrepareResources returned for it, what the container runtime would inject. Empty otherwise.
   */
  cdiDeviceIds: Record<string, string[]>;
}

/** A pod whose claims could not be prepared: it stays Pending, as the kubelet leaves it, and is retried. */
export interface PrepareFailedPod {
  node: string;
  pod: string;
  uid: string;
  /** The kubelet's Event message: `Failed to prepare dynamic resources: prepare dynamic resources: ...`. */
  message: string;
}

/** A pod the simulated kubelet refused at admission, as its status says. */
export interface RejectedPod {
  node: string;
  pod: string;
  uid: string;
  reason: string;
  message: string;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One plugin process as a test sees it. */
export interface PluginProcessInfo {
  node: string;
  /** `namespace/name` of the pod the process stands for. */
  pod: string;
  podUid: string;
  /** The DaemonSet the pod belongs to, as `namespace/<dpo.dev/config label>`. */
  slot: string;
  pid: number | undefined;
  running: boolean;
  exit: ExitStatus | undefined;
  logFile: string;
  /** The kubeconfig handed to the plugin (DPO_KUBECONFIG); undefined without a ServiceAccount. */
  kubeconfigFile: string | undefined;
  /** The plugin's /metrics endpoint with `pluginMetrics`; undefined otherwise. */
  metricsUrl: string | undefined;
}

export interface KubeletSimulatorEvents {
  pluginStarted: [PluginProcessInfo];
  pluginExited: [PluginProcessInfo];
  podAdmitted: [AdmittedPod];
  podRejected: [RejectedPod];
  podPrepareFailed: [PrepareFailedPod];
}

/** How to start a pod's process again without asking the API (restartPlugin). */
interface Launch {
  args: string[];
  env: Record<string, string>;
  logFile: string;
}

class PluginProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  exit: ExitStatus | undefined;

  constructor(
    image: ImageRuntime,
    readonly launch: Launch,
    onExit: (status: ExitStatus) => void,
  ) {
    const log = openSync(launch.logFile, "a");
    try {
      this.child = spawn(process.execPath, [...image.nodeFlags, image.entrypoint, ...launch.args], {
        env: { ...launch.env, NODE_COMPILE_CACHE: image.compileCache },
        stdio: ["ignore", log, log],
      });
    } finally {
      closeSync(log);
    }
    this.exited = new Promise<ExitStatus>((resolve) => {
      const done = (status: ExitStatus): void => {
        if (this.exit !== undefined) return;
        this.exit = status;
        onExit(status);
        resolve(status);
      };
      this.child.once("exit", (code, signal) => done({ code, signal }));
      this.child.once("error", () => done({ code: null, signal: null }));
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** What the kubelet does to a container that goes: SIGTERM, then SIGKILL after the grace period. */
  async stop(graceMs: number): Promise<ExitStatus> {
    if (this.exit !== undefined) return this.exit;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/**
 * How a build of dpo runs as its image would run it: the Node.js flags of the Dockerfile's ENTRYPOINT
 * next to the build (none if it has no Dockerfile) and a V8 compile cache made once before the first
 * start, as the image build does (`NODE_COMPILE_CACHE`).
 */
interface ImageRuntime {
  entrypoint: string;
  nodeFlags: string[];
  compileCache: string;
}

async function prepareImageRuntime(entrypoint: string): Promise<ImageRuntime> {
  const buildRoot = join(dirname(entrypoint), "..");
  let nodeFlags: string[] = [];
  try {
    nodeFlags = imageNodeFlags(await readFile(join(buildRoot, "Dockerfile"), "utf8"));
  } catch {
    // A build without a Dockerfile runs without flags.
  }
  const compileCache = join(buildRoot, ".local", "compile-cache");
  await mkdir(compileCache, { recursive: true });
  // What the image's `RUN node <flags> dist/dpo.js plugin --help` does: every later start reads the cache.
  // A build that does not answer --help in time (a test's hung stand-in) starts without the cache.
  await new Promise<void>((resolve) => {
    const child = spawn(process.execPath, [...nodeFlags, entrypoint, "plugin", "--help"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_COMPILE_CACHE: compileCache },
      stdio: "ignore",
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), COMPILE_CACHE_WARMUP_TIMEOUT_MS);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.once("error", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return { entrypoint, nodeFlags, compileCache };
}

/** A plugin pod on a node as the simulator set it up. */
interface PreparedPod {
  node: string;
  slot: string;
  namespace: string;
  name: string;
  uid: string;
  /** The container's image: which build of dpo runs (see KubeletSimulatorOptions.images). */
  image: string;
  runtime: ImageRuntime;
  launch: Launch;
  /** The plugin's probe port on this host (and its metrics port with `pluginMetrics`), and the readiness probe of its container (if any). */
  healthPort: number;
  metricsUrl: string | undefined;
  readinessProbe: V1Container["readinessProbe"];
  /** The pod as the simulator last saw it, for the status it writes. */
  pod: V1Pod;
}

/** The kubelet's prober worker for one container's readiness probe. */
interface Prober {
  timer: NodeJS.Timeout | undefined;
  failures: number;
  stopped: boolean;
}

interface PodRecord extends PreparedPod {
  plugin: PluginProcess;
  startedAt: string;
  ready: boolean;
  prober: Prober | undefined;
}

interface SimulatedNode {
  name: string;
  /** The node's host filesystem: `<root>/<node>`. */
  hostRoot: string;
  /** Short aliases of the kubelet's directories, used for everything that holds unix sockets. */
  devicePluginDir: string;
  pluginsRegistryDir: string;
  /** Alias of the node's /var/lib/kubelet/plugins: DRA plugins' sockets, one directory per driver. */
  draPluginsDir: string;
  deviceManager: SimulatedDeviceManager;
  /** The DRA manager: the plugin watcher's handler for DRAPlugin sockets, prepares pods' claims. */
  dra: SimulatedDraManager;
  /** Pods admitted whose claims are not prepared yet, by uid → the last failure (one Event per new one). */
  draPending: Map<string, string>;
  /** The kubelet's PodResources API, on `<alias>/pod-resources/kubelet.sock`. */
  podResources: SimulatedPodResourcesServer;
  status: NodeStatusWriter;
  /** The node's InternalIP: the pods' hostIP (and podIP of host-network pods). */
  hostIP: string | undefined;
  pods: Map<string, PodRecord>;
  /** Pods admitted through the device manager, by uid: their devices go back when the pod goes. */
  admitted: Map<string, AdmittedPod>;
  /** The admitted pods that run, by uid, with their start: their status is written again when device health changes. */
  running: Map<string, { pod: V1Pod; startedAt: string; health?: string }>;
  /** Whether this node's kubelet writes device health into pod status (1.36+). */
  deviceHealthInPodStatus: boolean;
  /** Pods rejected at admission whose Failed status the informer may not show yet, by uid. */
  rejected: Set<string>;
  /** Log file → pod, for every pod that ever ran on the node (its log outlives the pod). */
  logs: Map<string, string>;
  reconciling: Promise<void> | undefined;
  rerun: boolean;
  retryTimer: NodeJS.Timeout | undefined;
}

/** Unix socket paths are limited to 107 bytes; the default temp dir may be long. */
function shortTempBase(): string {
  const base = tmpdir();
  return base.length <= 16 ? base : "/tmp";
}

/**
 * The kubelet's part of a set of KWOK nodes, for tests. KWOK makes pods Running and keeps nodes Ready;
 * this adds what the kubelet's device manager and container runtime would do for device plugins, and
 * nothing more: no images, no cgroups, no probes, no other pods.
 *
 * Differences from a real kubelet, on purpose: a plugin process that dies is not restarted until its pod
 * is replaced (tests need to observe the death; `restartPlugin` does what the kubelet's restart policy
 * would); plugins share this host's network, so probes (and, with `pluginMetrics`, /metrics) listen on a
 * free loopback port and metrics are otherwise off; Node status is patched at once on every device change instead of on the kubelet's 10 s sync;
 * `stop()` takes the resources it advertised out of the node status, so a shared cluster stays clean.
 */
export class KubeletSimulator extends EventEmitter<KubeletSimulatorEvents> {
  private readonly nodes = new Map<string, SimulatedNode>();
  private readonly images: Map<string, string>;
  /** Each build's runtime, prepared once (see prepareImageRuntime). */
  private readonly runtimes = new Map<string, Promise<ImageRuntime>>();
  /** Kubelet versions this simulator changed, as they were, for stop() to put back. */
  private readonly originalVersions = new Map<string, string>();
  private readonly log: Logger;
  /**
   * The caller's kubeconfig, with keep-alive connections as a kubelet holds them: client-node alone
   * opens a TLS connection per request, and the handshakes of every pod status, Node patch, token and
   * event would land on the same cores as the plugins being measured, when a node changes plugins.
   */
  private readonly kubeconfig: KubeConfig;
  private readonly entrypoint: string;
  private readonly stopGraceMs: number;
  private informer: Informer<V1Pod> | undefined;
  private stopped = false;
  private readonly killAllOnExit = (): void => {
    for (const node of this.nodes.values()) {
      for (const record of node.pods.values()) if (record.plugin.running) record.plugin.child.kill("SIGKILL");
    }
  };

  private constructor(
    readonly root: string,
    private readonly options: KubeletSimulatorOptions,
  ) {
    super();
    this.log =
      options.logger ??
      pino({ level: process.env.DPO_KUBELET_SIM_LOG_LEVEL ?? "warn" }, pino.destination(2)).child({
        component: "kubelet-sim",
      });
    const kubeconfig = new KubeConfig();
    kubeconfig.loadFromOptions({
      clusters: options.kubeconfig.clusters,
      users: options.kubeconfig.users,
      contexts: options.kubeconfig.contexts,
      currentContext: options.kubeconfig.currentContext,
    });
    this.kubeconfig = shareConnections(kubeconfig);
    this.entrypoint = options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT;
    this.images = new Map(Object.entries(options.images ?? {}));
    this.stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
  }

  /** Creates the node trees, serves kubelet.sock on every node and starts watching plugin pods. */
  static async start(options: KubeletSimulatorOptions): Promise<KubeletSimulator> {
    if (!existsSync(options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT)) {
      throw new Error(
        `${options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT} is missing: run 'make build' before using the kubelet simulator`,
      );
    }
    const root = await mkdtemp(join(shortTempBase(), "dpo-ks-"));
    const sim = new KubeletSimulator(root, options);
    try {
      for (const entrypoint of [sim.entrypoint, ...sim.images.values()]) void sim.runtimeOf(entrypoint);
      await sim.startNodes();
      sim.watchPods();
      await sim.informer?.waitForSync();
    } catch (err) {
      await sim.stop();
      throw err;
    }
    return sim;
  }

  /** Where the absolute host path `path` of `node` lives on this machine (e.g. a mock health file). */
  hostPath(node: string, path: string): string {
    if (!isAbsolute(path)) throw new Error(`hostPath needs an absolute path, got ${path}`);
    return join(this.node(node).hostRoot, posix.normalize(path));
  }

  /**
   * Writes `text` to the absolute host path `path` of `node`, creating its directory, through a temporary
   * file and a rename, so a plugin watching the file (a mock health file) never reads half of it.
   */
  writeHostFile(node: string, path: string, text: string): void {
    const target = this.hostPath(node, path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(`${target}.tmp`, text);
    renameSync(`${target}.tmp`, target);
  }

  /** The node's device-plugins directory (where kubelet.sock and the plugin sockets are). */
  devicePluginDir(node: string): string {
    return this.node(node).devicePluginDir;
  }

  pluginsRegistryDir(node: string): string {
    return this.node(node).pluginsRegistryDir;
  }

  /** The PodResources API of `node`, for assertions on the calls it answered. */
  podResources(node: string): SimulatedPodResourcesServer {
    return this.node(node).podResources;
  }

  /** The device manager of `node`, for assertions on registrations and streams. */
  deviceManager(node: string): SimulatedDeviceManager {
    return this.node(node).deviceManager;
  }

  /** The device manager's view of a resource on `node` (what the node status is patched to). */
  capacity(node: string, resource: string): { capacity: number; allocatable: number } | undefined {
    return this.node(node).deviceManager.capacity(resource);
  }

  /**
   * Admits and starts a container asking for `count` devices on `node` (see
   * SimulatedDeviceManager.allocate): GetPreferredAllocation, Allocate, PreStartContainer when asked.
   */
  allocate(
    node: string,
    resource: string,
    count: number,
    options: { reuse?: readonly string[] } = {},
  ): Promise<{ deviceIds: string[]; response: AllocateResponse }> {
    return this.node(node).deviceManager.allocate(resource, count, options);
  }

  /**
   * A kubelet restart: every socket in device-plugins goes, kubelet.sock comes back, and the resources
   * have no devices until their plugins register again (as a restarted kubelet reading its checkpoint).
   * The DRA manager forgets its drivers (they register again through the plugin watcher) and deletes
   * every ResourceSlice of the node, as a starting kubelet does; resolves once they are deleted.
   */
  async restartKubelet(node: string): Promise<void> {
    const simulated = this.node(node);
    await simulated.podResources.stop();
    await simulated.dra.restart();
    await simulated.deviceManager.restart({ forgetDevices: true });
    await simulated.podResources.start();
  }

  /** Plugin processes (running or exited) of `node`, or of every node. */
  plugins(node?: string): PluginProcessInfo[] {
    const nodes = node === undefined ? [...this.nodes.values()] : [this.node(node)];
    return nodes.flatMap((n) => [...n.pods.values()].map((record) => this.info(record, record.plugin)));
  }

  /**
   * Kills the plugin process of `node` without touching its pod, as a crash would. A real kubelet would
   * restart the container; the simulator does not, until the pod is replaced or `restartPlugin` is
   * called. `slot` picks one plugin when several configs run on the node.
   */
  async killPlugin(node: string, signal: NodeJS.Signals = "SIGKILL", slot?: string): Promise<ExitStatus> {
    const record = this.record(node, slot, (r) => r.plugin.running, "running");
    record.plugin.child.kill(signal);
    return record.plugin.exited;
  }

  /** Starts the exited plugin process of `node` again for the same pod: the kubelet's restart policy. */
  restartPlugin(node: string, slot?: string): PluginProcessInfo {
    const record = this.record(node, slot, (r) => !r.plugin.running, "exited");
    record.plugin = this.spawnPlugin(record);
    record.startedAt = new Date().toISOString();
    void this.writePluginPodStatus(this.node(node), record);
    this.startProbing(this.node(node), record);
    return this.info(record, record.plugin);
  }

  /** Pods admitted through the device manager on `node` (or every node), with their devices and env. */
  admittedPods(node?: string): AdmittedPod[] {
    const nodes = node === undefined ? [...this.nodes.values()] : [this.node(node)];
    return nodes.flatMap((n) => [...n.admitted.values()]);
  }

  /** The DRA manager of `node`: registered drivers, the claims prepared, every call made. */
  draManager(node: string): SimulatedDraManager {
    return this.node(node).dra;
  }

  /** The node's DRA plugins directory (/var/lib/kubelet/plugins), where DRA sockets live per driver. */
  draPluginsDir(node: string): string {
    return this.node(node).draPluginsDir;
  }

  /** The output of every plugin process that ran on `node`, pods gone included, for failure messages. */
  pluginLogs(node: string): string {
    return [...this.node(node).logs]
      .map(([file, pod]) => {
        let text: string;
        try {
          text = readFileSync(file, "utf8");
        } catch (err) {
          text = `(cannot read: ${(err as Error).message})`;
        }
        return `--- plugin of pod ${pod} on ${node}\n${text}`;
      })
      .join("\n");
  }

  /** Resolves once `node`'s status carries the counts the device manager has now. */
  async nodeStatusSettled(node: string): Promise<void> {
    await this.node(node).status.settled();
  }

  /**
   * Kills every plugin process, stops the device managers, takes the advertised resources out of the
   * node status and removes the directory tree.
   */
  /** Pods with this image run `entrypoint` from now on (pods already running keep their process). */
  addImage(image: string, entrypoint: string): void {
    this.images.set(image, entrypoint);
    void this.runtimeOf(entrypoint);
  }

  /** The build's runtime, prepared once, in the background from the moment the build is known. */
  private runtimeOf(entrypoint: string): Promise<ImageRuntime> {
    let runtime = this.runtimes.get(entrypoint);
    if (runtime === undefined) {
      runtime = prepareImageRuntime(entrypoint);
      this.runtimes.set(entrypoint, runtime);
    }
    return runtime;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.informer?.stop();
    const nodes = [...this.nodes.values()];
    for (const node of nodes) {
      clearTimeout(node.retryTimer);
      node.status.writeImmediately();
      for (const record of node.pods.values()) this.stopProbing(record);
    }
    await Promise.all(nodes.flatMap((node) => (node.reconciling ? [node.reconciling] : [])));
    await Promise.all(
      nodes.flatMap((node) => [...node.pods.values()].map((r) => r.plugin.stop(this.stopGraceMs))),
    );
    await Promise.all(nodes.map((node) => node.podResources.stop()));
    await Promise.all(nodes.map((node) => node.deviceManager.stop()));
    for (const node of nodes) node.dra.close();
    await Promise.all(
      nodes.map(async (node) => {
        await node.status.settled();
        for (const resource of node.status.resources()) node.status.set(resource, null);
        await node.status.settled();
        node.status.close();
      }),
    );
    // Nodes are shared by the test files: the next one finds them with the versions they had.
    for (const [name, version] of this.originalVersions) {
      await this.setKubeletVersion(name, version).catch((err: Error) =>
        this.log.warn({ node: name, err: err.message }, "could not put the kubelet version back"),
      );
    }
    process.off("exit", this.killAllOnExit);
    await rm(this.root, { recursive: true, force: true });
  }

  private async setKubeletVersion(name: string, version: string): Promise<void> {
    await kubeRequest(this.kubeconfig, {
      method: "PATCH",
      path: `/api/v1/nodes/${encodeURIComponent(name)}/status`,
      body: { status: { nodeInfo: { kubeletVersion: version } } },
      contentType: "application/strategic-merge-patch+json",
    });
  }

  private node(name: string): SimulatedNode {
    const node = this.nodes.get(name);
    if (node === undefined)
      throw new Error(`node ${name} is not simulated (have ${[...this.nodes.keys()].join(", ")})`);
    return node;
  }

  private record(
    node: string,
    slot: string | undefined,
    matches: (record: PodRecord) => boolean,
    state: string,
  ): PodRecord {
    const candidates = [...this.node(node).pods.values()].filter(
      // A config's slot (namespace/config) names the plugins of all its revisions.
      (r) => (slot === undefined || r.slot === slot || r.slot.startsWith(`${slot}/`)) && matches(r),
    );
    if (candidates.length !== 1 || candidates[0] === undefined) {
      throw new Error(
        `expected one ${state} plugin on ${node}${slot ? ` for ${slot}` : ""}, found ${candidates.length}: ` +
          JSON.stringify(this.plugins(node)),
      );
    }
    return candidates[0];
  }

  private info(pod: PreparedPod, plugin: PluginProcess): PluginProcessInfo {
    return {
      node: pod.node,
      pod: `${pod.namespace}/${pod.name}`,
      podUid: pod.uid,
      slot: pod.slot,
      pid: plugin.child.pid,
      running: plugin.running,
      exit: plugin.exit,
      logFile: pod.launch.logFile,
      kubeconfigFile: pod.launch.env.DPO_KUBECONFIG,
      metricsUrl: pod.metricsUrl,
    };
  }

  private async startNodes(): Promise<void> {
    // Standing in for a node that does not exist would only produce failing patches later.
    const versions = new Map<string, string>();
    const hostIPs = new Map<string, string | undefined>();
    for (const name of this.options.nodes) {
      const found = await kubeRequest<V1Node>(this.kubeconfig, {
        method: "GET",
        path: `/api/v1/nodes/${encodeURIComponent(name)}`,
      }).catch((err: Error) => {
        throw new Error(`cannot simulate the kubelet of node ${name}: ${err.message}`);
      });
      const wanted = this.options.kubeletVersions?.[name];
      if (wanted !== undefined && wanted !== found.status?.nodeInfo?.kubeletVersion) {
        this.originalVersions.set(name, found.status?.nodeInfo?.kubeletVersion ?? "");
        await this.setKubeletVersion(name, wanted);
      }
      versions.set(name, wanted ?? found.status?.nodeInfo?.kubeletVersion ?? "");
      hostIPs.set(name, found.status?.addresses?.find((a) => a.type === "InternalIP")?.address);
    }
    process.on("exit", this.killAllOnExit);
    const aliases = join(this.root, "k");
    await mkdir(aliases);
    let index = 0;
    for (const name of this.options.nodes) {
      if (this.nodes.has(name)) continue;
      const hostRoot = join(this.root, name);
      const kubeletDir = join(hostRoot, posix.dirname(HOST_DEVICE_PLUGINS_DIR));
      await mkdir(join(hostRoot, HOST_DEVICE_PLUGINS_DIR), { recursive: true });
      await mkdir(join(hostRoot, HOST_PLUGINS_REGISTRY_DIR), { recursive: true });
      await mkdir(join(hostRoot, HOST_POD_RESOURCES_DIR), { recursive: true });
      await mkdir(join(hostRoot, HOST_DRA_PLUGINS_DIR), { recursive: true });
      // Sockets are reached through <root>/k/<index>, so that their paths stay far below the limit.
      const alias = join(aliases, String(index++));
      await symlink(kubeletDir, alias, "dir");
      const devicePluginDir = join(alias, posix.basename(HOST_DEVICE_PLUGINS_DIR));
      const pluginsRegistryDir = join(alias, posix.basename(HOST_PLUGINS_REGISTRY_DIR));
      const podResourcesSocket = join(alias, posix.basename(HOST_POD_RESOURCES_DIR), POD_RESOURCES_SOCKET);
      const draPluginsDir = join(alias, posix.basename(HOST_DRA_PLUGINS_DIR));
      // The node's kubelet version decides which DRA service it talks (v1 from 1.34, v1beta1 before).
      const dra = new SimulatedDraManager(versions.get(name) ?? "", {
        nodeName: name,
        deleteSlices: (fieldSelector, signal) => this.deleteResourceSlices(fieldSelector, signal),
        onWipeError: (err) =>
          this.log.warn(
            { node: name, err: err.message },
            "deleting the node's ResourceSlices failed; retrying",
          ),
      });
      const deviceManager = new SimulatedDeviceManager({
        dir: devicePluginDir,
        pluginsRegistryDir,
        pluginHandlers: { DRAPlugin: dra },
        gracePeriodMs: this.options.gracePeriodMs,
        oneEndpointPerResource: !endpointPerSocket(versions.get(name) ?? ""),
      });
      const node: SimulatedNode = {
        name,
        hostRoot,
        devicePluginDir,
        pluginsRegistryDir,
        draPluginsDir,
        deviceManager,
        dra,
        draPending: new Map(),
        // The kubelet's List: every pod bound here that it still runs, plugin pods included.
        podResources: new SimulatedPodResourcesServer({
          socketPath: podResourcesSocket,
          deviceManager,
          draManager: dra,
          pods: () =>
            (this.informer?.list() ?? [])
              .filter((p) => p.spec?.nodeName === name && isActivePod(p))
              .map(podResourcesPod),
        }),
        status: new NodeStatusWriter(
          this.kubeconfig,
          name,
          this.log,
          this.options.nodeStatusUpdateIntervalMs ?? 0,
        ),
        hostIP: hostIPs.get(name),
        pods: new Map(),
        admitted: new Map(),
        running: new Map(),
        deviceHealthInPodStatus: reportsDeviceHealthInPodStatus(versions.get(name) ?? ""),
        rejected: new Set(),
        logs: new Map(),
        reconciling: undefined,
        rerun: false,
        retryTimer: undefined,
      };
      this.nodes.set(name, node);
      const advertise = (resource: string): void => {
        if (!this.stopped) node.status.set(resource, deviceManager.capacity(resource) ?? null);
      };
      deviceManager.on("registered", (r) => {
        this.log.info({ node: name, resource: r.resourceName, endpoint: r.endpoint }, "plugin registered");
        advertise(r.resourceName);
      });
      deviceManager.on("devices", (r) => {
        advertise(r.resourceName);
        void this.writeDeviceHealthOfPods(node, r.resourceName);
      });
      deviceManager.on("disconnected", (r) => {
        this.log.info({ node: name, resource: r.resourceName }, "plugin stream ended");
        advertise(r.resourceName);
        void this.writeDeviceHealthOfPods(node, r.resourceName);
      });
      // A removed resource stays in the node status at 0 (the kubelet keeps it to show it is a
      // device-plugin resource rather than one the cluster advertises by other means).
      deviceManager.on("removed", (resource) => {
        this.log.info({ node: name, resource }, "resource removed after the grace period");
        if (!this.stopped) node.status.set(resource, { capacity: 0, allocatable: 0 });
      });
      dra.on("registered", (d) =>
        this.log.info({ node: name, driver: d.driverName, service: d.service }, "DRA driver registered"),
      );
      dra.on("deregistered", (d) =>
        this.log.info({ node: name, driver: d.driverName }, "DRA driver deregistered"),
      );
      // The kubelet's DRA manager starts before its plugin watcher: the node's slices of earlier plugin
      // instances are gone before any DRA plugin can register.
      await dra.start();
      await deviceManager.start();
      await node.podResources.start();
    }
  }

  /** DeleteCollection of ResourceSlices, as the kubelet sends it; nothing to delete is no error. */
  private async deleteResourceSlices(fieldSelector: string, signal: AbortSignal): Promise<void> {
    try {
      await kubeRequest(this.kubeconfig, {
        method: "DELETE",
        path: "/apis/resource.k8s.io/v1/resourceslices",
        query: { fieldSelector },
        signal,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  private watchPods(): void {
    // Every pod: plugin pods run a process, pods asking for extended resources are admitted.
    const informer = createInformer<V1Pod>(this.kubeconfig, {
      resource: PODS,
      logger: this.log,
    });
    const touch = (pod: V1Pod): void => {
      const nodeName = pod.spec?.nodeName;
      if (nodeName !== undefined && this.nodes.has(nodeName)) this.reconcileSoon(nodeName);
    };
    informer.onAdd(touch);
    informer.onUpdate((old, current) => {
      touch(old);
      touch(current);
    });
    informer.onDelete(touch);
    this.informer = informer;
    informer.start();
  }

  /** Level-triggered and serial per node: a trigger during a pass makes one more pass. */
  private reconcileSoon(nodeName: string): void {
    const node = this.node(nodeName);
    if (this.stopped) return;
    if (node.reconciling !== undefined) {
      node.rerun = true;
      return;
    }
    node.reconciling = (async () => {
      do {
        node.rerun = false;
        try {
          await this.reconcile(node);
        } catch (err) {
          this.log.warn(
            { node: node.name, err: (err as Error).message },
            "plugin pods not in place yet; retrying",
          );
          clearTimeout(node.retryTimer);
          node.retryTimer = setTimeout(() => this.reconcileSoon(node.name), CONFIG_RETRY_MS);
          node.retryTimer.unref();
        }
      } while (node.rerun && !this.stopped);
    })().finally(() => {
      node.reconciling = undefined;
    });
  }

  private async reconcile(node: SimulatedNode): Promise<void> {
    const pods = (this.informer?.list() ?? []).filter((p) => p.spec?.nodeName === node.name);
    const desired = desiredPluginPods(pods.filter(isPluginPod), node.name);
    for (const [slot, record] of node.pods) {
      if (desired.get(slot)?.metadata?.uid === record.uid) continue;
      this.log.info(
        { node: node.name, pod: `${record.namespace}/${record.name}` },
        "stopping plugin: pod gone",
      );
      this.stopProbing(record);
      await record.plugin.stop(this.stopGraceMs);
      node.pods.delete(slot);
    }
    for (const [slot, pod] of desired) {
      if (this.stopped) return;
      // An exited process of the same pod stays exited: see killPlugin.
      if (node.pods.has(slot)) continue;
      const prepared = await this.preparePod(node, slot, pod);
      if (this.stopped) return;
      node.logs.set(prepared.launch.logFile, `${prepared.namespace}/${prepared.name} (uid ${prepared.uid})`);
      const record: PodRecord = {
        ...prepared,
        plugin: undefined as unknown as PluginProcess,
        startedAt: new Date().toISOString(),
        ready: false,
        prober: undefined,
      };
      record.plugin = this.spawnPlugin(record);
      node.pods.set(slot, record);
      // Running once the process started; Ready when its readiness probe says so.
      await this.writePluginPodStatus(node, record);
      this.startProbing(node, record);
    }
    await this.admitPods(
      node,
      pods.filter((p) => !isPluginPod(p) && (requestsExtendedResources(p) || usesResourceClaims(p))),
    );
  }

  /**
   * Pod admission as the kubelet's device manager does it (the resource allocator admit handler): each
   * container in order, init containers first, gets its device-plugin resources through
   * GetPreferredAllocation/Allocate (devices of finished init containers reused); a failure rejects
   * the pod with UnexpectedAdmissionError, an Event and phase Failed. Resources no plugin registered
   * are not the device manager's and pass. Devices go back when the pod is gone or finished.
   */
  private async admitPods(node: SimulatedNode, pods: V1Pod[]): Promise<void> {
    const present = new Map(pods.map((p) => [p.metadata?.uid ?? "", p]));
    for (const [uid, admitted] of node.admitted) {
      const pod = present.get(uid);
      if (pod !== undefined && isActivePod(pod)) continue;
      node.deviceManager.release(uid);
      node.draPending.delete(uid);
      try {
        await node.dra.unpreparePod(uid);
      } catch (err) {
        // The kubelet keeps the pod's resources until its claims are unprepared, and tries again.
        this.log.warn(
          { node: node.name, pod: admitted.pod, err: (err as Error).message },
          "claims not unprepared",
        );
        this.retryLater(node, DRA_PREPARE_RETRY_MS);
        continue;
      }
      node.admitted.delete(uid);
      node.running.delete(uid);
      this.log.info({ node: node.name, pod: admitted.pod }, "pod gone: devices released");
    }
    for (const uid of node.rejected) if (!present.has(uid)) node.rejected.delete(uid);
    const waiting = pods
      .filter(
        (p) =>
          isActivePod(p) &&
          (!node.admitted.has(p.metadata?.uid ?? "") || node.draPending.has(p.metadata?.uid ?? "")) &&
          !node.rejected.has(p.metadata?.uid ?? ""),
      )
      .sort((a, b) => creationTime(a) - creationTime(b));
    for (const pod of waiting) {
      if (this.stopped) return;
      await this.admit(node, pod);
    }
  }

  private async admit(node: SimulatedNode, pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? "";
    const name = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    // Admitted before, its claims not prepared then: only the start is tried again.
    const earlier = node.draPending.has(uid) ? node.admitted.get(uid) : undefined;
    if (earlier !== undefined) {
      await this.startAdmitted(node, pod, earlier);
      return;
    }
    const containers: AdmittedContainer[] = [];
    const reusable = new Map<string, string[]>();
    try {
      for (const request of containerDeviceRequests(pod)) {
        const container: AdmittedContainer = { name: request.name, devices: {}, env: {} };
        for (const [resource, count] of request.resources) {
          if (!node.deviceManager.isDevicePluginResource(resource)) continue;
          const reuse = reusable.get(resource) ?? [];
          const { deviceIds, response } = await node.deviceManager.allocate(resource, count, {
            reuse,
            owner: uid,
            container: request.name,
          });
          Object.assign(container.env, response.containerResponses[0]?.envs ?? {});
          container.devices[resource] = deviceIds;
          // A finished init container's devices may go to the next containers; others keep theirs.
          reusable.set(
            resource,
            request.init && !request.restartable
              ? [...new Set([...reuse, ...deviceIds])]
              : reuse.filter((id) => !deviceIds.includes(id)),
          );
        }
        containers.push(container);
      }
    } catch (err) {
      node.deviceManager.release(uid);
      const message = unexpectedAdmissionMessage((err as Error).message);
      if (pod.status?.phase === "Running") {
        // Already running before this kubelet started (a simulator restarted over live pods): a
        // restarted kubelet leaves running containers alone.
        this.log.warn({ node: node.name, pod: name, message }, "running pod not re-admitted");
        node.admitted.set(uid, { node: node.name, pod: name, uid, containers, cdiDeviceIds: {} });
        return;
      }
      node.rejected.add(uid);
      this.log.info({ node: node.name, pod: name, message }, "pod rejected at admission");
      // The kubelet's order (rejectPod): the Event, then the status.
      await this.recordPodEvent(node, pod, UNEXPECTED_ADMISSION_ERROR, message);
      await this.writePodStatus(pod, rejectedPodStatus(UNEXPECTED_ADMISSION_ERROR, message));
      this.emit("podRejected", {
        node: node.name,
        pod: name,
        uid,
        reason: UNEXPECTED_ADMISSION_ERROR,
        message,
      });
      return;
    }
    const admitted: AdmittedPod = { node: node.name, pod: name, uid, containers, cdiDeviceIds: {} };
    node.admitted.set(uid, admitted);
    await this.startAdmitted(node, pod, admitted);
  }

  /**
   * What the kubelet's SyncPod does for an admitted pod before its sandbox: PrepareDynamicResources.
   * When that fails the pod is not started: a Warning Event `FailedPrepareDynamicResources` (one per
   * new message here; the kubelet sends one per attempt), the pod stays as it is, and it is tried again.
   */
  private async startAdmitted(node: SimulatedNode, pod: V1Pod, admitted: AdmittedPod): Promise<void> {
    const { uid, pod: name } = admitted;
    if (usesResourceClaims(pod)) {
      let prepared: DraPreparedPod;
      try {
        prepared = await node.dra.preparePod(pod, (namespace, claimName) =>
          this.readClaim(namespace, claimName),
        );
      } catch (err) {
        const message = `Failed to prepare dynamic resources: ${(err as Error).message}`;
        const first = node.draPending.get(uid) !== message;
        node.draPending.set(uid, message);
        this.retryLater(node, DRA_PREPARE_RETRY_MS);
        if (!first) return;
        this.log.info({ node: node.name, pod: name, message }, "claims not prepared: pod not started");
        await this.recordPodEvent(node, pod, FAILED_PREPARE_DYNAMIC_RESOURCES, message);
        this.emit("podPrepareFailed", { node: node.name, pod: name, uid, message });
        return;
      }
      node.draPending.delete(uid);
      admitted.cdiDeviceIds = prepared.cdiDeviceIds;
    }
    const now = new Date().toISOString();
    const status = this.admittedPodStatus(node, pod, admitted, now);
    node.running.set(uid, {
      pod,
      startedAt: now,
      health: JSON.stringify(status.containerStatuses?.map((c) => c.allocatedResourcesStatus)),
    });
    await this.writePodStatus(pod, status);
    this.log.info(
      { node: node.name, pod: name, containers: admitted.containers, cdi: admitted.cdiDeviceIds },
      "pod admitted",
    );
    this.emit("podAdmitted", admitted);
  }

  /** An admitted pod's Running status, with its containers' device health where the node's kubelet reports it. */
  private admittedPodStatus(
    node: SimulatedNode,
    pod: V1Pod,
    admitted: AdmittedPod,
    startedAt: string,
  ): V1PodStatus {
    return runningPodStatus(pod, {
      now: new Date().toISOString(),
      startedAt,
      hostIP: node.hostIP,
      ready: true,
      ...(node.deviceHealthInPodStatus
        ? {
            allocatedResources: (container: string) =>
              allocatedResourcesStatus(
                admitted.containers.find((c) => c.name === container)?.devices ?? {},
                (resource, id) => node.deviceManager.deviceHealth(resource, id),
              ),
          }
        : {}),
    });
  }

  /**
   * The device manager's health updates reach the pods that hold the devices: the kubelet syncs their
   * status again (ResourceHealthStatus), so a failed device shows in its holder's container status.
   */
  private async writeDeviceHealthOfPods(node: SimulatedNode, resource: string): Promise<void> {
    if (!node.deviceHealthInPodStatus || this.stopped) return;
    for (const [uid, admitted] of node.admitted) {
      const running = node.running.get(uid);
      if (!running || !admitted.containers.some((c) => (c.devices[resource] ?? []).length > 0)) continue;
      const status = this.admittedPodStatus(node, running.pod, admitted, running.startedAt);
      // Only a change of health is written: the plugin resends its whole list for any change.
      const health = JSON.stringify(status.containerStatuses?.map((c) => c.allocatedResourcesStatus));
      if (health === running.health) continue;
      running.health = health;
      await this.writePodStatus(running.pod, status);
    }
  }

  /** The kubelet's status manager: the pod's status, written whole (the simulator owns it). */
  /** Writes a pod's status; false when the API server did not take it (the caller may try again). */
  private async writePodStatus(pod: V1Pod, status: V1PodStatus): Promise<boolean> {
    const namespace = pod.metadata?.namespace ?? "";
    const name = pod.metadata?.name ?? "";
    try {
      await kubeRequest(this.kubeconfig, {
        method: "PATCH",
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}/status`,
        // The uid makes it a precondition: a pod of the same name created since is not touched.
        body: { metadata: { uid: pod.metadata?.uid }, status },
        contentType: "application/merge-patch+json",
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return true;
      this.log.warn({ pod: `${namespace}/${name}`, err: (err as Error).message }, "pod status not written");
      return false;
    }
  }

  private async readClaim(namespace: string, name: string): Promise<ClaimForPrepare> {
    return kubeRequest<ClaimForPrepare>(this.kubeconfig, {
      method: "GET",
      path: `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/resourceclaims/${encodeURIComponent(name)}`,
    });
  }

  /** Another reconcile of `node` after `ms` (one timer per node; the pod informer may stay quiet). */
  private retryLater(node: SimulatedNode, ms: number): void {
    if (this.stopped) return;
    clearTimeout(node.retryTimer);
    node.retryTimer = setTimeout(() => this.reconcileSoon(node.name), ms);
    node.retryTimer.unref();
  }

  private async recordPodEvent(
    node: SimulatedNode,
    pod: V1Pod,
    reason: string,
    message: string,
  ): Promise<void> {
    const namespace = pod.metadata?.namespace ?? "";
    const now = new Date().toISOString();
    await kubeRequest(this.kubeconfig, {
      method: "POST",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      body: {
        apiVersion: "v1",
        kind: "Event",
        metadata: { generateName: `${pod.metadata?.name}.`, namespace },
        involvedObject: {
          apiVersion: "v1",
          kind: "Pod",
          namespace,
          name: pod.metadata?.name,
          uid: pod.metadata?.uid,
        },
        type: "Warning",
        reason,
        message,
        source: { component: "kubelet", host: node.name },
        reportingComponent: "kubelet",
        reportingInstance: node.name,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    }).catch((err: Error) => this.log.warn({ err: err.message }, "event not recorded"));
  }

  /**
   * Writes a plugin pod's status as it is now; if the API server does not take it (it is restarting),
   * tries again every second while the pod is still this node's, as the kubelet's status manager keeps
   * syncing until the API has it.
   */
  private async writePluginPodStatus(node: SimulatedNode, record: PodRecord): Promise<void> {
    const exit = record.plugin.exit;
    const written = await this.writePodStatus(
      record.pod,
      runningPodStatus(record.pod, {
        now: new Date().toISOString(),
        startedAt: record.startedAt,
        hostIP: node.hostIP,
        ready: record.ready,
        ...(exit !== undefined
          ? {
              exited: {
                exitCode: exit.code ?? 128 + (exit.signal ? (osSignals[exit.signal] ?? 0) : 0),
                reason: exit.code === 0 ? "Completed" : "Error",
              },
            }
          : {}),
      }),
    );
    if (!written && !this.stopped) {
      setTimeout(() => {
        if (!this.stopped && [...node.pods.values()].includes(record))
          void this.writePluginPodStatus(node, record);
      }, CONFIG_RETRY_MS).unref();
    }
  }

  /**
   * The kubelet's readiness prober for a plugin container: an HTTP GET of the probe's path on the
   * plugin's health port right away and every `periodSeconds` (after `initialDelaySeconds`); Ready
   * after `successThreshold` successes, not Ready after `failureThreshold` failures. Without a
   * readiness probe the container is ready once it runs.
   */
  private startProbing(node: SimulatedNode, record: PodRecord): void {
    this.stopProbing(record);
    const probe = record.readinessProbe;
    const setReady = (ready: boolean): void => {
      if (record.ready === ready || this.stopped) return;
      record.ready = ready;
      void this.writePluginPodStatus(node, record);
    };
    if (probe?.httpGet === undefined) {
      setReady(true);
      return;
    }
    const prober: Prober = { timer: undefined, failures: 0, stopped: false };
    record.prober = prober;
    const periodMs = (probe.periodSeconds ?? 10) * 1000;
    const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
    const failureThreshold = probe.failureThreshold ?? 3;
    const url = `http://127.0.0.1:${record.healthPort}${probe.httpGet.path ?? "/"}`;
    const tick = async (): Promise<void> => {
      if (prober.stopped || !record.plugin.running) return;
      const ok = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then(
        (res) => res.status >= 200 && res.status < 400,
        () => false,
      );
      if (prober.stopped) return;
      if (ok) {
        prober.failures = 0;
        setReady(true);
      } else if (++prober.failures >= failureThreshold) {
        setReady(false);
      }
      prober.timer = setTimeout(() => void tick(), periodMs);
      prober.timer.unref();
    };
    prober.timer = setTimeout(() => void tick(), (probe.initialDelaySeconds ?? 0) * 1000);
    prober.timer.unref();
  }

  private stopProbing(record: PodRecord): void {
    if (record.prober === undefined) return;
    record.prober.stopped = true;
    clearTimeout(record.prober.timer);
    record.prober = undefined;
  }

  /** Starts the pod's process; its log file collects stdout and stderr of every start. */
  private spawnPlugin(pod: PodRecord): PluginProcess {
    const plugin: PluginProcess = new PluginProcess(pod.runtime, pod.launch, (status) => {
      this.log.info({ node: pod.node, pod: `${pod.namespace}/${pod.name}`, ...status }, "plugin exited");
      // The container is down: not ready, its exit in the pod status (the pod stays Running).
      const node = this.nodes.get(pod.node);
      if (node !== undefined && pod.plugin === plugin && !this.stopped) {
        this.stopProbing(pod);
        pod.ready = false;
        if ([...node.pods.values()].includes(pod)) void this.writePluginPodStatus(node, pod);
      }
      this.emit("pluginExited", this.info(pod, plugin));
    });
    this.log.info(
      { node: pod.node, pod: `${pod.namespace}/${pod.name}`, pid: plugin.child.pid },
      "plugin started",
    );
    this.emit("pluginStarted", this.info(pod, plugin));
    return plugin;
  }

  /** Everything the kubelet sets up before the container starts: config volume, token, env, args. */
  private async preparePod(node: SimulatedNode, slot: string, pod: V1Pod): Promise<PreparedPod> {
    const namespace = pod.metadata?.namespace ?? "";
    const name = pod.metadata?.name ?? "";
    const uid = pod.metadata?.uid ?? "";
    const container: V1Container | undefined = pod.spec?.containers[0];
    if (container === undefined) throw new Error(`pod ${namespace}/${name} has no container`);
    const podDir = `/var/lib/kubelet/pods/${uid}`;

    const { env: podEnv, unresolved } = resolveContainerEnv(pod, container);
    if (unresolved.length > 0) {
      this.log.warn(
        { node: node.name, pod: `${namespace}/${name}`, env: unresolved },
        "env values not simulated",
      );
    }
    const args = (container.args ?? []).map((arg) => expandVariableReferences(arg, podEnv));

    const containerConfigPath = flagValue(args, "config");
    const source =
      containerConfigPath === undefined
        ? { volume: "config", configMap: this.configVolumeName(pod), key: PLUGIN_CONFIG_KEY }
        : configMapFileAt(pod, container, containerConfigPath);
    if (source?.configMap === undefined) {
      throw new Error(
        `pod ${namespace}/${name}: no ConfigMap volume holds --config ${containerConfigPath ?? ""}`,
      );
    }
    // The kubelet mounts a pod's volumes side by side: the config and the token are asked for at once.
    const token = this.podKubeconfig(node, pod);
    token.catch(() => undefined);
    const configMap = await kubeRequest<V1ConfigMap>(this.kubeconfig, {
      method: "GET",
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps/${encodeURIComponent(source.configMap)}`,
    });
    const text = configMap.data?.[source.key];
    if (text === undefined)
      throw new Error(`ConfigMap ${namespace}/${source.configMap} has no key ${source.key}`);
    const configFile = this.hostPath(
      node.name,
      `${podDir}/volumes/kubernetes.io~configmap/${source.volume}/${source.key}`,
    );
    await mkdir(dirname(configFile), { recursive: true });
    await writeFile(
      configFile,
      simulatedPluginConfigText(text, (p) => this.hostPath(node.name, p)),
    );

    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", ...podEnv };
    const kubeconfigFile = await token;
    if (kubeconfigFile !== undefined) env.DPO_KUBECONFIG = kubeconfigFile;

    const logDir = join(this.root, "logs", node.name);
    await mkdir(logDir, { recursive: true });
    // Every plugin shares this host's loopback: each gets a port of its own, where its prober looks
    // (and, with pluginMetrics, where /metrics is scraped: the same address makes one listener).
    const healthPort = await freePort();
    const paths: PluginProcessPaths = {
      configFile,
      devicePluginDir: node.devicePluginDir,
      pluginsRegistryDir: node.pluginsRegistryDir,
      draPluginsDir: node.draPluginsDir,
      // A plugin with CDI writes its spec into the node's tree, never into this host's /var/run/cdi.
      cdiDir: this.hostPath(node.name, DEFAULT_CDI_DIR),
      healthAddr: `127.0.0.1:${healthPort}`,
      ...(this.options.pluginMetrics ? { metricsAddr: `127.0.0.1:${healthPort}` } : {}),
      podResourcesSocket: node.podResources.socketPath,
    };
    const launch: Launch = {
      args: rewritePluginArgs(args, paths),
      env: { ...env, ...simulatedPluginEnv(paths) },
      logFile: join(logDir, `${namespace}_${name}_${uid}.log`),
    };
    const runtime = this.runtimeOf(this.images.get(container.image ?? "") ?? this.entrypoint);
    return {
      node: node.name,
      slot,
      namespace,
      name,
      uid,
      image: container.image ?? "",
      runtime: await runtime,
      launch,
      healthPort,
      metricsUrl: this.options.pluginMetrics ? `http://127.0.0.1:${healthPort}/metrics` : undefined,
      readinessProbe: container.readinessProbe,
      pod,
    };
  }

  private configVolumeName(pod: V1Pod): string | undefined {
    return pod.spec?.volumes?.find((v) => v.name === "config")?.configMap?.name;
  }

  /**
   * A kubeconfig whose credential is a token bound to the pod, for its ServiceAccount: the plugin gets
   * exactly the RBAC its pod would. Without the ServiceAccount there is no token (logged).
   */
  private async podKubeconfig(node: SimulatedNode, pod: V1Pod): Promise<string | undefined> {
    const namespace = pod.metadata?.namespace ?? "";
    const serviceAccount = pod.spec?.serviceAccountName ?? "default";
    let token: string;
    try {
      const response = await kubeRequest<{ status: { token: string } }>(this.kubeconfig, {
        method: "POST",
        path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
        body: {
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenRequest",
          spec: {
            audiences: [],
            expirationSeconds: TOKEN_EXPIRATION_SECONDS,
            boundObjectRef: {
              apiVersion: "v1",
              kind: "Pod",
              name: pod.metadata?.name,
              uid: pod.metadata?.uid,
            },
          },
        },
      });
      token = response.status.token;
    } catch (err) {
      if (!isNotFound(err)) throw err;
      this.log.warn(
        { node: node.name, pod: `${namespace}/${pod.metadata?.name}`, serviceAccount },
        "ServiceAccount not found; the plugin runs without API credentials",
      );
      return undefined;
    }
    const cluster = this.kubeconfig.getCurrentCluster();
    if (cluster === null) throw new Error("the simulator's kubeconfig has no current cluster");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ ...cluster, name: "cluster", server: this.options.pluginApiServer ?? cluster.server }],
      users: [{ name: serviceAccount, token }],
      contexts: [{ name: "pod", cluster: "cluster", user: serviceAccount, namespace }],
      currentContext: "pod",
    });
    const file = this.hostPath(node.name, `/var/lib/kubelet/pods/${pod.metadata?.uid}/kubeconfig`);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, kc.exportConfig(), { mode: 0o600 });
    return file;
  }
}

/** Lists the plugin sockets in a directory (everything but kubelet.sock), for assertions. */
export async function pluginSockets(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.endsWith(".sock") && name !== "kubelet.sock").sort();
}

/**
 * Whether a kubelet of this version keeps one device-plugin endpoint per socket: v1.37.0 and later
 * (kubernetes PR #135437). Written here from the kubelet's history, not shared with the operator's
 * own check, so a mistake there shows up against this one. A version that cannot be read gets the
 * older behaviour, the one that loses devices.
 */
export function endpointPerSocket(kubeletVersion: string): boolean {
  const version = semver.coerce(kubeletVersion, { includePrerelease: false });
  return version !== null && semver.gte(version, "1.37.0");
}
