// DeviceNodeState (dpo.dev/v1beta1): one per (config, node), written only by the plugin on that node.
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import {
  MAX_ATTRIBUTE_KEY,
  MAX_ATTRIBUTE_VALUE,
  MAX_ATTRIBUTES_PER_DEVICE,
} from "./devicenodestate-bounds.js";
import { DEVICE_NODE_STATE_KIND } from "./kinds.js";

export { DEVICE_NODE_STATE_KIND, DEVICE_NODE_STATE_PLURAL } from "./kinds.js";
export {
  MAX_ATTRIBUTE_KEY,
  MAX_ATTRIBUTE_VALUE,
  MAX_ATTRIBUTES_PER_DEVICE,
} from "./devicenodestate-bounds.js";

/**
 * The report's name is derived from these (contract/node-state.ts): a report whose config, node or
 * revision could be rewritten in place would be one report under another pair's name, and a plugin could
 * move its report from config to config, making the operator visit a new config on every write.
 */
const immutable = celRules({
  rule: "self == oldSelf",
  message: "is immutable",
  reason: "FieldValueForbidden",
});

export const DeviceNodeStateSpecSchema = z
  .object({
    configName: z
      .string()
      .min(1)
      .max(253)
      .meta(immutable)
      .describe("The DevicePluginConfig this report belongs to."),
    nodeName: z.string().min(1).max(253).meta(immutable),
    resourceName: z.string().min(1).max(316),
    revision: z
      .string()
      .max(63)
      .meta(immutable)
      .optional()
      .describe("The plugin revision that writes this report; each revision on a node writes its own."),
  })
  .strict();

/**
 * StandingBy: the plugin serves its socket but does not register, because an older instance of it still
 * serves the node and the kubelet cannot keep both (a Replace with the new plugin started ahead); it
 * registers once that one has stopped.
 */
export const REGISTRATION_STATES = ["Registered", "NotRegistered", "StandingBy"] as const;

/** Most typed attributes plus capacities per device, as resource.k8s.io/v1 allows one device. */
const MAX_TYPED_PER_DEVICE = 32;
/** An RFC 3339 time is at most 35 characters (nanoseconds and an offset); room to spare. */
const MAX_TIME = 64;

/**
 * A typed device attribute, in the form a ResourceSlice publishes it (resource.k8s.io/v1
 * DeviceAttribute): exactly one member set.
 */
export const TypedAttributeSchema = z
  .object({
    int: z.number().int().optional(),
    bool: z.boolean().optional(),
    string: z.string().max(64).optional(),
    version: z.string().max(64).optional(),
  })
  .strict()
  .refine(
    (value) => Object.values(value).filter((member) => member !== undefined).length === 1,
    "must set exactly one of int, bool, string, version",
  )
  .meta(
    celRules({
      // Arithmetic rather than a list filter: the rule runs for up to 4096 devices × 32 attributes, and
      // the API server refuses a CRD whose rules' estimated cost exceeds its budget.
      rule: "(has(self.int) ? 1 : 0) + (has(self.bool) ? 1 : 0) + (has(self.string) ? 1 : 0) + (has(self.version) ? 1 : 0) == 1",
      message: "must set exactly one of int, bool, string, version",
    }),
  );
export type TypedAttribute = z.infer<typeof TypedAttributeSchema>;

const typedRecord = <T extends z.ZodType>(value: T) =>
  z
    .record(z.string().max(MAX_ATTRIBUTE_KEY), value)
    .refine((record) => Object.keys(record).length <= MAX_TYPED_PER_DEVICE, {
      message: `must have at most ${MAX_TYPED_PER_DEVICE} entries`,
    })
    .meta({ maxProperties: MAX_TYPED_PER_DEVICE });

