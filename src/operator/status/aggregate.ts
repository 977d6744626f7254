// Aggregates the kubelet's and the plugins' truths for one DevicePluginConfig into its status and the
// Events its transitions deserve.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import {
  DevicePluginConfigStatusSchema,
  MAX_PROBLEMS,
  type Condition,
  type DevicePluginConfigStatus,
  type NodeProblem,
  type ProblemReason,
  type StalledReason,
  type UpgradeStatus,
  type TakeoverStatus,
} from "../../api/v1beta1/status.js";
import { LABEL_CONFIG, configLabelValue } from "../../contract/names.js";
import { pluginObjectName } from "../model/names.js";
import type { UpgradeMode } from "../model/rollout.js";
import { boundConditionMessage, withTransitionTimes, type ConditionDraft } from "./conditions.js";
import { dominantReason, problemCountsMessage } from "./degraded.js";
import { admissionRejectedProblem } from "./admission-rejections.js";
import { draSharingCondition } from "./dra-sharing.js";
import { extendedResourceMapping, extendedResourceNameChoice } from "./extended-resource.js";
import {
  DRA_PUBLISHING,
  draPublishingCondition,
  FEATURE_REASONS,
  surgeUpgradesCondition,
  type FeatureCondition,
} from "./features.js";
import { evaluateNode, kubeletTruth, type DeviceTruth, type NodeHealth } from "./node-health.js";
import { rolloutOf, upgradeRollout, type Rollout } from "./rollout-progress.js";
import type { Resolution } from "./conflicts.js";
import { pluginRunsOnNode } from "../model/targeting.js";
import { servingStatus } from "./serving.js";
import { transitionEvents, type StatusEvent } from "./transition-events.js";

export interface AggregateStatusInput {
  /** The config as parsed (defaults applied); its metadata.generation becomes observedGeneration. */
  config: DevicePluginConfig;
  /** Nodes from the cache: all of them or any superset of those the config targets. */
  nodes: readonly V1Node[];
  /** The config's plugin pods (others are ignored by their `dpo.dev/config` label). */
  pods: readonly V1Pod[];
  /** DeviceNodeStates (others are ignored by spec.configName). */
  reports: readonly DeviceNodeState[];
  /** The config's DaemonSet from the cache; undefined when it does not exist (yet). */
  daemonSet: V1DaemonSet | undefined;
  /** Its name, when not the one of versions before revisions. */
  daemonSetName?: string | undefined;
  /**
   * The hash of the plugin config the pods of the current spec carry (DesiredRevision.configHash, as the
   * reconcile step rendered it): a pod with another runs an older spec.
   */
  configHash: string;
  /**
   * Where the plugin upgrade is (src/operator/upgrade). Once Complete, Reconciling follows `updated`
   * (nodes with a pod of the current revision) rather than the DaemonSet's own counts, which an
   * `OnDelete` DaemonSet whose node list changed never brings up to date.
   */
  upgrade?: UpgradeStatus | undefined;
  /**
   * Pods the kubelet rejected at admission for the config's resource (UnexpectedAdmissionError), as
   * `namespace/name` by node (admission-rejections.ts): a targeted node with no other problem gets
   * AdmissionRejected naming them.
   */
  admissionRejections?: ReadonlyMap<string, readonly string[]> | undefined;
  /** The upgrade's node problems (KubeletTooOld nodes are not targeted; UpgradeFailed wins on its node). */
  upgradeProblems?: readonly NodeProblem[] | undefined;
  /** The config this one yields to for its resourceName (see resolveResourceNames). */
  conflictWith?: string | undefined;
  /**
   * How it shares its resource name (see resolveResourceNames): the terms that say which nodes it serves,
   * the configs it steps back for and those that step back for it. Absent: it shares nothing.
   */
  resolution?:
    | Pick<Resolution, "targeting" | "stepsBackFor" | "overrides" | "conflictMessage" | "conflictReason">
    | undefined;
  /** Why applying the ConfigMap/DaemonSet failed, when it failed for good (not a retry in progress). */
  applyError?: string | undefined;
  /** spec.takeover's progress (steps/takeover.ts); Failed stalls the config. */
  takeover?: TakeoverStatus | undefined;
  /**
   * Where node device counts come from: the kubelet's Node capacity (default, DevicePlugin mode) or the
   * ResourceSlices the plugins publish (DRA mode).
   */
  deviceTruth?: DeviceTruth | undefined;
  /**
   * Set when the config's DeviceClass (DRA mode) cannot be had: a class of that name exists that this
   * config does not own. The message names it; the config is Stalled with reason DeviceClassConflict.
   */
  deviceClassConflict?: string | undefined;
  /**
   * The upgrade mode of each node the rollout targets, as its planner decided it (RolloutDecision.modes):
   * for the SurgeUpgrades condition, set under strategies Auto and Surge. Absent: no such condition.
   */
  upgradeModes?: Readonly<Record<string, UpgradeMode>> | undefined;
  /**
   * Whether the API server serves resource.k8s.io/v1, for the DRAPublishing condition of a config that
   * publishes through DRA; a DRA config without it cannot publish anywhere and is Stalled
   * (ResourceAPIUnavailable). Absent: no DRAPublishing condition.
   */
  resourceApiServed?: boolean | undefined;
  /**
   * What the operator knows of the API server for the ExtendedResourceMapping condition (both publish
   * modes; see extended-resource.ts): whether it serves resource.k8s.io/v1, and whether it keeps
   * DeviceClass spec.extendedResourceName (undefined: not probed yet). Absent: no such condition.
   */
  extendedResource?: { resourceApiServed: boolean; fieldKept: boolean | undefined } | undefined;
  /**
   * Whether the API server kept allowMultipleAllocations on the config's slices (sharedAllocationsKept),
   * for the DRASharing condition of a time-sliced DRA config; undefined: no evidence yet.
   */
  sharedAllocationsKept?: boolean | undefined;
  /** The status as last written, for transition times and events. */
  previous: DevicePluginConfigStatus | undefined;
  now: Date;
}

