// What a config's status says as metric values (the dpo_config_* series of OperatorMetrics). Pure.
import {
  STALLED_REASONS,
  type DevicePluginConfigStatus,
  type ProblemReason,
  type StalledReason,
  type UpgradePhase,
} from "../../api/v1beta1/status.js";

export interface ConfigSeries {
  ready: boolean;
  /**
   * The reason of the Stalled condition while it is True; undefined while it is not (or its reason is
   * none of STALLED_REASONS, which a status this operator wrote never has).
   */
  stalledReason: StalledReason | undefined;
  nodesDesired: number;
  nodesReady: number;
  nodesAvailable: number;
  nodesUpdated: number;
  devicesAdvertised: number;
  devicesAllocatable: number;
  devicesUnhealthy: number;
  /** Problem nodes by reason; a reason not here has none. */
  problemNodes: Partial<Record<ProblemReason, number>>;
  /** Pods the kubelets rejected at admission for the config's resource (admission-rejections.ts). */
  admissionRejectedPods?: number;
  /** The rollout's phase; undefined before the config's first rollout (or while it yields its resource). */
  rolloutPhase: UpgradePhase | undefined;
}

/**
 * The series of a config with `status`. `problemCounts` are the problem nodes by reason before the list
 * in the status is cut to MAX_PROBLEMS (aggregateStatus returns them); without them the listed problems
 * are counted.
 */
export function configSeries(
  status: DevicePluginConfigStatus,
  problemCounts?: ReadonlyMap<ProblemReason, number>,
  admissionRejectedPods = 0,
): ConfigSeries {
  const problemNodes: Partial<Record<ProblemReason, number>> = {};
  if (problemCounts) {
    for (const [reason, count] of problemCounts) problemNodes[reason] = count;
  } else {
    for (const p of status.problems ?? []) problemNodes[p.reason] = (problemNodes[p.reason] ?? 0) + 1;
  }
  const stalled = status.conditions?.find((c) => c.type === "Stalled" && c.status === "True");
  return {
    ready: status.conditions?.find((c) => c.type === "Ready")?.status === "True",
    stalledReason: STALLED_REASONS.find((reason) => reason === stalled?.reason),
    nodesDesired: status.nodes?.desired ?? 0,
    nodesReady: status.nodes?.ready ?? 0,
    // A status written before `available` existed: its ready count is the best there is.
    nodesAvailable: status.nodes?.available ?? status.nodes?.ready ?? 0,
    nodesUpdated: status.nodes?.updated ?? 0,
    devicesAdvertised: status.devices?.capacity ?? 0,
    devicesAllocatable: status.devices?.allocatable ?? 0,
    devicesUnhealthy: status.devices?.unhealthy ?? 0,
    problemNodes,
    ...(admissionRejectedPods > 0 ? { admissionRejectedPods } : {}),
    rolloutPhase: status.upgrade?.phase,
  };
}
