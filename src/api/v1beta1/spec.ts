// The DevicePluginConfig spec (dpo.dev/v1beta1): the single source of truth for its TypeScript types,
// runtime validation and the generated CRD schema. Keep it structural: no object unions, a `type`
// discriminator with one optional member per backend, bounds and enums on every field.
// The backends, the resource name and the DRA settings are modules of their own, exported here too.
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import { BackendSchema } from "./backend.js";
import { listOf, mapOf } from "./fields.js";
import { pluginPodFields } from "./plugin-pod.js";
import { checkPublish, DRASchema, PUBLISH_MODES, publishCelRules } from "./publish.js";
import { NODE_LABELS_DEFAULTS, NODE_LABELS_DESCRIPTION, NodeLabelsSchema } from "./node-labels.js";
import { ResourceNameSchema } from "./resource-name.js";
import { TakeoverSchema } from "./takeover.js";
import {
  NODE_SELECTOR_TERM_DESCRIPTION,
  NodeSelectorTermSchema,
  PRIORITY_DESCRIPTION,
  PrioritySchema,
} from "./targeting.js";

export * from "./backend.js";
export { listOf, mapOf } from "./fields.js";
export * from "./node-labels.js";
export * from "./plugin-pod.js";
export * from "./publish.js";
export * from "./resource-name.js";
export * from "./targeting.js";
export * from "./takeover.js";

export const SharingSchema = z
  .object({
    strategy: z
      .enum(["None", "TimeSlicing"])
      .default("None")
      .describe(
        "None: each device goes to one container. TimeSlicing: each device is advertised as replicas devices, which containers share in turns.",
      ),
    replicas: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .optional()
      .describe("With TimeSlicing: how many containers share each physical device (>= 2)."),
    failRequestsGreaterThanOne: z
      .boolean()
      .default(false)
      .describe("With TimeSlicing: reject a container asking for more than one replica."),
  })
  .strict()
  .superRefine((sharing, ctx) => {
    if (sharing.strategy === "TimeSlicing" && (sharing.replicas === undefined || sharing.replicas < 2)) {
      ctx.addIssue({
        code: "custom",
        path: ["replicas"],
        message: "must be >= 2 when strategy is TimeSlicing",
      });
    }
    if (sharing.strategy === "None" && sharing.replicas !== undefined && sharing.replicas !== 1) {
      ctx.addIssue({
        code: "custom",
        path: ["replicas"],
        message: "must be unset (or 1) when strategy is None",
      });
    }
  })
  .meta(
    celRules(
      {
        rule: "self.strategy != 'TimeSlicing' || (has(self.replicas) && self.replicas >= 2)",
        message: "must be >= 2 when strategy is TimeSlicing",
        fieldPath: ".replicas",
      },
      {
        rule: "self.strategy != 'None' || !has(self.replicas) || self.replicas == 1",
        message: "must be unset (or 1) when strategy is None",
        fieldPath: ".replicas",
      },
    ),
  );

export const ALLOCATION_POLICIES = ["None", "Packed", "Spread", "NUMAAligned"] as const;
export type AllocationPolicy = (typeof ALLOCATION_POLICIES)[number];

export const TopologySchema = z
  .object({
    allocationPolicy: z
      .enum(ALLOCATION_POLICIES)
      .default("None")
      .describe("How the plugin answers GetPreferredAllocation; None leaves the choice to the kubelet."),
  })
  .strict();

/** A label value as the API server checks one. */
export const LabelValueSchema = z
  .string()
  .max(63)
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, "must be a valid label value");

export const TolerationSchema = z
  .object({
    key: z
      .string()
      .max(316)
      .optional()
      .describe("The taint key to tolerate; empty with operator Exists tolerates every taint."),
    operator: z
      .enum(["Exists", "Equal"])
      .optional()
      .describe("Equal (the default): the taint's value must be value. Exists: any value."),
    value: z.string().max(63).optional().describe("The taint value to tolerate with operator Equal."),
    effect: z
      .enum(["NoSchedule", "PreferNoSchedule", "NoExecute"])
      .optional()
      .describe("The taint effect to tolerate; empty tolerates every effect."),
    tolerationSeconds: z
      .number()
      .int()
      .optional()
      .describe("With effect NoExecute: how long the pod stays after the taint appears; unset: for ever."),
  })
  .strict()
  .superRefine((t, ctx) => {
    if (t.operator === "Exists" && t.value !== undefined && t.value !== "") {
      ctx.addIssue({ code: "custom", path: ["value"], message: "must be empty when operator is Exists" });
    }
    if (t.tolerationSeconds !== undefined && t.effect !== "NoExecute") {
      ctx.addIssue({
        code: "custom",
        path: ["tolerationSeconds"],
        message: "may only be set when effect is NoExecute",
      });
    }
  })
  .meta(
    celRules(
      {
        rule: "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
        message: "must be empty when operator is Exists",
        fieldPath: ".value",
      },
      {
        rule: "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
        message: "may only be set when effect is NoExecute",
        fieldPath: ".tolerationSeconds",
      },
    ),
  );

