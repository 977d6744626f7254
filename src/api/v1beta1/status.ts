// DevicePluginConfig status (dpo.dev/v1beta1): kstatus conditions, node and device totals, problem nodes.
import { z } from "zod";
import { listMapKeys } from "./cel.crd.js";

/**
 * The kstatus conditions every status has, then the conditions of version-dependent features, set only
 * where the config uses the feature: SurgeUpgrades (upgrade strategies Auto and Surge) and DRAPublishing
 * (publish DRA).
 */
export const CONDITION_TYPES = [
  "Ready",
  "Reconciling",
  "Stalled",
  "Degraded",
  "SurgeUpgrades",
  "DRAPublishing",
] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

/** A standard Kubernetes condition (metav1.Condition). */
export const ConditionSchema = z
  .object({
    type: z.string().min(1).max(316),
    status: z.enum(["True", "False", "Unknown"]),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/, "must be a CamelCase reason"),
    message: z.string().max(32768),
    lastTransitionTime: z.string().describe("RFC 3339 time of the last status change."),
    observedGeneration: z.number().int().min(0).optional(),
  })
  .strict();
export type Condition = z.infer<typeof ConditionSchema>;

export const PROBLEM_REASONS = [
  "NoCapacity",
  "CapacityMismatch",
  "UnhealthyDevices",
  "PluginNotRegistered",
  "PluginNotReady",
  "KubeletTooOld",
  "UpgradeFailed",
  "TakeoverWaitsForPods",
  "AdmissionRejected",
] as const;
export type ProblemReason = (typeof PROBLEM_REASONS)[number];

/**
 * The reasons of a True Stalled condition: what the operator cannot fix by waiting. A config that yields
 * its resource name or CDI kind to another, plugin objects the API server refuses, a DRA config without
 * the resource.k8s.io API, a DeviceClass another owner holds, a rollout that failed or was rolled back,
 * a spec that no longer validates or that the plugin policy refuses. dpo_config_stalled has a series
 * for each.
 */
export const STALLED_REASONS = [
  "ResourceNameConflict",
  "CDIKindConflict",
  "ApplyFailed",
  "ResourceAPIUnavailable",
  "DeviceClassConflict",
  "UpgradeFailed",
  "UpgradeRolledBack",
  "InvalidSpec",
  "RefusedByPolicy",
  "TakeoverFailed",
] as const;
export type StalledReason = (typeof STALLED_REASONS)[number];

/** At most this many problem nodes are listed; the rest are counted. */
export const MAX_PROBLEMS = 20;
/** At most this many device ids are listed per problem node. */
export const MAX_PROBLEM_DEVICES = 32;

export const NodeProblemSchema = z
  .object({
    node: z.string().max(253),
    reason: z.enum(PROBLEM_REASONS),
    message: z.string().max(1024).optional(),
    devices: z.array(z.string().max(253)).max(MAX_PROBLEM_DEVICES).optional(),
  })
  .strict();
export type NodeProblem = z.infer<typeof NodeProblemSchema>;

export const UPGRADE_PHASES = [
  "Progressing",
  "Paused",
  "Complete",
  "RollingBack",
  "RolledBack",
  "Failed",
] as const;
export type UpgradePhase = (typeof UPGRADE_PHASES)[number];
/** At most this many nodes are listed as in flight, and as failed; the rest are counted. */
export const MAX_UPGRADE_NODES = 20;

export const UpgradeStatusSchema = z
  .object({
    phase: z.enum(UPGRADE_PHASES),
    currentRevision: z.string().max(63).describe("The plugin revision the nodes are moving from."),
    updateRevision: z.string().max(63).describe("The plugin revision of the current spec."),
    updated: z.number().int().min(0).describe("Targeted nodes whose kubelet advertises the update revision."),
    total: z.number().int().min(0).describe("Targeted nodes (kubelets too old are not targeted)."),
    summary: z.string().max(64).describe("updated/total, for printer columns."),
    inFlight: z.array(z.string().max(253)).max(MAX_UPGRADE_NODES).optional(),
    inFlightOmitted: z.number().int().min(0).optional(),
    failed: z.array(z.string().max(253)).max(MAX_UPGRADE_NODES).optional(),
    failedOmitted: z.number().int().min(0).optional(),
    message: z.string().max(1024).optional(),
  })
  .strict();
export type UpgradeStatus = z.infer<typeof UpgradeStatusSchema>;

export const TAKEOVER_PHASES = ["Progressing", "Complete", "Failed"] as const;
export type TakeoverPhase = (typeof TAKEOVER_PHASES)[number];

