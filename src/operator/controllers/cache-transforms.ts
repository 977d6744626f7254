// What the operator's informer caches keep of a Node, a plugin Pod and a plugin's DeviceNodeState: only
// the fields its selection, status, upgrade and mapping code reads. At 1000 nodes the rest (images,
// managedFields, addresses, annotations of nodes; container specs, volumes and env of the one plugin pod
// per node; most of the devices' attributes of every report) is most of the memory, and at 5000 nodes it would
// not fit the operator's limit. DaemonSets and ConfigMaps are kept whole (less managedFields): drift
// detection compares them whole with the render, and there are a few per config, not per node.
import type {
  V1ContainerStatus,
  V1Node,
  V1NodeCondition,
  V1NodeSpec,
  V1NodeStatus,
  V1ObjectMeta,
  V1Pod,
  V1PodCondition,
  V1PodSpec,
  V1PodStatus,
} from "@kubernetes/client-node";
import type {
  DeviceNodeState,
  DeviceNodeStateStatus,
  ReportedDevice,
} from "../../api/v1beta1/devicenodestate.js";
import { NODE_UPGRADE_PREFIX } from "../model/targeting.js";
import { LABEL_SOURCE_ATTRIBUTES } from "../node-labels/from-report.js";
import { slimLabelOwnership } from "../node-labels/ownership.js";

/** Copies the keys of `source` that are present, so the slim object has no `undefined` members. */
function pick<T extends object, K extends keyof T>(
  source: T | undefined,
  keys: readonly K[],
): Pick<T, K> | undefined {
  if (source === undefined) return undefined;
  const result: Partial<Pick<T, K>> = {};
  let any = false;
  for (const key of keys) {
    if (source[key] !== undefined) {
      result[key] = source[key];
      any = true;
    }
  }
  return any ? (result as Pick<T, K>) : undefined;
}

/**
 * The Node as the operator's cache holds it. Kept, and why:
 * - metadata name, uid, resourceVersion (cache identity, update detection), labels (nodeSelector, the
 *   plugin revisions a node runs), creation and deletion timestamps, and of the annotations only the
 *   upgrade records under `upgrade.dpo.dev/` (ADR 0004), and of the managedFields only who owns each
 *   device label (ADR 0011: the operator never writes a label another manager owns);
 * - spec.taints and spec.unschedulable (which nodes a DaemonSet targets; nodeChangeMatters);
 * - status.capacity and status.allocatable (the kubelet's advertised devices);
 * - status.conditions without heartbeat times or messages (the Ready condition);
 * - status.nodeInfo.kubeletVersion (kubelet features by version, for the upgrade work).
 * Adding a reader of another Node field means adding that field here.
 */
export function slimNodeForCache(node: V1Node): V1Node {
  const metadata = pick<V1ObjectMeta, keyof V1ObjectMeta>(node.metadata, [
    "name",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
  ]);
  const records = Object.entries(node.metadata?.annotations ?? {}).filter(([k]) =>
    k.startsWith(NODE_UPGRADE_PREFIX),
  );
  if (metadata !== undefined && records.length > 0) metadata.annotations = Object.fromEntries(records);
  const owners = slimLabelOwnership(node.metadata?.managedFields);
  if (metadata !== undefined && owners !== undefined) metadata.managedFields = owners;
  const spec = pick<V1NodeSpec, keyof V1NodeSpec>(node.spec, ["taints", "unschedulable"]);
  const conditions = node.status?.conditions?.map(
    (c): V1NodeCondition =>
      pick<V1NodeCondition, keyof V1NodeCondition>(c, ["type", "status", "reason", "lastTransitionTime"]) ?? {
        type: c.type,
        status: c.status,
      },
  );
  const kubeletVersion = node.status?.nodeInfo?.kubeletVersion;
  const status = pick<V1NodeStatus, keyof V1NodeStatus>(
    {
      ...(node.status?.capacity === undefined ? {} : { capacity: node.status.capacity }),
      ...(node.status?.allocatable === undefined ? {} : { allocatable: node.status.allocatable }),
      ...(conditions === undefined ? {} : { conditions }),
      // nodeInfo's other members are required in the model type but nobody reads them.
      ...(kubeletVersion === undefined ? {} : { nodeInfo: { kubeletVersion } as V1NodeStatus["nodeInfo"] }),
    },
    ["capacity", "allocatable", "conditions", "nodeInfo"],
  );
  return {
    ...(node.apiVersion === undefined ? {} : { apiVersion: node.apiVersion }),
    ...(node.kind === undefined ? {} : { kind: node.kind }),
    ...(metadata === undefined ? {} : { metadata }),
    ...(spec === undefined ? {} : { spec }),
    ...(status === undefined ? {} : { status }),
  };
}

/**
 * The plugin Pod as the operator's cache holds it. Kept, and why:
 * - metadata name, namespace, uid, resourceVersion (cache identity; reports name their pod by uid),
 *   labels (the config a pod belongs to), annotations (the config hash it runs), ownerReferences (which
 *   revision's DaemonSet owns it), creation and deletion timestamps (choosing among a node's pods);
 * - spec.nodeName (the node it serves);
 * - status.phase, status.conditions' type and status (readiness), and each container status's waiting
 *   reason (why a pod is not ready, in the problem message).
 * Adding a reader of another Pod field means adding that field here.
 */