export const ReportedDeviceSchema = z
  .object({
    id: z.string().min(1).max(253).describe("Physical device id."),
    health: z.enum(["Healthy", "Unhealthy"]),
    reason: z.string().max(1024).optional(),
    since: z.string().max(MAX_TIME).describe("RFC 3339 time the device last changed health."),
    numaNode: z.number().int().min(0).optional(),
    replicas: z
      .number()
      .int()
      .min(0)
      .describe(
        "Devices advertised to the kubelet for this physical device; 0 while the other publish path holds it (heldBy).",
      ),
    heldBy: z
      .enum(["DevicePlugin", "DRA"])
      .optional()
      .describe(
        "The publish path whose pods hold this device since a switch of spec.publish. The DRA path leaves it out of its ResourceSlice (replicas 0); the device plugin keeps advertising it, as the scheduler counts those pods against it, and never hands it out until they free it.",
      ),
    attributes: z
      .record(z.string().max(MAX_ATTRIBUTE_KEY), z.string().max(MAX_ATTRIBUTE_VALUE))
      .refine((record) => Object.keys(record).length <= MAX_ATTRIBUTES_PER_DEVICE, {
        message: `must have at most ${MAX_ATTRIBUTES_PER_DEVICE} entries`,
      })
      .meta({ maxProperties: MAX_ATTRIBUTES_PER_DEVICE })
      .optional()
      .describe("The backend's attributes as it reports them, key → text."),
    typedAttributes: typedRecord(TypedAttributeSchema)
      .optional()
      .describe(
        "The device's attributes typed as its ResourceSlice publishes them in DRA mode (the same function builds both; NUMA node included).",
      ),
    capacity: typedRecord(z.object({ value: z.string().max(64) }).strict())
      .optional()
      .describe("The device's quantities (memory and the like), as its ResourceSlice publishes them."),
  })
  .strict();
export type ReportedDevice = z.infer<typeof ReportedDeviceSchema>;

export const DeviceNodeStateStatusSchema = z
  .object({
    pluginVersion: z.string().max(128),
    kubeletAPIVersion: z.string().max(32),
    registration: z
      .object({
        state: z.enum(REGISTRATION_STATES),
        since: z.string().max(MAX_TIME),
        lastError: z.string().max(1024).optional(),
        socket: z.string().max(1024).optional(),
        selfHeal: z
          .object({
            count: z
              .number()
              .int()
              .min(0)
              .describe("Times the plugin registered again by itself since it started."),
            lastTime: z.string().max(MAX_TIME).describe("When it last did."),
            message: z
              .string()
              .max(256)
              .describe(
                "What it saw, e.g. kubelet advertised 0 of 4 healthy devices for 30 s; registered again.",
              ),
            healedTime: z
              .string()
              .max(MAX_TIME)
              .optional()
              .describe("When the kubelet listed every healthy device again after it; absent until then."),
          })
          .strict()
          .optional()
          .describe(
            "Set once the kubelet handed out fewer devices than the plugin advertised as healthy for longer than the plugin's --capacity-heal-after while it was registered, and the plugin registered again by itself.",
          ),
      })
      .strict(),
    /** Hash of the config the plugin serves (the rendered ConfigMap's), so the operator can tell updated pods. */
    configHash: z.string().max(128).optional(),
    /** The plugin pod that wrote the report, so a report left by a pod that is gone is never believed. */
    podUID: z.string().max(128).optional(),
    advertised: z.number().int().min(0).describe("Devices advertised to the kubelet."),
    healthy: z.number().int().min(0).describe("Healthy advertised devices."),
    allocated: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe(
        "Devices of the resource the kubelet has given to containers, from its PodResources API; absent while the plugin cannot read it.",
      ),
    devices: z.array(ReportedDeviceSchema).max(4096),
    updateTime: z.string().max(MAX_TIME),
  })
  .strict();
export type DeviceNodeStateStatus = z.infer<typeof DeviceNodeStateStatusSchema>;

export const DeviceNodeStateSchema = z.looseObject({
  apiVersion: z.literal("dpo.dev/v1beta1"),
  kind: z.literal(DEVICE_NODE_STATE_KIND),
  metadata: z.looseObject({ name: z.string(), namespace: z.string().optional() }),
  spec: DeviceNodeStateSpecSchema,
  status: DeviceNodeStateStatusSchema.optional(),
});
export type DeviceNodeState = z.infer<typeof DeviceNodeStateSchema>;
