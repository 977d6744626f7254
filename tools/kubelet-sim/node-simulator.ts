// Stands in for the kubelet of KWOK nodes, and for nothing else: per node, a host directory tree with the
// device manager's kubelet.sock and the PodResources API's, Node.status capacity/allocatable patches, and
// the real `dpo plugin` process for every plugin pod KWOK reports Running there. This file holds the
// simulator's API; README.md maps the files each concern lives in.
import { KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { EventEmitter } from "node:events";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pino, type Logger } from "pino";
import { shareConnections } from "../../src/kube/connections.js";
import type { AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { ImageBuilds, type ExitStatus } from "./container-runtime.js";
import type { SimulatedDeviceManager } from "./device-manager.js";
import type { SimulatedDraManager } from "./dra-manager.js";
import { KubeletApi } from "./kubelet-api.js";
import { PluginProcesses, type PluginProcessEvents, type PluginProcessInfo } from "./plugin-processes.js";
import { isPluginPod, requestsExtendedResources, usesResourceClaims } from "./pod-admission.js";
import type { SimulatedPodResourcesServer } from "./pod-resources.js";
import { PodWatch } from "./pod-watch.js";
import { ProcesslessPlugins } from "./processless-plugins.js";
import { PROCESSLESS_TIMING, type ProcesslessTiming } from "./processless-rules.js";
import {
  createSimulatedNode,
  nodeHostPath,
  startSimulatedNode,
  type SimulatedNode,
} from "./simulated-node.js";
import { WorkloadPods, type AdmittedPod, type WorkloadPodEvents } from "./workload-pods.js";

export type { ExitStatus } from "./container-runtime.js";
export type { PluginProcessInfo } from "./plugin-processes.js";
export {
  HOST_DEVICE_PLUGINS_DIR,
  HOST_DRA_PLUGINS_DIR,
  HOST_PLUGINS_REGISTRY_DIR,
  HOST_POD_RESOURCES_DIR,
} from "./simulated-node.js";
export type { AdmittedContainer, AdmittedPod, PrepareFailedPod, RejectedPod } from "./workload-pods.js";

const DEFAULT_DPO_ENTRYPOINT = join(import.meta.dirname, "..", "..", "dist", "dpo.js");
const DEFAULT_STOP_GRACE_MS = 5_000;

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
  /**
   * `process` (the default): every plugin pod runs the real `dpo plugin`. `processless`: a simulated
   * node answers for its plugin pods itself (processless-plugin.ts): it registers the resource with the
   * node's device manager in-process, writes the DeviceNodeState with the plugin's own writer and
   * follows the plugin's timings, so thousands of nodes fit one machine. Its nodes serve no sockets
   * (kubelet.sock, PodResources, DRA): nothing outside the simulator talks to them.
   */
  pluginMode?: "process" | "processless";
  /** The processless plugins' timings; PROCESSLESS_TIMING (from the 100-node runs) by default. */
  processlessTiming?: ProcesslessTiming;
  logger?: Logger;
}

