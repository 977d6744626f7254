// How a config offers its devices (`publish`), and the DRA settings with the rules both API versions share.
import { z } from "zod";
import type { CelRule } from "./cel.crd.js";
import { DNS_SUBDOMAIN, listOf } from "./fields.js";
import { defaultDriverName } from "./dra-names.js";
import { ExtendedResourceNameSchema } from "./resource-name.js";

export { defaultDriverName, draDeviceClassName, draDriverName, type DRANaming } from "./dra-names.js";

/** How a config offers its devices: the kubelet's device plugin API, or Dynamic Resource Allocation. */
export const PUBLISH_MODES = ["DevicePlugin", "DRA"] as const;
export type PublishMode = (typeof PUBLISH_MODES)[number];

/** resource.k8s.io's longest driver name (DriverNameMaxLength in k8s.io/api resource/v1). */
export const DRA_DRIVER_NAME_MAX_LENGTH = 63;
/** Selectors a DeviceClass may hold (DeviceSelectorsMaxSize); one of them is the driver's own. */
export const DEVICE_CLASS_SELECTORS_MAX = 32;
/** Longest CEL selector expression resource.k8s.io accepts (CELSelectorExpressionMaxLength). */
export const CEL_SELECTOR_MAX_LENGTH = 10 * 1024;
// `[.]`, not `\.`: it sits in a CEL string literal, where `\.` is no valid escape.
const DNS_SUBDOMAIN_CEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const DNS_SUBDOMAIN_MESSAGE = "must be a lowercase DNS subdomain (RFC 1123), e.g. gpu.example.com";

export const DeviceSelectorSchema = z
  .object({
    cel: z
      .object({
        expression: z
          .string()
          .min(1)
          .max(CEL_SELECTOR_MAX_LENGTH)
          .describe(
            'A CEL expression over `device`, e.g. device.attributes["gpu.example.com"].model == "X100".',
          ),
      })
      .strict()
      .describe("A selector written in CEL."),
  })
  .strict();

export const DRADeviceClassSchema = z
  .object({
    name: z
      .string()
      .max(253)
      .regex(DNS_SUBDOMAIN, DNS_SUBDOMAIN_MESSAGE)
      .optional()
      .describe("The DeviceClass the operator creates and owns; defaults to the driver name."),
    selectors: listOf(DeviceSelectorSchema, DEVICE_CLASS_SELECTORS_MAX - 1)
      .default([])
      .describe("CEL selectors every device of the class must also match, beside the driver's own."),
    extendedResourceName: ExtendedResourceNameSchema.optional().describe(
      "The extended resource the DeviceClass maps (its spec.extendedResourceName): a pod asking for resources.limits {<name>: N} gets N devices of the class through DRA, with no ResourceClaim written by its user. Unset: the config's resourceName, so pod specs written for the device plugin keep working. Empty: no mapping; pods ask with ResourceClaims. Served where the API server keeps the field (Kubernetes 1.36 and later with the defaults); the ExtendedResourceMapping condition says whether it does.",
    ),
  })
  .strict();

export const DRASchema = z
  .object({
    driverName: z
      .string()
      .max(DRA_DRIVER_NAME_MAX_LENGTH)
      .regex(DNS_SUBDOMAIN, DNS_SUBDOMAIN_MESSAGE)
      .optional()
      .describe(
        "The DRA driver name in ResourceSlices, claims' results and CDI ids; defaults to <name>.<domain> of the resource name (example.com/gpu: gpu.example.com).",
      ),
    deviceClass: DRADeviceClassSchema.default({ selectors: [] }).describe(
      "The DeviceClass claims name to ask for these devices.",
    ),
  })
  .strict();
export type DRA = z.infer<typeof DRASchema>;

/** Why the default driver name of a resource name cannot be used, or undefined when it can. Pure. */
export function checkDefaultDriverName(resourceName: string): string | undefined {
  const name = defaultDriverName(resourceName);
  if (name.length <= DRA_DRIVER_NAME_MAX_LENGTH && DNS_SUBDOMAIN.test(name)) return undefined;
  return `must be set: the default ${JSON.stringify(name)} from the resource name is not a lowercase DNS subdomain of at most ${DRA_DRIVER_NAME_MAX_LENGTH} characters`;
}

/** The default driver name as CEL: `<name>.<domain>` of resourceName (which has exactly one '/'). */
const DEFAULTED_DRIVER_CEL =
  "(self.resourceName.substring(self.resourceName.indexOf('/') + 1) + '.' + self.resourceName.substring(0, self.resourceName.indexOf('/')))";

/** With publish DRA and no driver name, the default one must be a valid driver name (CEL at spec level). */
export const DRA_DEFAULT_DRIVER_RULE = `!has(self.publish) || self.publish != 'DRA' || (has(self.dra) && has(self.dra.driverName)) || !self.resourceName.contains('/') || (size(${DEFAULTED_DRIVER_CEL}) <= ${DRA_DRIVER_NAME_MAX_LENGTH} && ${DEFAULTED_DRIVER_CEL}.matches('${DNS_SUBDOMAIN_CEL_PATTERN}'))`;

/**
 * The CEL rules of `publish` and `dra` at the spec's level, shared by both API versions. Time-slicing is
 * allowed with DRA: it becomes a device shared by several allocations (src/plugin-runtime/dra/sharing.ts).
 */
export function publishCelRules(): CelRule[] {
  return [
    {
      rule: DRA_DEFAULT_DRIVER_RULE,
      messageExpression: `'must be set: the default "' + ${DEFAULTED_DRIVER_CEL} + '" from the resource name is not a lowercase DNS subdomain of at most ${DRA_DRIVER_NAME_MAX_LENGTH} characters'`,
      fieldPath: ".dra.driverName",
      reason: "FieldValueRequired",
    },
  ];
}

/** The zod side of publishCelRules, naming the same fields. */
export function checkPublish(
  spec: {
    resourceName: string;
    publish?: PublishMode | undefined;
    dra?: { driverName?: string | undefined } | undefined;
  },
  ctx: z.RefinementCtx,
): void {
  if (spec.publish !== "DRA") return;
  // As the CEL rule: judged whenever the resource name has a '/', even one with its own problems (the API
  // server runs the spec's rules over a resource name that failed its own), so both name the same fields.
  if (spec.dra?.driverName === undefined && spec.resourceName.includes("/")) {
    const problem = checkDefaultDriverName(spec.resourceName);
    if (problem !== undefined)
      ctx.addIssue({ code: "custom", path: ["dra", "driverName"], message: problem });
  }
}
