// Stands in for the kubelet of KWOK nodes, and for nothing else: per node, a host directory tree with the
// device manager's kubelet.sock, Node.status capacity/allocatable patches, and the real `dpo plugin`
// process for every plugin pod KWOK reports Running there.
import {
  KubeConfig,
  type V1ConfigMap,
  type V1Container,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import semver from "semver";
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, posix } from "node:path";
import { pino, type Logger } from "pino";
import { DEFAULT_CDI_DIR } from "../../src/cdi/spec.js";
import { isNotFound } from "../../src/kube/errors.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { kubeRequest } from "../../src/kube/request.js";
import { PODS } from "../../src/kube/resources.js";
import { PLUGIN_CONFIG_KEY } from "../../src/operator/render/configmap.js";
import { LABEL_NAME, PLUGIN_APP_NAME } from "../../src/operator/render/names.js";
import type { AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { SimulatedDeviceManager } from "./device-manager.js";
import { NodeStatusWriter } from "./node-status.js";
import {
  configMapFileAt,
  desiredPluginPods,
  expandVariableReferences,
  flagValue,
  resolveContainerEnv,
  rewritePluginArgs,
  simulatedPluginConfigText,
} from "./plugin-pod.js";

/** Where the kubelet keeps what the device manager and the plugin watcher look at, on every node. */
export const HOST_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
export const HOST_PLUGINS_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry";

const DEFAULT_DPO_ENTRYPOINT = join(import.meta.dirname, "..", "..", "dist", "dpo.js");
const DEFAULT_STOP_GRACE_MS = 5_000;
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
  logger?: Logger;
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
}

