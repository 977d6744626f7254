// Reconcile step: delete the config's DeviceNodeStates that nothing else will remove (the decision is
// findStaleReports', in ../stale-reports.ts).
import type { DevicePluginConfig } from "../../../api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../api/v1beta1/devicenodestate.js";
import { DEVICE_NODE_STATES, isConflict, isNotFound } from "../../../kube/index.js";
import { revisionOfDaemonSet } from "../../upgrade/daemonset-state.js";
import {
  CLEANUP_ERROR_RETRY_MS,
  CLEANUP_RETRY_MS,
  soonerRetry,
  INDEX_BY_CONFIG,
  type StepDeps,
} from "../reconciler-deps.js";
import { ownedDaemonSets } from "../owned-objects.js";
import { findStaleReports } from "../stale-reports.js";
import type { Targeting } from "../../model/targeting.js";

/** Stale DeviceNodeStates deleted per reconcile: a drained node pool must not stall the other configs. */
const STALE_REPORT_DELETES_PER_RECONCILE = 20;

/**
 * Deletes (a bounded batch of) the config's DeviceNodeStates whose node left the cluster or is no longer
 * one the plugin runs on: no plugin is left to update or remove them, and they would stay forever. Also
 * those under a name an earlier plugin version used, once the report under the current name exists:
 * the new plugin does not know the old name, so nothing else would remove them.
 * Returns when to come back, if there is more to do.
 */
export async function deleteStaleReports(
  deps: StepDeps,
  config: DevicePluginConfig,
  targeting?: Targeting,
): Promise<number | undefined> {
  const name = config.metadata.name;
  // Revisions are judged only against a synced cache that shows at least one DaemonSet: before the
  // first one exists, every report would look like one of a revision that is gone.
  const daemonSets = deps.daemonSets.hasSynced() ? ownedDaemonSets(deps, name) : [];
  const { stale, remaining, recheckInMs } = findStaleReports({
    configName: name,
    spec: config.spec,
    targeting,
    reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
    node: (nodeName) => deps.nodes.get(nodeName),
    nodesSynced: deps.nodes.hasSynced(),
    limit: STALE_REPORT_DELETES_PER_RECONCILE,
    revisions: daemonSets.length > 0 ? new Set(daemonSets.map(revisionOfDaemonSet)) : undefined,
    now: deps.now().getTime(),
  });
  let retryMs = soonerRetry(remaining > 0 ? CLEANUP_RETRY_MS : undefined, recheckInMs);
  for (const { report, reason, replacedBy } of stale) {
    const deleted = await deleteReport(
      deps,
      name,
      report,
      { reason, ...(replacedBy !== undefined ? { replacedBy } : {}) },
      reason === "Superseded"
        ? "deleted DeviceNodeState superseded by the report under its current name"
        : reason === "Misnamed"
          ? "deleted DeviceNodeState whose name is not the one its plugin gives it"
          : "deleted stale DeviceNodeState",
      "could not delete stale DeviceNodeState; retrying later",
    );
    if (!deleted) retryMs = CLEANUP_ERROR_RETRY_MS;
  }
  return retryMs;
}

/**
 * Deletes (a bounded batch of) the DeviceNodeStates that name a config the cache does not hold. Reports
 * of a deleted config go with it by garbage collection; these carry no owner reference, so no plugin of
 * the operator wrote them (a plugin's config exists before its pods do): left alone, one could hold the
 * name of another node's report, and each would bring its config name back to the queue forever.
 * Returns when to come back, if there is more to do.
 */
export async function deleteReportsOfGoneConfig(deps: StepDeps, name: string): Promise<number | undefined> {
  const reports = deps.reports
    .byIndex(INDEX_BY_CONFIG, name)
    .filter((r) => r.spec?.configName === name && !r.metadata.deletionTimestamp);
  let retryMs = reports.length > STALE_REPORT_DELETES_PER_RECONCILE ? CLEANUP_RETRY_MS : undefined;
  for (const report of reports.slice(0, STALE_REPORT_DELETES_PER_RECONCILE)) {
    const deleted = await deleteReport(
      deps,
      name,
      report,
      { reason: "ConfigGone" },
      "deleted DeviceNodeState of a config that does not exist",
      "could not delete DeviceNodeState of a config that does not exist; retrying later",
    );
    if (!deleted) retryMs = CLEANUP_ERROR_RETRY_MS;
  }
  return retryMs;
}

/**
 * Deletes one report, on the condition that it is still the object judged (its uid), and logs why. False
 * when the delete failed and should be tried again; a report already gone (404) or replaced by a new one
 * (409: the uid precondition failed, and the next reconcile judges the new one afresh) is done with.
 */
async function deleteReport(
  deps: StepDeps,
  config: string,
  report: DeviceNodeState,
  why: Record<string, string>,
  deletedMessage: string,
  failedMessage: string,
): Promise<boolean> {
  const reportName = report.metadata.name;
  const uid = typeof report.metadata["uid"] === "string" ? report.metadata["uid"] : undefined;
  try {
    await deps.objects.delete(
      DEVICE_NODE_STATES,
      { name: reportName, namespace: deps.render.namespace },
      { uid },
    );
    deps.logger.info({ config, node: report.spec.nodeName, report: reportName, ...why }, deletedMessage);
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return true;
    deps.logger.warn(
      { config, node: report.spec.nodeName, report: reportName, err: String(err) },
      failedMessage,
    );
    return false;
  }
}