const quantity = z
  .string()
  .regex(
    /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|n|u)?$/,
    "must be a Kubernetes quantity, e.g. 100m or 64Mi",
  );

export const ResourceRequirementsSchema = z
  .object({
    requests: z
      .record(z.string(), quantity)
      .optional()
      .describe("What the plugin container is guaranteed, by resource name, e.g. cpu: 10m, memory: 32Mi."),
    limits: z
      .record(z.string(), quantity)
      .optional()
      .describe("The most the plugin container may use, by resource name, e.g. memory: 64Mi."),
  })
  .strict();

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error"] as const;
export const LOG_LEVEL_DESCRIPTION = "Log level of the plugin pods (docs/logging.md says what each shows).";
export const NODE_SELECTOR_DESCRIPTION =
  "Labels a node must have for the plugin to run there; empty: every node the tolerations allow.";
export const TOLERATIONS_DESCRIPTION = "Tolerations of the plugin pods, to run on device nodes with taints.";

/** The plugin pods' PriorityClass when a config names none (the operator's --plugin-pod-defaults may replace it). */
export const DEFAULT_PLUGIN_PRIORITY_CLASS = "system-node-critical";

export const PluginSchema = z
  .object({
    image: z.string().max(1024).default("").describe("Plugin image; empty means the operator's own image."),
    priorityClassName: z
      .string()
      .max(253)
      .default(DEFAULT_PLUGIN_PRIORITY_CLASS)
      .describe(
        "PriorityClass of the plugin pods; the default keeps them from being evicted before workloads.",
      ),
    resources: ResourceRequirementsSchema.default({}).describe(
      "CPU and memory requests and limits of the plugin container. Neither set: requests cpu 10m and memory 80Mi, limit memory 160Mi (measured, docs/benchmarks.md). Either set: exactly these; empty requests and limits: none.",
    ),
    logLevel: z.enum(LOG_LEVELS).default("info").describe(LOG_LEVEL_DESCRIPTION),
    ...pluginPodFields,
  })
  .strict();

export const CDISchema = z
  .object({
    enabled: z.boolean().default(false).describe("Return CDI device names in Allocate responses."),
    kind: z
      .string()
      // The CDI parser's rule for vendor and class (pkg/parser in container-device-interface): a letter
      // first, a letter or digit last, letters, digits, '_', '-' and '.' between; at least two characters
      // each, since its check of a one-character name slices past the end.
      .regex(
        /^[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]\/[a-zA-Z][-a-zA-Z0-9_.]*[a-zA-Z0-9]$/,
        "must be a CDI kind <vendor>/<class>, each starting with a letter and ending with a letter or digit, e.g. vendor.example/foo",
      )
      .optional()
      .describe("CDI kind; defaults to the resource name."),
  })
  .strict();

export const UPGRADE_STRATEGIES = ["Auto", "Replace", "Surge"] as const;
export type UpgradeStrategy = (typeof UPGRADE_STRATEGIES)[number];

const MAX_UNAVAILABLE_MESSAGE = "must be a number of nodes >= 1 or a percentage from 1% to 100%";
const PERCENT_PATTERN = "^(100|[1-9][0-9]?)%$";

/**
 * Nodes in flight at once during a plugin upgrade: a count, or a percentage of the targeted nodes, as a
 * DaemonSet's `maxUnavailable` (int-or-string in the CRD, checked by CEL there).
 */
export const MaxUnavailableSchema = z
  .union(
    [
      z.number().int().min(1, MAX_UNAVAILABLE_MESSAGE).max(100_000, MAX_UNAVAILABLE_MESSAGE),
      z.string().regex(new RegExp(PERCENT_PATTERN), MAX_UNAVAILABLE_MESSAGE),
    ],
    { error: MAX_UNAVAILABLE_MESSAGE },
  )
  .meta({
    "x-kubernetes-int-or-string": true,
    ...celRules({
      rule: `type(self) == int ? (self >= 1 && self <= 100000) : self.matches('${PERCENT_PATTERN}')`,
      message: MAX_UNAVAILABLE_MESSAGE,
    }),
  });

