// Where each revision of a config's plugin runs during an upgrade (ADR 0004): two labels on each Node name
// the revisions the node runs, and each revision's DaemonSet selects the nodes whose labels name it. The
// DaemonSets never change while nodes move, and no object grows with the number of nodes.
import type { V1Affinity, V1NodeSelectorTerm, V1Toleration } from "@kubernetes/client-node";

import {
  NODE_REPLACE_TAINT_PREFIX,
  NODE_REVISION_PREFIX,
  NODE_SURGE_PREFIX,
  NODE_UPGRADE_PREFIX,
  nodeKeys,
  type NodeKeys,
} from "../../contract/node-upgrade.js";

// The keys live in the contract (a plugin reads the record); the render's callers keep importing them here.
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
