// The Degraded condition's reason and message, from the problems of the config's nodes. Pure.
import type { ProblemReason } from "../../api/v1beta1/status.js";
import { PROBLEM_PRIORITY } from "./node-health.js";

/**
 * Every problem reason, the more fundamental first: a kubelet too old for the plugin and a node whose
 * upgrade failed, a node a takeover waits on (the rollout's problems), then a node's own (PROBLEM_PRIORITY),
 * then pods its kubelet rejected at admission (admission-rejections.ts), reported only where the node has
 * no other problem.
 */
export const DEGRADED_REASON_ORDER: readonly ProblemReason[] = [
  "KubeletTooOld",
  "UpgradeFailed",
  "TakeoverWaitsForPods",
  ...PROBLEM_PRIORITY,
  "AdmissionRejected",
];

/** The reason most problem nodes share; ties go to the more fundamental reason. */
export function dominantReason(counts: ReadonlyMap<ProblemReason, number>): ProblemReason | undefined {
  let best: ProblemReason | undefined;
  for (const reason of DEGRADED_REASON_ORDER) {
    const count = counts.get(reason) ?? 0;
    if (count > 0 && (best === undefined || count > (counts.get(best) ?? 0))) best = reason;
  }
  return best;
}

export function problemCountsMessage(
  counts: ReadonlyMap<ProblemReason, number>,
  total: number,
  matched: number,
): string {
  const parts = DEGRADED_REASON_ORDER.filter((r) => (counts.get(r) ?? 0) > 0)
    .sort((a, b) => (counts.get(b) ?? 0) - (counts.get(a) ?? 0))
    .map((r) => `${r} ${counts.get(r)}`);
  return `${total} of ${matched} nodes have problems: ${parts.join(", ")}`;
}