/**
 * spec.takeover's progress: the nodes move from the incumbent as an upgrade's do (status.upgrade, from
 * revision "incumbent"); this says whose plugin that is and whether it is done.
 */
export const TakeoverStatusSchema = z
  .object({
    incumbent: z.string().max(317).describe("The incumbent's DaemonSet, <namespace>/<name>."),
    phase: z
      .enum(TAKEOVER_PHASES)
      .describe(
        "Progressing: nodes still run the incumbent (status.upgrade says how many moved). Complete: every targeted node runs dpo's plugin and the incumbent runs none (or is gone). Failed: the takeover cannot go on (the message says why).",
      ),
    message: z.string().max(1024).optional(),
  })
  .strict();
export type TakeoverStatus = z.infer<typeof TakeoverStatusSchema>;

/** At most this many other configs are listed on each side of a config's serving status. */
export const MAX_SERVING_CONFIGS = 16;

const SharedNodesSchema = z
  .object({
    config: z.string().max(253),
    priority: z.number().int(),
    nodes: z.number().int().min(0).describe("Nodes both select that the config of higher priority serves."),
  })
  .strict();

/**
 * Which config serves which nodes where configs of one resource name and different priorities select
 * the same nodes: counts, never node names, so nothing here grows with the number of nodes.
 */
export const ServingStatusSchema = z
  .object({
    priority: z.number().int().describe("spec.priority as the operator read it."),
    served: z
      .number()
      .int()
      .min(0)
      .describe("Nodes this config serves: those it selects that no config of higher priority takes."),
    yielded: z
      .number()
      .int()
      .min(0)
      .describe("Nodes this config selects that configs of higher priority serve instead."),
    yieldedTo: z
      .array(SharedNodesSchema)
      .max(MAX_SERVING_CONFIGS)
      .optional()
      .describe("The configs of higher priority that serve some of this config's nodes, and how many each."),
    overrides: z
      .array(SharedNodesSchema)
      .max(MAX_SERVING_CONFIGS)
      .optional()
      .describe(
        "The configs of lower priority that step back on some of the nodes this config serves, and how many each.",
      ),
    summary: z.string().max(64).describe("served/selected, for printer columns."),
  })
  .strict();
export type ServingStatus = z.infer<typeof ServingStatusSchema>;

export const DevicePluginConfigStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional(),
    conditions: z
      .array(ConditionSchema)
      .max(16)
      .meta(listMapKeys("type"))
      .optional()
      .describe(
        "Ready, Reconciling, Stalled and Degraded (kstatus); SurgeUpgrades (strategies Auto and Surge: whether every targeted node's kubelet lets an upgrade surge, and why not) and DRAPublishing (publish DRA: whether the API server and the kubelets allow it, and why not).",
      ),
    nodes: z
      .object({
        desired: z.number().int().min(0).describe("Nodes the config targets."),
        ready: z
          .number()
          .int()
          .min(0)
          .describe(
            "Targeted nodes whose plugin pod (the one of the current revision where it exists) is ready, registered and advertised by the kubelet.",
          ),
        available: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe(
            "Targeted nodes where a plugin pod of any revision runs, registered and advertised by the kubelet (its readiness probe need not have passed yet; a waiting container does not count): during an upgrade the old revision serves until the new one takes over. Absent in statuses written before it existed.",
          ),
        updated: z.number().int().min(0).describe("Targeted nodes whose plugin pod runs the current config."),
        summary: z.string().max(64).describe("available/desired, for printer columns."),
      })
      .strict()
      .optional(),
    devices: z
      .object({
        capacity: z.number().int().min(0),
        allocatable: z.number().int().min(0),
        unhealthy: z.number().int().min(0),
        allocated: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe(
            "Devices the kubelets have given to containers, summed from the plugins' reports (their PodResources API); absent in statuses written before it existed.",
          ),
        summary: z.string().max(64).describe("allocatable/capacity, for printer columns."),
      })
      .strict()
      .optional(),
    problems: z.array(NodeProblemSchema).max(MAX_PROBLEMS).optional(),
    problemsOmitted: z.number().int().min(0).optional().describe("Problem nodes beyond the listed ones."),
    daemonSetName: z.string().max(253).optional(),
    upgrade: UpgradeStatusSchema.optional(),
    takeover: TakeoverStatusSchema.optional().describe(
      "Set while and after spec.takeover hands the nodes over.",
    ),
    serving: ServingStatusSchema.optional().describe(
      "Set where configs of this resource name with other priorities select some of the same nodes: which serves them.",
    ),
  })
  .strict();
export type DevicePluginConfigStatus = z.infer<typeof DevicePluginConfigStatusSchema>;