export interface KubeletSimulatorEvents {
  pluginStarted: [PluginProcessInfo];
  pluginExited: [PluginProcessInfo];
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
    entrypoint: string,
    readonly launch: Launch,
    onExit: (status: ExitStatus) => void,
  ) {
    const log = openSync(launch.logFile, "a");
    try {
      this.child = spawn(process.execPath, [entrypoint, ...launch.args], {
        env: launch.env,
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

/** A plugin pod on a node as the simulator set it up. */
interface PreparedPod {
  node: string;
  slot: string;
  namespace: string;
  name: string;
  uid: string;
  /** The container's image: which build of dpo runs (see KubeletSimulatorOptions.images). */
  image: string;
  launch: Launch;
}

interface PodRecord extends PreparedPod {
  plugin: PluginProcess;
}

interface SimulatedNode {
  name: string;
  /** The node's host filesystem: `<root>/<node>`. */
  hostRoot: string;
  /** Short aliases of the kubelet's directories, used for everything that holds unix sockets. */
  devicePluginDir: string;
  pluginsRegistryDir: string;
  deviceManager: SimulatedDeviceManager;
  status: NodeStatusWriter;
  pods: Map<string, PodRecord>;
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
 * would); plugins share this host's network, so metrics are off and probes listen on a free loopback
 * port; Node status is patched at once on every device change instead of on the kubelet's 10 s sync;
 * `stop()` takes the resources it advertised out of the node status, so a shared cluster stays clean.
 */
export class KubeletSimulator extends EventEmitter<KubeletSimulatorEvents> {
  private readonly nodes = new Map<string, SimulatedNode>();
  private readonly images: Map<string, string>;
  /** Kubelet versions this simulator changed, as they were, for stop() to put back. */
  private readonly originalVersions = new Map<string, string>();
  private readonly log: Logger;
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

  /** The node's device-plugins directory (where kubelet.sock and the plugin sockets are). */
  devicePluginDir(node: string): string {
    return this.node(node).devicePluginDir;
  }

  pluginsRegistryDir(node: string): string {
    return this.node(node).pluginsRegistryDir;
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
   */
  async restartKubelet(node: string): Promise<void> {
    await this.node(node).deviceManager.restart({ forgetDevices: true });
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
    return this.info(record, record.plugin);
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
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.informer?.stop();
    const nodes = [...this.nodes.values()];
    for (const node of nodes) clearTimeout(node.retryTimer);
    await Promise.all(nodes.flatMap((node) => (node.reconciling ? [node.reconciling] : [])));
    await Promise.all(
      nodes.flatMap((node) => [...node.pods.values()].map((r) => r.plugin.stop(this.stopGraceMs))),
    );
    await Promise.all(nodes.map((node) => node.deviceManager.stop()));
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
    await kubeRequest(this.options.kubeconfig, {
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
    };
  }

  private async startNodes(): Promise<void> {
    // Standing in for a node that does not exist would only produce failing patches later.
    const versions = new Map<string, string>();
    for (const name of this.options.nodes) {
      const found = await kubeRequest<V1Node>(this.options.kubeconfig, {
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
      // Sockets are reached through <root>/k/<index>, so that their paths stay far below the limit.
      const alias = join(aliases, String(index++));
      await symlink(kubeletDir, alias, "dir");
      const devicePluginDir = join(alias, posix.basename(HOST_DEVICE_PLUGINS_DIR));
      const pluginsRegistryDir = join(alias, posix.basename(HOST_PLUGINS_REGISTRY_DIR));
      const deviceManager = new SimulatedDeviceManager({
        dir: devicePluginDir,
        pluginsRegistryDir,
        gracePeriodMs: this.options.gracePeriodMs,
        oneEndpointPerResource: !endpointPerSocket(versions.get(name) ?? ""),
      });
      const node: SimulatedNode = {
        name,
        hostRoot,
        devicePluginDir,
        pluginsRegistryDir,
        deviceManager,
        status: new NodeStatusWriter(this.options.kubeconfig, name, this.log),
        pods: new Map(),
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
      deviceManager.on("devices", (r) => advertise(r.resourceName));
      deviceManager.on("disconnected", (r) => {
        this.log.info({ node: name, resource: r.resourceName }, "plugin stream ended");
        advertise(r.resourceName);
      });
      // A removed resource stays in the node status at 0 (the kubelet keeps it to show it is a
      // device-plugin resource rather than one the cluster advertises by other means).
      deviceManager.on("removed", (resource) => {
        this.log.info({ node: name, resource }, "resource removed after the grace period");
        if (!this.stopped) node.status.set(resource, { capacity: 0, allocatable: 0 });
      });
      await deviceManager.start();
    }
  }

  private watchPods(): void {
    const informer = createInformer<V1Pod>(this.options.kubeconfig, {
      resource: PODS,
      labelSelector: `${LABEL_NAME}=${PLUGIN_APP_NAME}`,
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
    const desired = desiredPluginPods(this.informer?.list() ?? [], node.name);
    for (const [slot, record] of node.pods) {
      if (desired.get(slot)?.metadata?.uid === record.uid) continue;
      this.log.info(
        { node: node.name, pod: `${record.namespace}/${record.name}` },
        "stopping plugin: pod gone",
      );
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
      node.pods.set(slot, { ...prepared, plugin: this.spawnPlugin(prepared) });
    }
  }

  /** Starts the pod's process; its log file collects stdout and stderr of every start. */
  private spawnPlugin(pod: PreparedPod): PluginProcess {
    const entrypoint = this.images.get(pod.image) ?? this.entrypoint;
    const plugin: PluginProcess = new PluginProcess(entrypoint, pod.launch, (status) => {
      this.log.info({ node: pod.node, pod: `${pod.namespace}/${pod.name}`, ...status }, "plugin exited");
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
    const configMap = await kubeRequest<V1ConfigMap>(this.options.kubeconfig, {
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
    const kubeconfigFile = await this.podKubeconfig(node, pod);
    if (kubeconfigFile !== undefined) env.DPO_KUBECONFIG = kubeconfigFile;

    const logDir = join(this.root, "logs", node.name);
    await mkdir(logDir, { recursive: true });
    const launch: Launch = {
      args: rewritePluginArgs(args, {
        configFile,
        devicePluginDir: node.devicePluginDir,
        pluginsRegistryDir: node.pluginsRegistryDir,
        // A plugin with CDI writes its spec into the node's tree, never into this host's /var/run/cdi.
        cdiDir: this.hostPath(node.name, DEFAULT_CDI_DIR),
      }),
      env,
      logFile: join(logDir, `${namespace}_${name}_${uid}.log`),
    };
    return { node: node.name, slot, namespace, name, uid, image: container.image ?? "", launch };
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
      const response = await kubeRequest<{ status: { token: string } }>(this.options.kubeconfig, {
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
    const cluster = this.options.kubeconfig.getCurrentCluster();
    if (cluster === null) throw new Error("the simulator's kubeconfig has no current cluster");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ ...cluster, name: "cluster" }],
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
