// Condition bookkeeping: RFC 3339 times, carrying lastTransitionTime over, and order-aware status equality.
import type { Condition, DevicePluginConfigStatus } from "../../api/v1beta1/status.js";

/** The longest condition message the operator writes; longer ones end in an ellipsis. */
export const MAX_CONDITION_MESSAGE = 1024;

export function boundConditionMessage(message: string): string {
  return message.length <= MAX_CONDITION_MESSAGE
    ? message
    : `${message.slice(0, MAX_CONDITION_MESSAGE - 1)}…`;
}

/** A condition before its transition time is known. */
export type ConditionDraft = Omit<Condition, "lastTransitionTime">;

/** RFC 3339 with second precision, the way the API server writes metav1.Time. */
export function formatTime(time: Date): string {
  return time.toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * Keeps the previous lastTransitionTime of a condition whose status did not change, so an unchanged
 * world gives an identical status (and no write); a changed status transitions at `now`.
 */
export function withTransitionTimes(
  drafts: readonly ConditionDraft[],
  previous: readonly Condition[] | undefined,
  now: Date,
): Condition[] {
  return drafts.map((draft) => {
    const before = previous?.find((c) => c.type === draft.type);
    const lastTransitionTime =
      before !== undefined && before.status === draft.status ? before.lastTransitionTime : formatTime(now);
    return {
      type: draft.type,
      status: draft.status,
      reason: draft.reason,
      message: draft.message,
      lastTransitionTime,
      ...(draft.observedGeneration !== undefined ? { observedGeneration: draft.observedGeneration } : {}),
    };
  });
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => deepEqual(item, b[i]));
  }
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  // A key holding undefined is the same as an absent key: neither survives a trip through JSON.
  const keys = (o: object): string[] =>
    Object.entries(o)
      .filter(([, v]) => v !== undefined)
      .map(([k]) => k)
      .sort();
  const ak = keys(a);
  const bk = keys(b);
  if (ak.length !== bk.length || ak.some((k, i) => k !== bk[i])) return false;
  return ak.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/**
 * Whether writing `next` over `current` would change anything. Key order does not matter, array
 * order does (conditions and problems come out in a fixed order), undefined equals absent.
 */
export function statusEqual(
  current: DevicePluginConfigStatus | undefined,
  next: DevicePluginConfigStatus | undefined,
): boolean {
  return deepEqual(current ?? {}, next ?? {});
}
