// One simulated node: its host directory tree, the kubelet's managers serving in it (device manager and
// plugin watcher, DRA manager, PodResources API), and its Node status following the device manager.
import type { V1Pod } from "@kubernetes/client-node";
import { mkdir, symlink } from "node:fs/promises";
import { isAbsolute, join, posix } from "node:path";
import type { Logger } from "pino";
import { DRA_PLUGINS_DIR } from "../../src/contract/kubelet-paths.js";
import { SimulatedDeviceManager } from "./device-manager.js";
import { SimulatedDraManager } from "./dra-manager.js";
import type { KubeletApi } from "./kubelet-api.js";
import { endpointPerSocket, reportsDeviceHealthInPodStatus } from "./kubelet-rules.js";
import { NodeStatusWriter } from "./node-status.js";
import type { AdmittedPod, PodRecord } from "./node-pods.js";
import { isActivePod } from "./plugin-pod.js";
import { podResourcesPod, SimulatedPodResourcesServer } from "./pod-resources.js";

/** Where the kubelet keeps what the device manager and the plugin watcher look at, on every node. */
export const HOST_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
export const HOST_PLUGINS_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry";
/** The kubelet's PodResources API, under its default root directory. */
export const HOST_POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources";
/** Where DRA plugins put their sockets, one directory per driver (the kubelet's plugins dir). */
export const HOST_DRA_PLUGINS_DIR = DRA_PLUGINS_DIR;
const POD_RESOURCES_SOCKET = "kubelet.sock";

export interface SimulatedNode {
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

export interface SimulatedNodeSetup {
  name: string;
  /** The simulator's root: the node's tree is `<root>/<name>`. */
  root: string;
  /** `<root>/k/<index>` becomes the short alias of the node's /var/lib/kubelet. */
  index: number;
  /** The version the node's kubelet behaves as (its device manager and DRA manager follow it). */
  kubeletVersion: string;
  hostIP: string | undefined;
  api: KubeletApi;
  log: Logger;
  gracePeriodMs: number | undefined;
  nodeStatusUpdateIntervalMs: number;
  /** Every pod the simulator's informer holds: the PodResources API lists the node's active ones. */
  listPods: () => V1Pod[];
  isStopped: () => boolean;
  /** A device of `resource` changed health: the pods holding its devices get their status written again. */
  onDeviceHealth: (node: SimulatedNode, resource: string) => void;
}

/** Where the absolute host path `path` of `node` lives on this machine. */
export function nodeHostPath(node: SimulatedNode, path: string): string {
  if (!isAbsolute(path)) throw new Error(`hostPath needs an absolute path, got ${path}`);
  return join(node.hostRoot, posix.normalize(path));
}

/**
 * Creates the node's tree and its managers, not serving yet (see startSimulatedNode). Sockets are
 * reached through `<root>/k/<index>`, so that their paths stay far below the limit of 107 bytes.
 */
export async function createSimulatedNode(setup: SimulatedNodeSetup): Promise<SimulatedNode> {
  const { name, root, log } = setup;
  const hostRoot = join(root, name);
  const kubeletDir = join(hostRoot, posix.dirname(HOST_DEVICE_PLUGINS_DIR));
  await mkdir(join(hostRoot, HOST_DEVICE_PLUGINS_DIR), { recursive: true });
  await mkdir(join(hostRoot, HOST_PLUGINS_REGISTRY_DIR), { recursive: true });
  await mkdir(join(hostRoot, HOST_POD_RESOURCES_DIR), { recursive: true });
  await mkdir(join(hostRoot, HOST_DRA_PLUGINS_DIR), { recursive: true });
  const alias = join(root, "k", String(setup.index));
  await symlink(kubeletDir, alias, "dir");
  const devicePluginDir = join(alias, posix.basename(HOST_DEVICE_PLUGINS_DIR));
  const pluginsRegistryDir = join(alias, posix.basename(HOST_PLUGINS_REGISTRY_DIR));
  const podResourcesSocket = join(alias, posix.basename(HOST_POD_RESOURCES_DIR), POD_RESOURCES_SOCKET);
  const draPluginsDir = join(alias, posix.basename(HOST_DRA_PLUGINS_DIR));
  // The node's kubelet version decides which DRA service it talks (v1 from 1.34, v1beta1 before).
  const dra = new SimulatedDraManager(setup.kubeletVersion, {
    nodeName: name,
    deleteSlices: (fieldSelector, signal) => setup.api.deleteResourceSlices(fieldSelector, signal),
    onWipeError: (err) =>
      log.warn({ node: name, err: err.message }, "deleting the node's ResourceSlices failed; retrying"),
  });
  const deviceManager = new SimulatedDeviceManager({
    dir: devicePluginDir,
    pluginsRegistryDir,
    pluginHandlers: { DRAPlugin: dra },
    gracePeriodMs: setup.gracePeriodMs,
    oneEndpointPerResource: !endpointPerSocket(setup.kubeletVersion),
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
        setup
          .listPods()
          .filter((p) => p.spec?.nodeName === name && isActivePod(p))
          .map(podResourcesPod),
    }),
    status: new NodeStatusWriter(setup.api.kubeconfig, name, log, setup.nodeStatusUpdateIntervalMs),
    hostIP: setup.hostIP,
    pods: new Map(),
    admitted: new Map(),
    running: new Map(),
    deviceHealthInPodStatus: reportsDeviceHealthInPodStatus(setup.kubeletVersion),
    rejected: new Set(),
    logs: new Map(),
    reconciling: undefined,
    rerun: false,
    retryTimer: undefined,
  };
  followDeviceManager(node, setup);
  return node;
}

/**
 * Serves the node's managers. The kubelet's DRA manager starts before its plugin watcher: the node's
 * slices of earlier plugin instances are gone before any DRA plugin can register.
 */
export async function startSimulatedNode(node: SimulatedNode): Promise<void> {
  await node.dra.start();
  await node.deviceManager.start();
  await node.podResources.start();
}

/** Node status follows the device manager: capacity counts every device, allocatable the healthy ones. */
function followDeviceManager(node: SimulatedNode, setup: SimulatedNodeSetup): void {
  const { name, log, isStopped } = setup;
  const { deviceManager, dra } = node;
  const advertise = (resource: string): void => {
    if (!isStopped()) node.status.set(resource, deviceManager.capacity(resource) ?? null);
  };
  deviceManager.on("registered", (r) => {
    log.info({ node: name, resource: r.resourceName, endpoint: r.endpoint }, "plugin registered");
    advertise(r.resourceName);
  });
  deviceManager.on("devices", (r) => {
    advertise(r.resourceName);
    setup.onDeviceHealth(node, r.resourceName);
  });
  deviceManager.on("disconnected", (r) => {
    log.info({ node: name, resource: r.resourceName }, "plugin stream ended");
    advertise(r.resourceName);
    setup.onDeviceHealth(node, r.resourceName);
  });
  // A removed resource stays in the node status at 0 (the kubelet keeps it to show it is a
  // device-plugin resource rather than one the cluster advertises by other means).
  deviceManager.on("removed", (resource) => {
    log.info({ node: name, resource }, "resource removed after the grace period");
    if (!isStopped()) node.status.set(resource, { capacity: 0, allocatable: 0 });
  });
  dra.on("registered", (d) =>
    log.info({ node: name, driver: d.driverName, service: d.service }, "DRA driver registered"),
  );
  dra.on("deregistered", (d) => log.info({ node: name, driver: d.driverName }, "DRA driver deregistered"));
}