export function slimPodForCache(pod: V1Pod): V1Pod {
  const metadata = pick<V1ObjectMeta, keyof V1ObjectMeta>(pod.metadata, [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
  ]);
  const nodeName = pod.spec?.nodeName;
  const conditions = pod.status?.conditions?.map((c): V1PodCondition => ({ type: c.type, status: c.status }));
  const containerStatuses = pod.status?.containerStatuses?.map((c): V1ContainerStatus => {
    const reason = c.state?.waiting?.reason;
    // The other members are required in the model type but nobody reads them.
    return {
      name: c.name,
      ...(reason === undefined ? {} : { state: { waiting: { reason } } }),
    } as V1ContainerStatus;
  });
  const status = pick<V1PodStatus, keyof V1PodStatus>(
    {
      ...(pod.status?.phase === undefined ? {} : { phase: pod.status.phase }),
      ...(conditions === undefined ? {} : { conditions }),
      ...(containerStatuses === undefined ? {} : { containerStatuses }),
    },
    ["phase", "conditions", "containerStatuses"],
  );
  return {
    ...(pod.apiVersion === undefined ? {} : { apiVersion: pod.apiVersion }),
    ...(pod.kind === undefined ? {} : { kind: pod.kind }),
    ...(metadata === undefined ? {} : { metadata }),
    // containers is required in the model type; the cache never hands a pod to anything that runs it.
    ...(nodeName === undefined ? {} : { spec: { nodeName } as V1PodSpec }),
    ...(status === undefined ? {} : { status }),
  };
}

/** More distinct sets of label attributes than a fleet's devices carry (models, drivers, memory sizes, MIG modes). */
const MAX_SHARED_ATTRIBUTE_SETS = 4096;
const sharedAttributeSets = new Map<string, Readonly<Record<string, string>>>();

/**
 * Of a device's attributes, those node labels are made of (node-labels/from-report.ts), or undefined when
 * it has none of them. A fleet's GPUs carry a few such sets (one per model and driver), so every device
 * with the same set shares one frozen object rather than keeping 40,000 copies at 5000 8-GPU nodes.
 * Bounded without bookkeeping: starting over costs one object per set once more.
 */
function labelAttributes(attributes: Record<string, string> | undefined): Record<string, string> | undefined {
  if (attributes === undefined) return undefined;
  const entries: [string, string][] = [];
  for (const key of LABEL_SOURCE_ATTRIBUTES) {
    const value = attributes[key];
    if (value !== undefined) entries.push([key, value]);
  }
  if (entries.length === 0) return undefined;
  const identity = JSON.stringify(entries);
  const known = sharedAttributeSets.get(identity);
  if (known !== undefined) return known;
  if (sharedAttributeSets.size >= MAX_SHARED_ATTRIBUTE_SETS) sharedAttributeSets.clear();
  const kept = Object.freeze(Object.fromEntries(entries));
  sharedAttributeSets.set(identity, kept);
  return kept;
}

/**
 * A plugin's DeviceNodeState as the operator's cache holds it: one per node and revision, so at 5000
 * 8-GPU nodes its devices' attributes (text, typed and capacities: a dozen NVIDIA attributes each, most of
 * a report's bytes) would be most of the cache. Kept, and why:
 * - metadata name and namespace (the report's identity; whether it has the current name), uid (the
 *   precondition of a stale report's delete), resourceVersion, creation and deletion timestamps (a
 *   report too young to be stale; one being deleted is skipped);
 * - spec whole (config, node and revision it speaks for, resource name: four short strings);
 * - status.registration's state and lastError (the node's PluginNotRegistered problem) and selfHeal (the
 *   CapacityLost and CapacityRestored Events, status/self-heals.ts), podUID (which pod's report to
 *   believe), updateTime (the newest report of a node), advertised, healthy and allocated (the counts
 *   checked against the kubelet's and summed in the status);
 * - each device's id, health, reason, replicas and heldBy (unhealthy and held-out counts, the problem's
 *   device ids and reasons), and of its text attributes only those node labels are made of
 *   (LABEL_SOURCE_ATTRIBUTES, which node-labels/from-report.ts reads through), one shared object per set.
 * Adding a reader of another report field means adding that field here.
 */
export function slimReportForCache(report: DeviceNodeState): DeviceNodeState {
  const metadata = pick<V1ObjectMeta, keyof V1ObjectMeta>(report.metadata, [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
  ]) as DeviceNodeState["metadata"];
  const status = report.status;
  if (status === undefined) {
    return { apiVersion: report.apiVersion, kind: report.kind, metadata, spec: report.spec };
  }
  const { state, lastError, selfHeal } = status.registration;
  const devices = status.devices.map((d) => {
    const attributes = labelAttributes(d.attributes);
    // `since` is required in the type; nobody in the operator reads it.
    return {
      id: d.id,
      health: d.health,
      replicas: d.replicas,
      ...(d.reason === undefined || d.reason === "" ? {} : { reason: d.reason }),
      ...(d.heldBy === undefined ? {} : { heldBy: d.heldBy }),
      ...(attributes === undefined ? {} : { attributes }),
    } as ReportedDevice;
  });
  // pluginVersion, kubeletAPIVersion and registration.since are required in the type; nobody reads them.
  const slim = {
    registration: {
      state,
      ...(lastError === undefined ? {} : { lastError }),
      ...(selfHeal === undefined ? {} : { selfHeal }),
    },
    ...(status.podUID === undefined ? {} : { podUID: status.podUID }),
    advertised: status.advertised,
    healthy: status.healthy,
    ...(status.allocated === undefined ? {} : { allocated: status.allocated }),
    devices,
    updateTime: status.updateTime,
  } as DeviceNodeStateStatus;
  return { apiVersion: report.apiVersion, kind: report.kind, metadata, spec: report.spec, status: slim };
}
