// The upgrade's part of the config status, from the planner's plan: phase, revisions, counts, the nodes
// in flight or failed (bounded), and the node problems. Pure.
import type { V1DaemonSet, V1Pod } from "@kubernetes/client-node";
import {
  MAX_UPGRADE_NODES,
  type NodeProblem,
  type UpgradePhase,
  type UpgradeStatus,
} from "../../api/v1beta1/status.js";
import { ownedBy, podIsPresent } from "./observe.js";
import type { Plan } from "./planner.js";

/** How a DaemonSet of a version without revisions shows in the status. */
export const LEGACY_REVISION = "legacy";

export function displayRevision(revision: string): string {
  return revision === "" ? LEGACY_REVISION : revision;
}

function bounded(list: readonly string[]): { list?: string[]; omitted?: number } {
  if (list.length === 0) return {};
  const shown = list.slice(0, MAX_UPGRADE_NODES);
  return { list: shown, ...(list.length > shown.length ? { omitted: list.length - shown.length } : {}) };
}

export function tooOldNodes(plan: Plan): string[] {
  return plan.problems.filter((p) => p.reason === "KubeletTooOld").map((p) => p.node);
}

export function problemsOf(plan: Plan): NodeProblem[] {
  return [
    ...plan.problems
      .filter((p) => p.reason === "KubeletTooOld")
      .map((p) => ({ node: p.node, reason: "KubeletTooOld" as const, message: p.message })),
    ...plan.failed.map((node) => ({
      node,
      reason: "UpgradeFailed" as const,
      message: "the kubelet did not advertise the new plugin within the progress deadline",
    })),
    ...(plan.held ?? []).map(({ node, reason }) => ({
      node,
      reason: "TakeoverWaitsForPods" as const,
      message: reason,
    })),
  ];
}

export function upgradeStatus(plan: Plan, from: string, to: string): UpgradeStatus {
  const inFlight = bounded(plan.inFlight);
  const failed = bounded(plan.failed);
  return {
    phase: plan.phase,
    currentRevision: displayRevision(from),
    updateRevision: to,
    updated: plan.updated,
    total: plan.total,
    summary: `${plan.updated}/${plan.total}`,
    ...(inFlight.list ? { inFlight: inFlight.list } : {}),
    ...(inFlight.omitted ? { inFlightOmitted: inFlight.omitted } : {}),
    ...(failed.list ? { failed: failed.list } : {}),
    ...(failed.omitted ? { failedOmitted: failed.omitted } : {}),
  };
}

/**
 * No upgrade under way: updated counts the targeted nodes with a pod of the current revision (as a
 * DaemonSet's updatedNumberScheduled does; whether it serves is the Ready condition's business).
 */
export function steadyStatus(
  revision: string,
  plan: Plan,
  pods: readonly V1Pod[],
  ds: V1DaemonSet | undefined,
): UpgradeStatus {
  const targeted = new Set(Object.keys(plan.modes));
  const withPod = new Set(
    pods
      .filter((p) => ds !== undefined && ownedBy(p, ds) && podIsPresent(p) && !p.metadata?.deletionTimestamp)
      .map((p) => p.spec?.nodeName ?? ""),
  );
  let updated = 0;
  for (const node of targeted) if (withPod.has(node)) updated++;
  const phase: UpgradePhase = "Complete";
  return {
    phase,
    currentRevision: revision,
    updateRevision: revision,
    updated,
    total: targeted.size,
    summary: `${updated}/${targeted.size}`,
  };
}
