// Which DeviceNodeStates of a config are stale (their node left the cluster, the config no longer targets
// it, or a report under the current name replaced it), so the reconciler can delete them: a pure
// decision, the deletes happen in the reconciler.
import type { V1Node } from "@kubernetes/client-node";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import { boundedName } from "../../contract/names.js";
import { hasCurrentName } from "../../contract/node-state.js";
import {
  nodeSelectedBy,
  toleratesTaint,
  DAEMON_POD_DEFAULT_TOLERATIONS,
  type SelectionSpec,
  type Targeting,
} from "../model/targeting.js";

/**
 * NodeGone: the node left the cluster. NodeNotTargeted: the plugin can no longer run there. Superseded:
 * the report has a name other than the current one for its (config, node) pair, and the current one
 * exists — a plugin of an earlier version named it (plain `<config>-<node>`, which two pairs can share).
 * Misnamed: the name is neither of those for its spec, so no plugin wrote it for itself: it squats on
 * the name of another (config, node, revision), whose plugin's writes it would refuse for good.
 */
export type StaleReason = "NodeGone" | "NodeNotTargeted" | "Superseded" | "RevisionGone" | "Misnamed";

/**
 * A report of a revision no DaemonSet runs is kept this long after its creation: the pod that writes a
 * new revision's first report can be in the API before the operator's caches show its DaemonSet.
 */
export const REVISION_GONE_GRACE_MS = 60_000;
/**
 * A report whose node the synced cache does not show is NodeGone only once it is older than this: the
 * report and node informers are separate watches, so a report written just after its node joined can reach
 * the cache before the node does (seen in the e2e tests, which create both within milliseconds).
 */
export const NODE_GONE_GRACE_MS = 10_000;

export interface StaleReport {
  report: DeviceNodeState;
  reason: StaleReason;
  /** For Superseded: the name of the report that replaces it. */
  replacedBy?: string;
}

export interface StaleReportsInput {
  configName: string;
  spec: SelectionSpec;
  /** The config's terms among the configs of its resource name; absent: its own nodeSelectorTerm. */
  targeting?: Targeting | undefined;
  /** The config's reports from the cache (others are ignored by spec.configName). */
  reports: readonly DeviceNodeState[];
  /** Looks a node up in the cache. */
  node: (name: string) => V1Node | undefined;
  /**
   * Whether the node cache holds a complete list. Before that, a missing node proves nothing, and only
   * superseded reports (which need no node to judge) are stale.
   */
  nodesSynced: boolean;
  /** At most this many results; the rest wait for the next reconcile. */
  limit: number;
  /**
   * The plugin revisions the config's DaemonSets run ("" for a DaemonSet of a version before
   * revisions), when the DaemonSet cache is synced. A report of another revision is RevisionGone once
   * it is older than REVISION_GONE_GRACE_MS: after an upgrade, the old revision's reports.
   */
  revisions?: ReadonlySet<string> | undefined;
  /** ms epoch, for the grace period. */
  now?: number;
}

export interface StaleReportsResult {
  stale: StaleReport[];
  /** Stale reports beyond `limit`, left for a later reconcile. */
  remaining: number;
  /** When to look again at a report whose node is missing but that is too young to be NodeGone. */
  recheckInMs?: number;
}

/**
 * True while the config's plugin pod may still run on the node: the nodeSelector and terms match and no
 * NoExecute taint evicts it. Deliberately more lenient than the status's "targeted" (which also counts
 * NoSchedule taints): the DaemonSet controller keeps a running daemon pod on a node that gains a
 * NoSchedule taint, and that pod still writes its report, so deleting it would only fight the plugin.
 */
export function pluginMayRunOnNode(node: V1Node, spec: SelectionSpec, targeting?: Targeting): boolean {
  if (!nodeSelectedBy(node, spec, targeting)) return false;
  for (const taint of node.spec?.taints ?? []) {
    if (taint.effect !== "NoExecute") continue;
    const tolerated =
      spec.tolerations.some((t) => toleratesTaint(t, taint)) ||
      DAEMON_POD_DEFAULT_TOLERATIONS.some((t) => toleratesTaint(t, taint));
    if (!tolerated) return false;
  }
  return true;
}

