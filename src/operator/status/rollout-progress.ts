// Where the plugin's rollout is, for the Reconciling condition: from the DaemonSet's own counts, or
// from the plugin upgrade's status once there is one. Pure.
import type { V1DaemonSet } from "@kubernetes/client-node";
import type { UpgradeStatus } from "../../api/v1beta1/status.js";
import { ANNOTATION_CONFIG_HASH } from "../model/names.js";

/** What the Reconciling condition says about the rollout. */
export interface Rollout {
  reconciling: boolean;
  reason: string;
  message: string;
}

/** Where the DaemonSet is on its way to running the current config on every node it targets. */
export function rolloutOf(
  daemonSet: V1DaemonSet | undefined,
  name: string,
  configHash: string,
  upgrade?: UpgradeStatus,
): Rollout {
  if (daemonSet === undefined) {
    return {
      reconciling: true,
      reason: "DaemonSetPending",
      message: `waiting for DaemonSet ${name} to exist`,
    };
  }
  // A cache that has not caught up with the last apply still holds the previous template.
  if (daemonSet.spec?.template.metadata?.annotations?.[ANNOTATION_CONFIG_HASH] !== configHash) {
    return {
      reconciling: true,
      reason: "Progressing",
      message: `DaemonSet ${name} does not carry the current plugin config yet`,
    };
  }
  const generation = daemonSet.metadata?.generation;
  const observed = daemonSet.status?.observedGeneration;
  if (daemonSet.status === undefined || (generation !== undefined && (observed ?? 0) < generation)) {
    return {
      reconciling: true,
      reason: "Progressing",
      message: `waiting for the DaemonSet controller to observe generation ${generation ?? "?"} of DaemonSet ${name}`,
    };
  }
  if (upgrade !== undefined) return upgradeRollout(upgrade);
  const desired = daemonSet.status.desiredNumberScheduled ?? 0;
  const updated = daemonSet.status.updatedNumberScheduled ?? 0;
  if (updated < desired) {
    return {
      reconciling: true,
      reason: "RollingOut",
      message: `${updated}/${desired} plugin pods run the current template`,
    };
  }
  return {
    reconciling: false,
    reason: "RolloutComplete",
    message: `${desired}/${desired} plugin pods run the current template`,
  };
}

/** Reconciling from the plugin upgrade: true while nodes move, or while pods of the revision are missing. */
export function upgradeRollout(upgrade: UpgradeStatus): Rollout {
  switch (upgrade.phase) {
    case "Progressing":
    case "Paused":
    case "RollingBack":
      return {
        reconciling: true,
        reason: `Upgrade${upgrade.phase}`,
        message: `${upgrade.summary} nodes run plugin revision ${upgrade.updateRevision}${upgrade.phase === "RollingBack" ? `; rolling back to ${upgrade.currentRevision}` : ""}${upgrade.message ? `: ${upgrade.message}` : ""}`,
      };
    case "Complete":
      return upgrade.updated < upgrade.total
        ? {
            reconciling: true,
            reason: "RollingOut",
            message: `${upgrade.summary} nodes have a plugin pod of revision ${upgrade.updateRevision}`,
          }
        : {
            reconciling: false,
            reason: "RolloutComplete",
            message: `${upgrade.summary} nodes have a plugin pod of revision ${upgrade.updateRevision}`,
          };
    default:
      return {
        reconciling: false,
        reason: `Upgrade${upgrade.phase}`,
        message: upgrade.message ?? upgrade.phase,
      };
  }
}
