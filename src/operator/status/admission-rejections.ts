// Pods the kubelet rejected at admission for a config's resource (reason UnexpectedAdmissionError), by node:
// what a node reboot does to device plugin pods. The kubelet re-admits the pods bound to it at start, in no
// set order and usually before any DaemonSet's plugin pod runs; the device manager refuses a resource whose
// plugin has not registered yet (pkg/kubelet/cm/devicemanager devicesToAllocate: "cannot allocate
// unregistered device" or "no healthy devices present"), and a rejected pod is never admitted again.
// Nothing dpo runs can register before that: the kubelet deletes every socket in its device-plugins
// directory at start, and the plugin runs in a pod the same kubelet starts. So dpo reports them: the
// operator watches Failed pods only (a field-selected watch, trimmed to these fields), and the config's
// status names each node with its rejected pods (problem AdmissionRejected), an Event names them and
// dpo_admission_rejected_pods counts them. The DRA path (publish: DRA) waits for the driver instead.
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import type { NodeProblem } from "../../api/v1beta1/status.js";

/** The kubelet's reason for a pod its admission handlers refused with an error (lifecycle/predicate.go). */
export const UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError";
/** The field selector of the operator's watch: only pods that ended Failed. */
export const FAILED_PODS_FIELD_SELECTOR = "status.phase=Failed";
/** The index of the failed-pod cache: the extended resources a rejected pod asked for. */
export const INDEX_BY_RESOURCE = "byResource";
/** How many pods a problem message names; the rest are counted. */
export const NAMED_PODS = 8;

/** What the operator keeps of a Failed pod: its name, node, the resources it asked for, and why it failed. */
export function slimFailedPodForCache(pod: V1Pod): V1Pod {
  const slim = (c: V1Container): V1Container => ({
    name: c.name,
    resources: {
      ...(c.resources?.limits ? { limits: c.resources.limits } : {}),
      ...(c.resources?.requests ? { requests: c.resources.requests } : {}),
    },
  });
  return {
    metadata: {
      name: pod.metadata?.name,
      namespace: pod.metadata?.namespace,
      uid: pod.metadata?.uid,
      resourceVersion: pod.metadata?.resourceVersion,
    },
    spec: {
      nodeName: pod.spec?.nodeName,
      containers: (pod.spec?.containers ?? []).map(slim),
      ...(pod.spec?.initContainers ? { initContainers: pod.spec.initContainers.map(slim) } : {}),
    },
    status: { phase: pod.status?.phase, reason: pod.status?.reason, message: pod.status?.message },
  };
}

/**
 * The resources a pod rejected at admission asked for (limits and requests of its containers, init
 * containers too), as index values; none for a pod that failed for another reason.
 */
export function rejectedResources(pod: V1Pod): string[] {
  if (pod.status?.reason !== UNEXPECTED_ADMISSION_ERROR) return [];
  return extendedResourcesAskedFor(pod);
}

/** The extended resources a pod asks for a non-zero amount of (limits and requests, init containers too). */
export function extendedResourcesAskedFor(pod: V1Pod): string[] {
  const names = new Set<string>();
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    for (const [name, quantity] of Object.entries({ ...c.resources?.requests, ...c.resources?.limits })) {
      if (name.includes("/") && String(quantity) !== "0") names.add(name);
    }
  }
  return [...names];
}

/** `namespace/name` of each pod rejected for `resourceName`, by node, each list sorted. */
export function rejectedPodsByNode(pods: readonly V1Pod[], resourceName: string): Map<string, string[]> {
  const byNode = new Map<string, string[]>();
  for (const pod of pods) {
    const node = pod.spec?.nodeName;
    if (!node || !rejectedResources(pod).includes(resourceName)) continue;
    const list = byNode.get(node) ?? [];
    list.push(`${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`);
    byNode.set(node, list);
  }
  for (const list of byNode.values()) list.sort();
  return byNode;
}

/** The node's AdmissionRejected problem: the pods it names (NAMED_PODS at most), what happens to them and what avoids it. */
export function admissionRejectedProblem(node: string, pods: readonly string[]): NodeProblem {
  const named = pods.slice(0, NAMED_PODS).join(", ");
  const more = pods.length > NAMED_PODS ? ` and ${pods.length - NAMED_PODS} more` : "";
  const message =
    `the kubelet rejected ${pods.length} pod(s) before the plugin registered (${UNEXPECTED_ADMISSION_ERROR}, ` +
    `as after a node reboot): ${named}${more}; a controller replaces its pods, a bare pod stays Failed ` +
    `until deleted; publish: DRA waits for the driver instead`;
  return { node, reason: "AdmissionRejected", message: message.slice(0, MAX_MESSAGE) };
}

/** NodeProblemSchema's bound on a message. */
const MAX_MESSAGE = 1024;
