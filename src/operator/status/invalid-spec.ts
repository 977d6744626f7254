// The status of a config whose stored spec no longer validates: nothing is applied until it is fixed.
import type { DevicePluginConfigStatus } from "../../api/v1beta1/status.js";
import { previousStatusOf } from "./aggregate.js";
import { boundConditionMessage, withTransitionTimes } from "./conditions.js";

/**
 * Ready False and Stalled True with reason InvalidSpec and the validation errors (bounded), Reconciling
 * False, Degraded Unknown (not evaluated); the rest of the stored status is kept. Pure.
 */
export function invalidSpecStatus(
  stored: { metadata?: { generation?: number | undefined }; status?: unknown },
  message: string,
  now: Date,
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
          reason: "InvalidSpec",
          message: bounded,
          observedGeneration: generation,
        },
        {
          type: "Reconciling",
          status: "False",
          reason: "InvalidSpec",
          message: "the spec must be fixed",
          observedGeneration: generation,
        },
        {
          type: "Stalled",
          status: "True",
          reason: "InvalidSpec",
          message: bounded,
          observedGeneration: generation,
        },
        {
          type: "Degraded",
          status: "Unknown",
          reason: "InvalidSpec",
          message: "not evaluated",
          observedGeneration: generation,
        },
      ],
      previous?.conditions,
      now,
    ),
  };
}
