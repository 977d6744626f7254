// Which nodes a config's plugin runs on: its nodeSelector and nodeSelectorTerm (less the nodes configs of
// higher priority take), and the taints its DaemonSet pods tolerate.
import type { V1Node, V1NodeSelectorTerm, V1Taint, V1Toleration } from "@kubernetes/client-node";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import { expressionsOf, nodeMatchesTerms, nodeMeetsAll, type TargetingSpec } from "../render/node-terms.js";
import { NODE_REPLACE_TAINT_PREFIX } from "../render/placement.js";

/** The spec fields that say where a plugin runs. */
export type SelectionSpec = Pick<DevicePluginConfigSpec, "nodeSelector" | "tolerations"> &
  Pick<TargetingSpec, "nodeSelectorTerm">;

/**
 * The config's node selector terms as decided among the configs of its resource name (see
 * status/conflicts.ts); absent: its own nodeSelectorTerm alone.
 */
export interface Targeting {
  terms: V1NodeSelectorTerm[] | undefined;
}

/** Whether the node meets the config's labels and terms (taints aside). */
export function nodeSelectedBy(node: V1Node, spec: SelectionSpec, targeting?: Targeting): boolean {
  if (!nodeMatchesSelector(node, spec.nodeSelector)) return false;
  return targeting ? nodeMatchesTerms(node, targeting.terms) : nodeMeetsAll(node, expressionsOf(spec));
}

/** True when every key of the selector is a label of the node with the same value; `{}` selects all. */
export function nodeMatchesSelector(node: V1Node, selector: Readonly<Record<string, string>>): boolean {
  const labels = node.metadata?.labels ?? {};
  for (const [key, value] of Object.entries(selector)) {
    if (labels[key] !== value) return false;
  }
  return true;
}

/** The Kubernetes toleration rule: empty effect and (with Exists) empty key match anything. */
export function toleratesTaint(toleration: V1Toleration, taint: V1Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  if (toleration.key && toleration.key !== taint.key) return false;
  switch (toleration.operator ?? "Equal") {
    case "Exists":
      return true;
    case "Equal":
      return (toleration.value ?? "") === (taint.value ?? "");
    default:
      return false;
  }
}

/** What the DaemonSet controller adds to every daemon pod (not hostNetwork), so nodes keep their plugin. */
export const DAEMON_POD_DEFAULT_TOLERATIONS: readonly V1Toleration[] = [
  { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute" },
  { key: "node.kubernetes.io/disk-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/pid-pressure", operator: "Exists", effect: "NoSchedule" },
  { key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" },
];

/**
 * Whether the config's DaemonSet should run a plugin pod on the node, by the DaemonSet controller's
 * own rule: the nodeSelector and the node affinity's terms match and every NoSchedule/NoExecute taint is tolerated (by the spec's
 * tolerations or the daemon-pod defaults), but for the Replace fences of dpo's own rollouts. So the count of targeted nodes is the DaemonSet's
 * desiredNumberScheduled, known before that controller has acted, and a tainted control-plane node
 * does not count against a config with an empty selector.
 */
export function pluginRunsOnNode(node: V1Node, spec: SelectionSpec, targeting?: Targeting): boolean {
  if (!nodeSelectedBy(node, spec, targeting)) return false;
  for (const taint of node.spec?.taints ?? []) {
    if (taint.effect !== "NoSchedule" && taint.effect !== "NoExecute") continue;
    // A rollout's Replace fence (ADR 0004) lasts seconds and never removes a running plugin: the node
    // stays targeted, by its own config (whose pods tolerate it) and by every other.
    if (taint.key.startsWith(NODE_REPLACE_TAINT_PREFIX)) continue;
    const tolerated =
      spec.tolerations.some((t) => toleratesTaint(t, taint)) ||
      DAEMON_POD_DEFAULT_TOLERATIONS.some((t) => toleratesTaint(t, taint));
    if (!tolerated) return false;
  }
  return true;
}
