// The targeting rule, shared by rendering, the rollout and the status: which nodes a config's plugin runs on
// (its nodeSelector and nodeSelectorTerm, less the nodes configs of higher priority take, and the taints its
// DaemonSet pods tolerate), and where each revision of it runs during an upgrade (ADR 0004): two labels on
// each Node name the revisions the node runs, and each revision's DaemonSet selects the nodes whose labels
// name it. The DaemonSets never change while nodes move, and no object grows with the number of nodes.
import type { V1Affinity, V1Node, V1NodeSelectorTerm, V1Taint, V1Toleration } from "@kubernetes/client-node";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import { expressionsOf, nodeMatchesTerms, nodeMeetsAll, type TargetingSpec } from "./node-terms.js";

import {
  NODE_REPLACE_TAINT_PREFIX,
  NODE_REVISION_PREFIX,
  NODE_SURGE_PREFIX,
  NODE_UPGRADE_PREFIX,
  nodeKeys,
  type NodeKeys,
} from "../../contract/node-upgrade.js";

// The keys live in the contract (a plugin reads the record); the operator's modules import them from here.
export { NODE_REPLACE_TAINT_PREFIX, NODE_REVISION_PREFIX, NODE_SURGE_PREFIX, NODE_UPGRADE_PREFIX, nodeKeys };
export type { NodeKeys };
/** The revision label's value on a node that runs no revision: a Replace in its gap, or a kubelet too old. */
export const NO_REVISION = "none";

/**
 * The role of a revision's DaemonSet: the `base` runs every targeted node no upgrade has touched (no
 * revision label) as well as the nodes whose labels name it; a `moving` revision (the one nodes move to,
 * or one they return from) runs only the nodes whose labels name it.
 */
export type PlacementRole = "base" | "moving";

/** Stands for "no node" (a config every node of which a higher-priority config takes): no label meets both. */
const NO_NODE_KEY = "dpo.dev/served-by-higher-priority";
const NO_NODE_TERM: V1NodeSelectorTerm = {
  matchExpressions: [
    { key: NO_NODE_KEY, operator: "Exists" },
    { key: NO_NODE_KEY, operator: "DoesNotExist" },
  ],
};

/**
 * The node affinity of a revision in a role. Terms are ORed: the revision label names it, or the surge
 * label does, or (the base only) the node has no revision label. The config's nodeSelector still applies
 * on top (it is the pod's nodeSelector). `targeting` (see node-terms.ts: spec.nodeSelectorTerm, and the
 * steps back from higher-priority configs) is ANDed in by putting each of its terms into each of these:
 * (t1 ∨ t2) ∧ (p1 ∨ p2) = t1p1 ∨ t1p2 ∨ t2p1 ∨ t2p2. Undefined: no targeting; `[]`: no node.
 */
export function placementAffinity(
  configName: string,
  revision: string,
  role: PlacementRole,
  targeting?: readonly V1NodeSelectorTerm[],
): V1Affinity {
  const keys = nodeKeys(configName);
  const placement: V1NodeSelectorTerm[] = [
    ...(role === "base" ? [{ matchExpressions: [{ key: keys.revision, operator: "DoesNotExist" }] }] : []),
    { matchExpressions: [{ key: keys.revision, operator: "In", values: [revision] }] },
    { matchExpressions: [{ key: keys.surge, operator: "In", values: [revision] }] },
  ];
  const terms =
    targeting === undefined
      ? placement
      : (targeting.length === 0 ? [NO_NODE_TERM] : targeting).flatMap((t) =>
          placement.map((p) => ({
            matchExpressions: [...(p.matchExpressions ?? []), ...(t.matchExpressions ?? [])],
          })),
        );
  return { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } };
}

/**
 * The targeting terms a DaemonSet's affinity carries (the inverse of placementAffinity): its terms less
 * the placement's expressions, once each. Undefined when there are none. The rollout keeps them when it
 * changes a DaemonSet's role.
 */
export function targetingOfAffinity(affinity: V1Affinity | undefined): V1NodeSelectorTerm[] | undefined {
  const terms = affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  const seen = new Map<string, V1NodeSelectorTerm>();
  for (const term of terms ?? []) {
    const rest = (term.matchExpressions ?? []).filter(
      (e) => !e.key.startsWith(NODE_REVISION_PREFIX) && !e.key.startsWith(NODE_SURGE_PREFIX),
    );
    if (rest.length === 0) continue;
    if (rest.some((e) => e.key === NO_NODE_KEY)) return [];
    seen.set(JSON.stringify(rest), { matchExpressions: rest });
  }
  return seen.size === 0 ? undefined : [...seen.values()];
}

/** The toleration of the config's Replace taint, on every revision's pods: a new plugin must start there. */
export function replaceToleration(configName: string): V1Toleration {
  return { key: nodeKeys(configName).replace, operator: "Exists", effect: "NoSchedule" };
}

/**
 * The pod template's tolerations with the Replace taint's added (once). Not part of the revision: the
 * operator adds it to every revision, old ones included, so a rollback can bring an old plugin back to
 * a fenced node.
 */
export function withReplaceToleration(
  configName: string,
  tolerations: readonly V1Toleration[] | undefined,
): V1Toleration[] {
  const own = replaceToleration(configName);
  const others = (tolerations ?? []).filter((t) => t.key !== own.key);
  return [...others, own];
}

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