export interface AggregateStatusResult {
  status: DevicePluginConfigStatus;
  events: StatusEvent[];
  /** Problem nodes by reason, all of them (status.problems lists at most MAX_PROBLEMS), for metrics. */
  problemCounts: ReadonlyMap<ProblemReason, number>;
  /** Pods rejected at admission on the targeted nodes (dpo_admission_rejected_pods). */
  admissionRejectedPods: number;
}

/** How many not-ready nodes the Ready message names. */
const NOT_READY_NAMED = 5;

/** The status stored on a config, or undefined when there is none or it is not ours to read. */
export function previousStatusOf(config: { status?: unknown }): DevicePluginConfigStatus | undefined {
  const parsed = DevicePluginConfigStatusSchema.safeParse(config.status);
  return parsed.success ? parsed.data : undefined;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    if (k === undefined || k === "") continue;
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The status of a config and the Events its transitions call for. Pure: the same input gives the
 * same output, whatever happened before, so a reconciler can call it on every event.
 *
 * - nodes.desired: the nodes the plugin should run on (nodeSelector and tolerated taints, the
 *   DaemonSet controller's own rule), counted here rather than read from the DaemonSet so that it is
 *   right before that controller acts and agrees with the problem list. ready: nodes whose plugin pod
 *   is ready, registered, and whose kubelet advertises what the plugin reports (unhealthy devices do
 *   not make a node unready). updated: nodes whose plugin pod carries the current config hash.
 * - devices: capacity and allocatable summed from the kubelet (in DRA mode, from the ResourceSlices:
 *   see DeviceTruth); unhealthy and allocated (devices the
 *   kubelets have given to containers, from their PodResources API) summed from the reports.
 * - problems: one per node (see PROBLEM_PRIORITY), sorted by node name, at most MAX_PROBLEMS.
 * - A config that yields to another for its resourceName is not evaluated: it has no plugin, and the
 *   kubelet's counts for the resource belong to the other one.
 */
export function aggregateStatus(input: AggregateStatusInput): AggregateStatusResult {
  const { config, previous, now } = input;
  const configName = config.metadata.name;
  const generation = config.metadata.generation;
  const resourceName = config.spec.resourceName;
  const daemonSetName = input.daemonSetName ?? pluginObjectName(configName);
  const { configHash } = input;
  const upgradeProblems = input.upgradeProblems ?? [];
  const tooOld = new Set(upgradeProblems.filter((p) => p.reason === "KubeletTooOld").map((p) => p.node));
  const upgradeProblemByNode = new Map(upgradeProblems.map((p) => [p.node, p]));

  const targeted = input.nodes
    .filter(
      (node) =>
        pluginRunsOnNode(node, config.spec, input.resolution?.targeting) &&
        !tooOld.has(node.metadata?.name ?? ""),
    )
    .sort((a, b) => byName(a.metadata?.name ?? "", b.metadata?.name ?? ""));
  const desired = targeted.length;

  const upgrade = input.upgrade;
  const upgradeStalled: { reason: StalledReason; message: string } | undefined =
    upgrade !== undefined && (upgrade.phase === "Failed" || upgrade.phase === "RolledBack")
      ? {
          reason: upgrade.phase === "Failed" ? "UpgradeFailed" : "UpgradeRolledBack",
          message: boundConditionMessage(
            upgrade.message ?? `the upgrade to revision ${upgrade.updateRevision} failed`,
          ),
        }
      : undefined;
  const evaluate = input.conflictWith === undefined;
  const features = evaluate ? featureConditions(input, targeted, tooOld) : [];
  // A DRA config on an API server without resource.k8s.io/v1 publishes nothing on any node, and waiting
  // does not change that: someone has to turn the API on or the config to DevicePlugin.
  // Only DRAPublishing's: ExtendedResourceMapping shares the reason and is informational (never Stalled).
  const resourceApiUnavailable = features.find(
    (c) => c.type === DRA_PUBLISHING && c.reason === FEATURE_REASONS.resourceApiUnavailable,
  );
  const stalled: { reason: StalledReason; message: string } | undefined =
    input.conflictWith !== undefined
      ? {
          reason: input.resolution?.conflictReason ? "CDIKindConflict" : "ResourceNameConflict",
          message: boundConditionMessage(
            input.resolution?.conflictMessage !== undefined
              ? `${input.resolution.conflictMessage}; this config gets no DaemonSet until then`
              : `DevicePluginConfig ${input.conflictWith} already serves ${resourceName} on overlapping nodes; this config gets no DaemonSet while it does`,
          ),
        }
      : input.takeover?.phase === "Failed"
        ? {
            reason: "TakeoverFailed" as const,
            message: boundConditionMessage(input.takeover.message ?? "the takeover cannot go on"),
          }
        : input.applyError !== undefined
          ? {
              reason: "ApplyFailed",
              message: boundConditionMessage(`applying the plugin objects failed: ${input.applyError}`),
            }
          : resourceApiUnavailable !== undefined
            ? { reason: FEATURE_REASONS.resourceApiUnavailable, message: resourceApiUnavailable.message }
            : input.deviceClassConflict !== undefined
              ? { reason: "DeviceClassConflict", message: boundConditionMessage(input.deviceClassConflict) }
              : upgradeStalled;

  const truth = input.deviceTruth ?? kubeletTruth(resourceName);
  let health: NodeHealth[] = [];
  if (evaluate) {
    const label = configLabelValue(configName);
    const podsByNode = groupBy(
      input.pods.filter((p) => p.metadata?.labels?.[LABEL_CONFIG] === label),
      (p) => p.spec?.nodeName,
    );
    const reportsByNode = groupBy(
      input.reports.filter((r) => r.spec.configName === configName),
      (r) => r.spec.nodeName,
    );
    health = targeted.map((node) => {
      const name = node.metadata?.name ?? "";
      return evaluateNode(
        { node, pods: podsByNode.get(name) ?? [], reports: reportsByNode.get(name) ?? [] },
        resourceName,
        configHash,
        truth,
      );
    });
  }

  const ready = health.filter((h) => h.ready).length;
  const available = health.filter((h) => h.available).length;
  const updated = input.upgrade?.updated ?? health.filter((h) => h.updated).length;
  const capacity = health.reduce((sum, h) => sum + (h.capacity ?? 0), 0);
  const allocatable = health.reduce((sum, h) => sum + (h.allocatable ?? 0), 0);
  const unhealthy = health.reduce((sum, h) => sum + h.unhealthy, 0);
  const allocated = health.reduce((sum, h) => sum + h.allocated, 0);
  const problems = evaluate
    ? [
        ...health.flatMap((h) => {
          const override = upgradeProblemByNode.get(h.node);
          const rejected = input.admissionRejections?.get(h.node);
          return override
            ? [override]
            : h.problem
              ? [h.problem]
              : rejected && rejected.length > 0
                ? [admissionRejectedProblem(h.node, rejected)]
                : [];
        }),
        ...upgradeProblems.filter((p) => p.reason === "KubeletTooOld"),
      ].sort((a, b) => byName(a.node, b.node))
    : [];
  const counts = new Map<ProblemReason, number>();
  for (const p of problems) counts.set(p.reason, (counts.get(p.reason) ?? 0) + 1);

  const rollout: Rollout = stalled
    ? { reconciling: false, reason: stalled.reason, message: "not progressing: see the Stalled condition" }
    : upgrade !== undefined && upgrade.phase !== "Complete"
      ? upgradeRollout(upgrade)
      : rolloutOf(input.daemonSet, daemonSetName, configHash, upgrade);

  const serving =
    evaluate && input.resolution !== undefined
      ? servingStatus({ spec: config.spec, nodes: input.nodes, resolution: input.resolution })
      : undefined;
  let readyCondition: Pick<Condition, "status" | "reason" | "message">;
  if (stalled) {
    readyCondition = { status: "False", reason: stalled.reason, message: stalled.message };
  } else if (rollout.reconciling) {
    // Not Ready until the spec is rolled out everywhere (kstatus InProgress, Argo CD Progressing), but the
    // message says how many nodes keep serving meanwhile.
    readyCondition = {
      status: "False",
      reason: rollout.reason,
      message: boundConditionMessage(`${rollout.message}; ${available}/${desired} nodes serve devices`),
    };
  } else if (ready < desired) {
    const notReady = health.filter((h) => !h.ready);
    const named = notReady
      .slice(0, NOT_READY_NAMED)
      .map((h) => `${h.node} (${h.problem?.reason ?? "NotReady"})`)
      .join(", ");
    const more = notReady.length > NOT_READY_NAMED ? `, and ${notReady.length - NOT_READY_NAMED} more` : "";
    readyCondition = {
      status: "False",
      reason: "NodesNotReady",
      message: `${ready}/${desired} nodes ready; not ready: ${named}${more}`,
    };
  } else if (desired === 0) {
    readyCondition = {
      status: "True",
      reason: "NoMatchingNodes",
      message:
        serving !== undefined && serving.yielded > 0
          ? `configs of higher priority serve all ${serving.yielded} nodes this config selects`
          : "no nodes match spec.nodeSelector",
    };
  } else {
    readyCondition = { status: "True", reason: "AllNodesReady", message: `${ready}/${desired} nodes ready` };
  }

  const degradedReason = dominantReason(counts);
  const degradedCondition: Pick<Condition, "status" | "reason" | "message"> = !evaluate
    ? {
        status: "Unknown",
        reason: "ResourceNameConflict",
        message: "node health is not evaluated while the config yields to another",
      }
    : degradedReason !== undefined
      ? {
          status: "True",
          reason: degradedReason,
          message: problemCountsMessage(counts, problems.length, desired + tooOld.size),
        }
      : { status: "False", reason: "NoProblems", message: `no problems on ${desired} nodes` };

  const withGeneration = generation !== undefined ? { observedGeneration: generation } : {};
  const drafts: ConditionDraft[] = [
    { type: "Ready", ...readyCondition, ...withGeneration },
    {
      type: "Reconciling",
      status: rollout.reconciling ? "True" : "False",
      reason: rollout.reason,
      message: rollout.message,
      ...withGeneration,
    },
    stalled
      ? {
          type: "Stalled",
          status: "True",
          reason: stalled.reason,
          message: stalled.message,
          ...withGeneration,
        }
      : {
          type: "Stalled",
          status: "False",
          reason: "NoErrors",
          message: "the plugin objects are applied",
          ...withGeneration,
        },
    { type: "Degraded", ...degradedCondition, ...withGeneration },
    ...features.map((c) => ({ ...c, ...withGeneration })),
  ];
  const conditions = withTransitionTimes(drafts, previous?.conditions, now);

  const listed = problems.slice(0, MAX_PROBLEMS);
  const status: DevicePluginConfigStatus = {
    ...withGeneration,
    conditions,
    nodes: { desired, ready, available, updated, summary: `${available}/${desired}` },
    devices: { capacity, allocatable, unhealthy, allocated, summary: `${allocatable}/${capacity}` },
    problems: listed,
    problemsOmitted: problems.length - listed.length,
    ...(input.conflictWith === undefined ? { daemonSetName } : {}),
    ...(upgrade !== undefined && input.conflictWith === undefined ? { upgrade } : {}),
    ...(input.takeover !== undefined ? { takeover: input.takeover } : {}),
    ...(serving !== undefined ? { serving } : {}),
  };

  return {
    status,
    events: transitionEvents(previous, conditions, listed, rollout.reconciling),
    problemCounts: counts,
    admissionRejectedPods: evaluate
      ? targeted.reduce(
          (sum, node) => sum + (input.admissionRejections?.get(node.metadata?.name ?? "")?.length ?? 0),
          0,
        )
      : 0,
  };
}

/**
 * The conditions of the version-dependent features the config uses (see features.ts): SurgeUpgrades
 * from the rollout's modes for the targeted nodes, DRAPublishing from the API server's groups and the
 * kubelets too old for DRA plugins (the rollout's KubeletTooOld nodes, which in DRA mode are those),
 * ExtendedResourceMapping from what the probe found, and DRASharing from what the slices kept (both
 * informational: they change no other condition).
 */
function featureConditions(
  input: AggregateStatusInput,
  targeted: readonly V1Node[],
  tooOld: ReadonlySet<string>,
): FeatureCondition[] {
  const { spec } = input.config;
  const versionOf = (node: V1Node): string => node.status?.nodeInfo?.kubeletVersion ?? "";
  const modes = input.upgradeModes;
  const surge =
    modes === undefined
      ? undefined
      : surgeUpgradesCondition({
          strategy: spec.upgrade.strategy,
          publish: spec.publish,
          nodes: targeted.flatMap((node) => {
            const mode = modes[node.metadata?.name ?? ""];
            return mode === undefined ? [] : [{ kubeletVersion: versionOf(node), mode }];
          }),
        });
  let dra: FeatureCondition | undefined;
  if (spec.publish === "DRA" && input.resourceApiServed !== undefined) {
    const tooOldVersions = input.nodes
      .filter(
        (node) =>
          tooOld.has(node.metadata?.name ?? "") && pluginRunsOnNode(node, spec, input.resolution?.targeting),
      )
      .map(versionOf);
    dra = draPublishingCondition({
      resourceApiServed: input.resourceApiServed,
      matched: targeted.length + tooOldVersions.length,
      tooOld: tooOldVersions,
    });
  }
  const mapping =
    input.extendedResource === undefined
      ? undefined
      : extendedResourceMapping({
          resourceName: spec.resourceName,
          publish: spec.publish,
          choice: extendedResourceNameChoice(spec),
          ...input.extendedResource,
        }).condition;
  const sharing =
    input.resourceApiServed === undefined
      ? undefined
      : draSharingCondition({
          publish: spec.publish,
          sharing: spec.sharing,
          resourceApiServed: input.resourceApiServed,
          kept: input.sharedAllocationsKept,
        });
  return [surge, dra, mapping, sharing].filter((c) => c !== undefined);
}
