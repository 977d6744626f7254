// The DevicePluginConfig object of dpo.dev/v1alpha1: apiVersion, kind, metadata, spec and status.
import { z } from "zod";
import { GROUP, KIND, ObjectMetaSchema } from "../v1beta1/config.js";
import { DevicePluginConfigStatusSchema } from "../v1beta1/status.js";
import { DevicePluginConfigSpecV1alpha1Schema } from "./spec.js";

export const V1ALPHA1 = "v1alpha1";
export const V1ALPHA1_API_VERSION = `${GROUP}/${V1ALPHA1}`;

/**
 * v1alpha1 had no status of its own in the wild, so it shares v1beta1's: converting a status is a copy.
 * Exported under its own name for the CRD generator that will serve v1alpha1.
 */
export const DevicePluginConfigStatusV1alpha1Schema = DevicePluginConfigStatusSchema;

export const DevicePluginConfigV1alpha1Schema = z
  .object({
    apiVersion: z.literal(V1ALPHA1_API_VERSION),
    kind: z.literal(KIND),
    metadata: ObjectMetaSchema,
    spec: DevicePluginConfigSpecV1alpha1Schema,
    // As in v1beta1: users do not write the status, the operator does; `dpo validate` leaves it alone.
    status: z.unknown().optional(),
  })
  .strict();

export type DevicePluginConfigV1alpha1 = z.infer<typeof DevicePluginConfigV1alpha1Schema>;
export type DevicePluginConfigV1alpha1Input = z.input<typeof DevicePluginConfigV1alpha1Schema>;