export interface KubeletSimulatorEvents extends PluginProcessEvents, WorkloadPodEvents {}

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
  private readonly builds: ImageBuilds;
  /** Kubelet versions this simulator changed, as they were, for stop() to put back. */
  private readonly originalVersions = new Map<string, string>();
  private readonly log: Logger;
  /**
   * The API through the caller's kubeconfig, with keep-alive connections as a kubelet holds them:
   * client-node alone opens a TLS connection per request, and the handshakes of every pod status, Node
   * patch, token and event would land on the same cores as the plugins being measured, when a node
   * changes plugins.
   */
  private readonly api: KubeletApi;
  private readonly stopGraceMs: number;
  private readonly pluginProcesses: PluginProcesses;
  private readonly processless: ProcesslessPlugins | undefined;
  private readonly workloadPods: WorkloadPods;
  private readonly podWatch: PodWatch;
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
    this.api = new KubeletApi(shareConnections(kubeconfig), this.log);
    this.builds = new ImageBuilds(options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT, options.images ?? {});
    this.stopGraceMs = options.stopGraceMs ?? DEFAULT_STOP_GRACE_MS;
    const isStopped = (): boolean => this.stopped;
    this.pluginProcesses = new PluginProcesses({
      api: this.api,
      log: this.log,
      stopGraceMs: this.stopGraceMs,
      setup: {
        api: this.api,
        log: this.log,
        root,
        pluginMetrics: options.pluginMetrics ?? false,
        pluginApiServer: options.pluginApiServer,
        runtimeFor: (image) => this.builds.runtimeFor(image),
      },
      isStopped,
      notify: {
        pluginStarted: (info) => this.emit("pluginStarted", info),
        pluginExited: (info) => this.emit("pluginExited", info),
      },
    });
    this.processless =
      options.pluginMode === "processless"
        ? new ProcesslessPlugins({
            api: this.api,
            log: this.log,
            root,
            timing: options.processlessTiming ?? PROCESSLESS_TIMING,
            isStopped,
            notify: {
              pluginStarted: (info) => this.emit("pluginStarted", info),
              pluginExited: (info) => this.emit("pluginExited", info),
            },
          })
        : undefined;
    this.workloadPods = new WorkloadPods({
      api: this.api,
      log: this.log,
      isStopped,
      notify: {
        podAdmitted: (pod) => this.emit("podAdmitted", pod),
        podRejected: (pod) => this.emit("podRejected", pod),
        podPrepareFailed: (pod) => this.emit("podPrepareFailed", pod),
      },
      retryLater: (node, ms) => this.podWatch.retryLater(node, ms),
    });
    this.podWatch = new PodWatch({
      kubeconfig: this.api.kubeconfig,
      log: this.log,
      nodes: this.nodes,
      isStopped,
      pass: (node, pods) => this.reconcile(node, pods),
    });
  }

  /** Creates the node trees, serves kubelet.sock on every node and starts watching plugin pods. */
  static async start(options: KubeletSimulatorOptions): Promise<KubeletSimulator> {
    const processless = options.pluginMode === "processless";
    if (!processless && !existsSync(options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT)) {
      throw new Error(
        `${options.dpoEntrypoint ?? DEFAULT_DPO_ENTRYPOINT} is missing: run 'make build' before using the kubelet simulator`,
      );
    }
    const root = await mkdtemp(join(shortTempBase(), "dpo-ks-"));
    const sim = new KubeletSimulator(root, options);
    try {
      if (processless) await sim.processless?.start();
      else sim.builds.prepareAll();
      await sim.startNodes();
      sim.podWatch.start();
      await sim.podWatch.waitForSync();
    } catch (err) {
      await sim.stop();
      throw err;
    }
    return sim;
  }

  /** Where the absolute host path `path` of `node` lives on this machine (e.g. a mock health file). */
  hostPath(node: string, path: string): string {
    return nodeHostPath(this.node(node), path);
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
    return this.processless?.list(nodes) ?? this.pluginProcesses.list(nodes);
  }

  /**
   * Kills the plugin process of `node` without touching its pod, as a crash would. A real kubelet would
   * restart the container; the simulator does not, until the pod is replaced or `restartPlugin` is
   * called. `slot` picks one plugin when several configs run on the node.
   */
  async killPlugin(node: string, signal: NodeJS.Signals = "SIGKILL", slot?: string): Promise<ExitStatus> {
    return this.pluginProcesses.kill(this.node(node), signal, slot);
  }

  /** Starts the exited plugin process of `node` again for the same pod: the kubelet's restart policy. */
  restartPlugin(node: string, slot?: string): PluginProcessInfo {
    return this.pluginProcesses.restart(this.node(node), slot);
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
    return this.pluginProcesses.logs(this.node(node));
  }

  /** Resolves once `node`'s status carries the counts the device manager has now. */
  async nodeStatusSettled(node: string): Promise<void> {
    await this.node(node).status.settled();
  }

  /** Pods with this image run `entrypoint` from now on (pods already running keep their process). */
  addImage(image: string, entrypoint: string): void {
    this.builds.add(image, entrypoint);
  }

  /**
   * Kills every plugin process, stops the device managers, takes the advertised resources out of the
   * node status and removes the directory tree.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.podWatch.stop();
    const nodes = [...this.nodes.values()];
    for (const node of nodes) {
      clearTimeout(node.retryTimer);
      node.status.writeImmediately();
      for (const record of node.pods.values()) this.pluginProcesses.stopProbing(record);
    }
    await Promise.all(nodes.flatMap((node) => (node.reconciling ? [node.reconciling] : [])));
    await Promise.all(
      nodes.flatMap((node) => [...node.pods.values()].map((r) => r.plugin.stop(this.stopGraceMs))),
    );
    await this.processless?.stop();
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
      await this.api
        .setKubeletVersion(name, version)
        .catch((err: Error) =>
          this.log.warn({ node: name, err: err.message }, "could not put the kubelet version back"),
        );
    }
    process.off("exit", this.killAllOnExit);
    await rm(this.root, { recursive: true, force: true });
  }

  private node(name: string): SimulatedNode {
    const node = this.nodes.get(name);
    if (node === undefined)
      throw new Error(`node ${name} is not simulated (have ${[...this.nodes.keys()].join(", ")})`);
    return node;
  }

  private async startNodes(): Promise<void> {
    // Standing in for a node that does not exist would only produce failing patches later.
    const versions = new Map<string, string>();
    const hostIPs = new Map<string, string | undefined>();
    for (const name of this.options.nodes) {
      const found = await this.api.node(name).catch((err: Error) => {
        throw new Error(`cannot simulate the kubelet of node ${name}: ${err.message}`);
      });
      const wanted = this.options.kubeletVersions?.[name];
      if (wanted !== undefined && wanted !== found.status?.nodeInfo?.kubeletVersion) {
        this.originalVersions.set(name, found.status?.nodeInfo?.kubeletVersion ?? "");
        await this.api.setKubeletVersion(name, wanted);
      }
      versions.set(name, wanted ?? found.status?.nodeInfo?.kubeletVersion ?? "");
      hostIPs.set(name, found.status?.addresses?.find((a) => a.type === "InternalIP")?.address);
    }
    process.on("exit", this.killAllOnExit);
    await mkdir(join(this.root, "k"));
    let index = 0;
    for (const name of this.options.nodes) {
      if (this.nodes.has(name)) continue;
      const node = await createSimulatedNode({
        name,
        root: this.root,
        index: index++,
        kubeletVersion: versions.get(name) ?? "",
        hostIP: hostIPs.get(name),
        api: this.api,
        log: this.log,
        gracePeriodMs: this.options.gracePeriodMs,
        nodeStatusUpdateIntervalMs: this.options.nodeStatusUpdateIntervalMs ?? 0,
        listPods: () => this.podWatch.list(),
        isStopped: () => this.stopped,
        onDeviceHealth: (n, resource) => void this.workloadPods.writeDeviceHealth(n, resource),
      });
      this.nodes.set(name, node);
      // A processless node's plugins register in-process: nothing dials its sockets.
      if (this.processless === undefined) await startSimulatedNode(node);
    }
  }

  /** One pass over the pods bound to `node`: its plugin pods first, then the pods that ask for devices. */
  private async reconcile(node: SimulatedNode, pods: V1Pod[]): Promise<void> {
    const plugins = this.processless ?? this.pluginProcesses;
    if (!(await plugins.reconcile(node, pods.filter(isPluginPod)))) return;
    await this.workloadPods.admit(
      node,
      pods.filter((p) => !isPluginPod(p) && (requestsExtendedResources(p) || usesResourceClaims(p))),
    );
  }
}

/** Lists the plugin sockets in a directory (everything but kubelet.sock), for assertions. */
export async function pluginSockets(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.endsWith(".sock") && name !== "kubelet.sock").sort();
}