/** How a change of the plugin pods rolls out, node by node, gated on what the kubelet advertises. */
export const UpgradeSchema = z
  .object({
    strategy: z
      .enum(UPGRADE_STRATEGIES)
      .default("Auto")
      .describe(
        "Surge starts the new plugin beside the old one; Replace stops the old one first; Auto surges where the node's kubelet can take it (v1.37.0 and later) and replaces elsewhere. Where Auto or Surge replaces (a kubelet before v1.37.0 keeps one registration per resource), the new plugin starts beside the old one and stands by, unregistered, until the old one has stopped.",
      ),
    maxUnavailable: MaxUnavailableSchema.default(1).describe(
      "Nodes in flight at once: a count, or a percentage of the targeted nodes (at least 1).",
    ),
    progressDeadlineSeconds: z
      .number()
      .int()
      .min(10)
      .max(86_400)
      .default(300)
      .describe("How long one node may take from first touch until the kubelet advertises the new plugin."),
    paused: z.boolean().default(false).describe("No node starts while paused; nodes in flight finish."),
    autoRollback: z
      .boolean()
      .default(true)
      .describe("A node that misses its deadline rolls every node moved so far back to the previous plugin."),
  })
  .strict();
export type Upgrade = z.infer<typeof UpgradeSchema>;
export const UPGRADE_DEFAULTS: Upgrade = {
  strategy: "Auto",
  maxUnavailable: 1,
  progressDeadlineSeconds: 300,
  paused: false,
  autoRollback: true,
};

export const TAKEOVER_DESCRIPTION =
  "The device plugin that serves the resource name now, which dpo takes each node over from through its rollout (upgrade settings, pause, progress deadline and rollback apply). Set only when the config is created; removed only once the takeover is Complete.";

/**
 * spec.takeover is set when the config is created and never removed: removing it half-way would leave both
 * plugins on the nodes not handed over (and once complete it changes nothing). Deleting the config gives the
 * incumbent back. A transition rule: the API server checks it on updates only.
 */
export const TAKEOVER_STAYS_RULE = {
  rule: "has(oldSelf.takeover) == has(self.takeover)",
  message:
    "is set when the config is created and cannot be added or removed later: delete the config to give the nodes back to the incumbent",
  fieldPath: ".takeover",
  reason: "FieldValueForbidden" as const,
};

export const DevicePluginConfigSpecSchema = z
  .object({
    resourceName: ResourceNameSchema,
    backend: BackendSchema.describe(
      "Where the devices come from: the backend type, and its settings in the member named after it.",
    ),
    sharing: SharingSchema.default({ strategy: "None", failRequestsGreaterThanOne: false }).describe(
      "Whether containers share each device.",
    ),
    topology: TopologySchema.default({ allocationPolicy: "None" }).describe(
      "Which devices the plugin prefers when the kubelet asks it to choose (GetPreferredAllocation).",
    ),
    cdi: CDISchema.default({ enabled: false }).describe(
      "CDI (Container Device Interface): name the devices in Allocate responses for runtimes that apply CDI specs.",
    ),
    nodeSelector: mapOf(LabelValueSchema, 316).default({}).describe(NODE_SELECTOR_DESCRIPTION),
    nodeSelectorTerm: NodeSelectorTermSchema.optional().describe(NODE_SELECTOR_TERM_DESCRIPTION),
    priority: PrioritySchema.default(0).describe(PRIORITY_DESCRIPTION),
    tolerations: listOf(TolerationSchema, 64).default([]).describe(TOLERATIONS_DESCRIPTION),
    plugin: PluginSchema.default({
      image: "",
      priorityClassName: DEFAULT_PLUGIN_PRIORITY_CLASS,
      resources: {},
      logLevel: "info",
    }).describe("The plugin pods the operator runs on the selected nodes."),
    upgrade: UpgradeSchema.default(UPGRADE_DEFAULTS).describe(
      "How a change of the plugin pods rolls out, node by node, gated on what the kubelet advertises.",
    ),
    publish: z
      .enum(PUBLISH_MODES)
      .default("DevicePlugin")
      .describe(
        "DevicePlugin: the kubelet advertises the devices as an extended resource. DRA: the plugin publishes them in ResourceSlices for ResourceClaims (resource.k8s.io/v1).",
      ),
    dra: DRASchema.optional().describe(
      "DRA settings, read when publish is DRA (kept otherwise, so switching is one field).",
    ),
    takeover: TakeoverSchema.optional().describe(TAKEOVER_DESCRIPTION),
    nodeLabels: NodeLabelsSchema.default(NODE_LABELS_DEFAULTS).describe(NODE_LABELS_DESCRIPTION),
  })
  .strict()
  .superRefine((spec, ctx) => checkPublish(spec, ctx))
  .meta(celRules(...publishCelRules(), TAKEOVER_STAYS_RULE));

export type DevicePluginConfigSpec = z.infer<typeof DevicePluginConfigSpecSchema>;
export type DevicePluginConfigSpecInput = z.input<typeof DevicePluginConfigSpecSchema>;
export type Sharing = z.infer<typeof SharingSchema>;
export type Toleration = z.infer<typeof TolerationSchema>;
export type LogLevel = (typeof LOG_LEVELS)[number];
