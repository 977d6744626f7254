// Which DevicePluginConfigs an event concerns: pure functions from watched objects to config names.
import type { V1Node, V1ObjectMeta, V1OwnerReference } from "@kubernetes/client-node";
import { KIND } from "../../api/v1beta1/config.js";

/** The owner reference to a DevicePluginConfig on an object, if any. */
function configOwner(meta: V1ObjectMeta | undefined): V1OwnerReference | undefined {
  return meta?.ownerReferences?.find((o) => o.kind === KIND && o.apiVersion.startsWith("dpo.dev/"));
}

/** The uid of the DevicePluginConfig that owns an object, if any. */
export function ownerUid(object: { metadata?: V1ObjectMeta | undefined }): string | undefined {
  return configOwner(object.metadata)?.uid;
}

/** The DevicePluginConfig that owns an object (ConfigMap, DaemonSet, DeviceNodeState), if any. */
export function ownerConfigName(meta: V1ObjectMeta | undefined): string | undefined {
  return configOwner(meta)?.name;
}

function readyStatus(node: V1Node | undefined): string | undefined {
  return node?.status?.conditions?.find((c) => c.type === "Ready")?.status;
}

function sameJSON(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/**
 * True when a Node update can change a config's status or placement: labels, taints, schedulability,
 * the Ready condition, or capacity/allocatable of an extended resource. Heartbeats (condition times,
 * images, addresses) are not, and at 1000 nodes they are most of the updates.
 */
export function nodeChangeMatters(old: V1Node | undefined, cur: V1Node | undefined): boolean {
  if (!old || !cur) return true;
  return (
    !sameJSON(old.metadata?.labels, cur.metadata?.labels) ||
    !sameJSON(old.spec?.taints, cur.spec?.taints) ||
    old.spec?.unschedulable !== cur.spec?.unschedulable ||
    old.status?.nodeInfo?.kubeletVersion !== cur.status?.nodeInfo?.kubeletVersion ||
    readyStatus(old) !== readyStatus(cur) ||
    !sameJSON(old.status?.capacity, cur.status?.capacity) ||
    !sameJSON(old.status?.allocatable, cur.status?.allocatable)
  );
}