/**
 * The config's reports whose node is gone from a synced cache, whose node the config's plugin can no
 * longer run on, or that a report under the current name superseded, in name order (so a bounded batch
 * makes progress deterministically). A report being deleted already is not returned again.
 *
 * A report under an old name is only superseded once the current one exists: until the DaemonSet's
 * rolling update reaches its node, a plugin of the earlier version still writes the old name, and
 * deleting it then would only make that plugin re-create it while the status lost the node's report.
 */
export function findStaleReports(input: StaleReportsInput): StaleReportsResult {
  const stale: StaleReport[] = [];
  const candidates = input.reports
    .filter((r) => r.spec.configName === input.configName && !r.metadata.deletionTimestamp)
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  // Per (config, node), a report under the name its own writer gives it: one a current plugin wrote.
  // One with a revision wins, since only current plugins write revisions.
  const currentByNode = new Map<string, DeviceNodeState>();
  for (const report of candidates) {
    if (!hasCurrentName(report)) continue;
    const key = `${report.spec.configName}/${report.spec.nodeName}`;
    const seen = currentByNode.get(key);
    if (seen === undefined || (seen.spec.revision === undefined && report.spec.revision !== undefined)) {
      currentByNode.set(key, report);
    }
  }
  const now = input.now ?? Date.now();
  let recheckInMs: number | undefined;
  for (const report of candidates) {
    const node = input.nodesSynced ? input.node(report.spec.nodeName) : undefined;
    const replacement = hasCurrentName(report)
      ? undefined
      : currentByNode.get(`${report.spec.configName}/${report.spec.nodeName}`);
    // Judged without the node: a squat must go even while the node cache has yet to sync. One beside
    // its node's current report is Superseded below, as any other name is.
    if (replacement === undefined && isMisnamed(report)) {
      stale.push({ report, reason: "Misnamed" });
    } else if (input.nodesSynced && node === undefined) {
      const age = now - creationMillis(report);
      if (age > NODE_GONE_GRACE_MS) stale.push({ report, reason: "NodeGone" });
      else recheckInMs = Math.min(recheckInMs ?? Infinity, NODE_GONE_GRACE_MS - age + 1);
    } else if (node !== undefined && !pluginMayRunOnNode(node, input.spec, input.targeting)) {
      stale.push({ report, reason: "NodeNotTargeted" });
    } else if (replacement !== undefined) {
      stale.push({ report, reason: "Superseded", replacedBy: replacement.metadata.name });
    } else if (
      input.revisions !== undefined &&
      !input.revisions.has(report.spec.revision ?? "") &&
      now - creationMillis(report) > REVISION_GONE_GRACE_MS
    ) {
      stale.push({ report, reason: "RevisionGone" });
    }
  }
  const limit = Math.max(0, input.limit);
  return {
    stale: stale.slice(0, limit),
    remaining: Math.max(0, stale.length - limit),
    ...(recheckInMs !== undefined ? { recheckInMs } : {}),
  };
}

/**
 * Whether a report's name is neither the one the current plugin gives its spec's (config, node,
 * revision) nor the plain `<config>-<node>` of earlier versions (which Superseded judges).
 */
export function isMisnamed(report: DeviceNodeState): boolean {
  if (hasCurrentName(report)) return false;
  return report.metadata.name !== boundedName(report.spec.configName, report.spec.nodeName);
}

/** A report's creation time in ms epoch; 0 when it has none (so it counts as old). */
function creationMillis(report: DeviceNodeState): number {
  const created: unknown = report.metadata["creationTimestamp"];
  if (created instanceof Date) return created.getTime();
  return typeof created === "string" ? Date.parse(created) || 0 : 0;
}
