// The DevicePluginConfig object (dpo.dev/v1beta1): apiVersion, kind, metadata and the spec schema.
import { z } from "zod";
import { DevicePluginConfigSpecSchema } from "./spec.js";

import { API_VERSION, KIND } from "./kinds.js";

export { API_VERSION, GROUP, KIND, PLURAL, VERSION } from "./kinds.js";

const DNS_SUBDOMAIN_NAME = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    "must be a lowercase RFC 1123 subdomain, e.g. example-foo",
  );

/** Only the metadata fields the runtime reads are checked; the API server owns the rest. */
export const ObjectMetaSchema = z.looseObject({
  name: DNS_SUBDOMAIN_NAME,
  generation: z.number().int().optional(),
  uid: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

export const DevicePluginConfigSchema = z
  .object({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(KIND),
    metadata: ObjectMetaSchema,
    spec: DevicePluginConfigSpecSchema,
    status: z.unknown().optional(),
  })
  .strict();

export type DevicePluginConfig = z.infer<typeof DevicePluginConfigSchema>;
export type DevicePluginConfigInput = z.input<typeof DevicePluginConfigSchema>;
