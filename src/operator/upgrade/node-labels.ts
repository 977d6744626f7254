// What a Node says about a config's upgrade, and the patch that makes it say what the planner decided
// (ADR 0004). Two labels name the revisions the node runs: `revision.dpo.dev/<config>` (absent on a node
// no upgrade has touched, which runs the base) and `surge.dpo.dev/<config>` (a second revision beside the
// first while the node surges). One annotation, `upgrade.dpo.dev/<config>`, keeps the node's record of
// the upgrade under way: when it started, what it advertised before, whether it failed. Every value is
// bounded, so a Node gains at most three short entries per config, whatever the size of the cluster. Pure.
import type { V1Node, V1Taint } from "@kubernetes/client-node";
import { parseNodeRecordText, serializeNodeRecord, type NodeRecord } from "../../contract/node-upgrade.js";
import { NO_REVISION, type NodeKeys } from "../model/targeting.js";

export { serializeNodeRecord, type NodeRecord };

/** The revisions a node runs, as its labels say. */
export interface NodeLabels {
  /** undefined: no label, the node runs the base. */
  revision: string | undefined;
  surge: string | undefined;
}

/** Whether the node runs the old (base) revision and the new (moving) one. */
export interface Membership {
  old: boolean;
  new: boolean;
}

export function nodeLabels(node: V1Node, keys: NodeKeys): NodeLabels {
  const labels = node.metadata?.labels ?? {};
  return { revision: labels[keys.revision], surge: labels[keys.surge] };
}

/** Whether the labels make the DaemonSet of `revision` run on the node (see placementAffinity). */
export function runsRevision(labels: NodeLabels, revision: string, isBase: boolean): boolean {
  return (
    labels.revision === revision || labels.surge === revision || (isBase && labels.revision === undefined)
  );
}

/**
 * The labels that make a node run what `want` says, for an upgrade from `base` to `moving`, changing as
 * little as possible: a node that runs the base without a label keeps having none, a surging node keeps
 * the revision it had and gains the other as its surge label.
 */
export function encodeMembership(
  current: NodeLabels,
  want: Membership,
  base: string,
  moving: string,
): NodeLabels {
  const onBase = current.revision === undefined || current.revision === base;
  if (want.old && want.new) {
    if (current.revision === moving) return { revision: moving, surge: base };
    return { revision: onBase ? current.revision : base, surge: moving };
  }
  if (want.old) return { revision: onBase ? current.revision : base, surge: undefined };
  if (want.new) return { revision: moving, surge: undefined };
  return { revision: NO_REVISION, surge: undefined };
}

/** The node's record of the upgrade from `from` to `to`, or undefined when it has none (or another's). */
export function parseNodeRecord(
  node: V1Node,
  keys: NodeKeys,
  from: string,
  to: string,
): NodeRecord | undefined {
  // Unreadable (edited by hand): the node has no record, and the planner treats it as it would a node
  // moved outside the planner.
  const record = parseNodeRecordText(node.metadata?.annotations?.[keys.upgrade]);
  return record !== undefined && record.from === from && record.to === to ? record : undefined;
}

/**
 * A JSON merge patch of a Node's labels and annotation, carrying the resourceVersion it was planned from:
 * the API server refuses it (409) if the Node changed since, so a stale cache never moves a node twice.
 */
export interface NodePatch {
  node: string;
  resourceVersion: string | undefined;
  body: {
    metadata: {
      resourceVersion?: string;
      labels?: Record<string, string | null>;
      annotations?: Record<string, string | null>;
    };
    /** A merge patch replaces a list whole: the node's taints as they were, with or without the fence. */
    spec?: { taints: V1Taint[] | null };
  };
}

/** Whether the node carries the config's Replace taint. */
export function isFenced(node: V1Node, keys: NodeKeys): boolean {
  return (node.spec?.taints ?? []).some((t) => t.key === keys.replace);
}

/** The node's taints with the config's Replace taint put on or taken off. */
function taintsWith(node: V1Node, keys: NodeKeys, fenced: boolean, revision: string): V1Taint[] {
  const others = (node.spec?.taints ?? []).filter((t) => t.key !== keys.replace);
  return fenced ? [...others, { key: keys.replace, value: revision, effect: "NoSchedule" }] : others;
}

/**
 * The patch that gives the node `labels` and (when defined) `record`, or undefined when it has them. A
 * record is only ever replaced, never removed: the last upgrade's stays on the node, stale by its
 * `from`/`to`, until the next upgrade that touches the node writes its own.
 */
export function nodePatch(
  node: V1Node,
  keys: NodeKeys,
  labels: NodeLabels,
  record: NodeRecord | undefined,
  /** The Replace taint wanted on (its value the revision the node moves to) or off; undefined: as is. */
  fence?: { on: boolean; revision: string },
): NodePatch | undefined {
  const have = nodeLabels(node, keys);
  const labelChanges: Record<string, string | null> = {};
  if (have.revision !== labels.revision) labelChanges[keys.revision] = labels.revision ?? null;
  if (have.surge !== labels.surge) labelChanges[keys.surge] = labels.surge ?? null;
  const annotationChanges: Record<string, string | null> = {};
  if (record !== undefined) {
    const text = serializeNodeRecord(record);
    if (node.metadata?.annotations?.[keys.upgrade] !== text) annotationChanges[keys.upgrade] = text;
  }
  const fenceChanges = fence !== undefined && fence.on !== isFenced(node, keys);
  const taints = fenceChanges ? taintsWith(node, keys, fence.on, fence.revision) : undefined;
  return patchOf(node, labelChanges, annotationChanges, taints);
}

/**
 * The merge patch of these changes, carrying the node's resourceVersion, or undefined when there are none.
 * `taints` is the node's whole new taint list (a merge patch replaces a list), or undefined: unchanged.
 */
function patchOf(
  node: V1Node,
  labels: Record<string, string | null>,
  annotations: Record<string, string | null>,
  taints: V1Taint[] | undefined,
): NodePatch | undefined {
  const hasLabels = Object.keys(labels).length > 0;
  const hasAnnotations = Object.keys(annotations).length > 0;
  if (!hasLabels && !hasAnnotations && taints === undefined) return undefined;
  const resourceVersion = node.metadata?.resourceVersion;
  return {
    node: node.metadata?.name ?? "",
    resourceVersion,
    body: {
      metadata: {
        ...(resourceVersion !== undefined ? { resourceVersion } : {}),
        ...(hasLabels ? { labels } : {}),
        ...(hasAnnotations ? { annotations } : {}),
      },
      ...(taints !== undefined ? { spec: { taints } } : {}),
    },
  };
}

/**
 * The patch that takes a config's labels, record and fence off a Node (the config is gone, or no longer
 * targets the node), or undefined when it carries none: every mark of NODE_MARKS (node-marks.ts).
 */
export function stripPatch(node: V1Node, keys: NodeKeys): NodePatch | undefined {
  const labels = node.metadata?.labels ?? {};
  const annotations = node.metadata?.annotations ?? {};
  const labelChanges: Record<string, null> = {};
  for (const key of [keys.revision, keys.surge]) if (key in labels) labelChanges[key] = null;
  const annotationChanges: Record<string, null> = keys.upgrade in annotations ? { [keys.upgrade]: null } : {};
  const taints = isFenced(node, keys) ? taintsWith(node, keys, false, "") : undefined;
  return patchOf(node, labelChanges, annotationChanges, taints);
}
