// DeviceNodeState (dpo.dev/v1beta1): one per (config, node), written only by the plugin on that node.
import { z } from "zod";

export const DEVICE_NODE_STATE_KIND = "DeviceNodeState";
export const DEVICE_NODE_STATE_PLURAL = "devicenodestates";

export const DeviceNodeStateSpecSchema = z
  .object({
    configName: z.string().min(1).max(253).describe("The DevicePluginConfig this report belongs to."),
    nodeName: z.string().min(1).max(253),
    resourceName: z.string().min(1).max(316),
    revision: z
      .string()
      .max(63)
      .optional()
      .describe("The plugin revision that writes this report; each revision on a node writes its own."),
  })
  .strict();

export const REGISTRATION_STATES = ["Registered", "NotRegistered"] as const;

export const ReportedDeviceSchema = z
  .object({
    id: z.string().min(1).max(253).describe("Physical device id."),
    health: z.enum(["Healthy", "Unhealthy"]),
    reason: z.string().max(1024).optional(),
    since: z.string().describe("RFC 3339 time the device last changed health."),
    numaNode: z.number().int().min(0).optional(),
    replicas: z.number().int().min(1).describe("Devices advertised to the kubelet for this physical device."),
    attributes: z.record(z.string(), z.string()).optional(),
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
        since: z.string(),
        lastError: z.string().max(1024).optional(),
        socket: z.string().max(1024).optional(),
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
    updateTime: z.string(),
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
