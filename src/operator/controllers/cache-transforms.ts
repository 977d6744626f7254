// What the operator's informer caches keep of a Node and of a plugin Pod: only the fields its selection,
// status, upgrade and mapping code reads. At 1000 nodes the rest (images, managedFields, addresses,
// annotations of nodes; container specs, volumes and env of the one plugin pod per node) is most of
// the memory, and at 5000 nodes it would not fit the operator's limit.
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
import { NODE_UPGRADE_PREFIX } from "../model/targeting.js";
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
