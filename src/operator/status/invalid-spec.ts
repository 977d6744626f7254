// The status of a config whose stored spec no longer validates: nothing is applied until it is fixed.
import type { DevicePluginConfigStatus, StalledReason } from "../../api/v1beta1/status.js";
import { previousStatusOf } from "./aggregate.js";
import { boundConditionMessage, withTransitionTimes } from "./conditions.js";

/** Why a spec is not applied: it does not validate, or the operator's plugin policy refuses it. */
export type UnappliedSpecReason = Extract<StalledReason, "InvalidSpec" | "RefusedByPolicy">;

/**
 * Ready False and Stalled True with reason InvalidSpec (or RefusedByPolicy) and the errors (bounded),
 * Reconciling False, Degraded Unknown (not evaluated); the rest of the stored status is kept. Pure.
 */
export function invalidSpecStatus(
  stored: { metadata?: { generation?: number | undefined }; status?: unknown },
  message: string,
  now: Date,
  reason: UnappliedSpecReason = "InvalidSpec",
): DevicePluginConfigStatus {
  const generation = stored.metadata?.generation ?? 0;
  const previous = previousStatusOf(stored);
  const bounded = boundConditionMessage(message);
  return {
    ...previous,
    observedGeneration: generation,
    conditions: withTransitionTimes(
      [
        {
          type: "Ready",
          status: "False",
          reason,
          message: bounded,
          observedGeneration: generation,
        },
        {
          type: "Reconciling",
          status: "False",
          reason,
          message: "the spec must be fixed",
          observedGeneration: generation,
        },
        {
          type: "Stalled",
          status: "True",
          reason,
          message: bounded,
          observedGeneration: generation,
        },
        {
          type: "Degraded",
          status: "Unknown",
          reason,
          message: "not evaluated",
          observedGeneration: generation,
        },
      ],
      previous?.conditions,
      now,
    ),
  };
}
