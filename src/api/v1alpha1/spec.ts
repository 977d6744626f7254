// The DevicePluginConfig spec of dpo.dev/v1alpha1, the older flatter API that manifests in the wild were
// written against: its zod schema is the source of its types, `dpo validate` and (later) its CRD version.
// Member schemas and resource-name rules are the v1beta1 ones, so both versions accept the same values.
import { z } from "zod";
import { celRules } from "../v1beta1/cel.crd.js";
import {
  BACKEND_TYPES,
  DEVFS_DESCRIPTION,
  DevFSBackendV1alpha1Schema,
  listOf,
  LOG_LEVEL_DESCRIPTION,
  LOG_LEVELS,
  mapOf,
  MOCK_DESCRIPTION,
  MockBackendSchema,
  NODE_LABELS_DESCRIPTION,
  NodeLabelsSchema,
  NODE_SELECTOR_DESCRIPTION,
  PCI_DESCRIPTION,
  PCIBackendV1alpha1Schema,
  TakeoverSchema,
  TAKEOVER_STAYS_RULE,
  ResourceNameSchema,
  TOLERATIONS_DESCRIPTION,
  TolerationSchema,
  UpgradeSchema,
  PUBLISH_MODES,
  DRASchema,
  checkPublish,
  publishCelRules,
  type BackendType,
} from "../v1beta1/spec.js";

/** v1alpha1 spells the allocation policies in lower case and calls Spread "balanced". */
export const V1ALPHA1_ALLOCATION_POLICIES = ["none", "packed", "balanced", "numa"] as const;
export type V1alpha1AllocationPolicy = (typeof V1ALPHA1_ALLOCATION_POLICIES)[number];

/**
 * Which spec-level member belongs to each `backend` value in v1alpha1 (note `devfs`, not `devFS`).
 * Backends added after v1alpha1 (NVIDIA) have none: v1alpha1 names the type, and the settings live
 * only in v1beta1, carried through v1alpha1 in the conversion annotation like every other v1beta1-only
 * field, so the version manifests in the wild were written against does not grow.
 */
export const V1ALPHA1_BACKEND_MEMBER: Record<BackendType, "mock" | "devfs" | "pci" | undefined> = {
  Mock: "mock",
  DevFS: "devfs",
  PCI: "pci",
  NVIDIA: undefined,
};

/** The backend types whose settings v1alpha1 can hold itself. */
export const V1ALPHA1_MEMBER_BACKEND_TYPES = BACKEND_TYPES.filter(
  (type) => V1ALPHA1_BACKEND_MEMBER[type] !== undefined,
);

const V1ALPHA1_MEMBERS = ["mock", "devfs", "pci"] as const;

/** The largest `sharedDevNum`, the same bound as v1beta1's `sharing.replicas`. */
export const MAX_SHARED_DEV_NUM = 1024;

const labelValue = z
  .string()
  .max(63)
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, "must be a valid label value");

export const DevicePluginConfigSpecV1alpha1Schema = z
  .object({
    resourceName: ResourceNameSchema,
    backend: z
      .enum(BACKEND_TYPES)
      .describe("Which backend discovers the devices; the spec member of the same name must be set."),
    mock: MockBackendSchema.optional().describe(MOCK_DESCRIPTION),
    devfs: DevFSBackendV1alpha1Schema.optional().describe(DEVFS_DESCRIPTION),
    pci: PCIBackendV1alpha1Schema.optional().describe(PCI_DESCRIPTION),
    sharedDevNum: z
      .number()
      .int()
      .min(1, "must be >= 1 (1 means no sharing)")
      .max(MAX_SHARED_DEV_NUM, `must be <= ${MAX_SHARED_DEV_NUM}`)
      .optional()
      .describe("How many containers share each physical device; 1 (or unset) means no sharing."),
    preferredAllocationPolicy: z
      .enum(V1ALPHA1_ALLOCATION_POLICIES)
      .optional()
      .describe("How the plugin answers GetPreferredAllocation; none (or unset) leaves it to the kubelet."),
    nodeSelector: mapOf(labelValue, 316).optional().describe(NODE_SELECTOR_DESCRIPTION),
    tolerations: listOf(TolerationSchema, 64).optional().describe(TOLERATIONS_DESCRIPTION),
    image: z.string().max(1024).optional().describe("Plugin image; empty means the operator's own image."),
    logLevel: z.enum(LOG_LEVELS).optional().describe(LOG_LEVEL_DESCRIPTION),
    upgrade: UpgradeSchema.optional().describe("How a change of the plugin pods rolls out; as in v1beta1."),
    publish: z
      .enum(PUBLISH_MODES)
      .optional()
      .describe("DevicePlugin (unset) or DRA: how the devices are offered; as in v1beta1."),
    dra: DRASchema.optional().describe("DRA settings, read when publish is DRA; as in v1beta1."),
    takeover: TakeoverSchema.optional().describe("The plugin serving the resource now; as in v1beta1."),
    nodeLabels: NodeLabelsSchema.optional().describe(`${NODE_LABELS_DESCRIPTION} As in v1beta1.`),
  })
  .strict()
  .superRefine((spec, ctx) => {
    checkPublish(spec, ctx);
    const want = V1ALPHA1_BACKEND_MEMBER[spec.backend];
    if (want !== undefined && spec[want] === undefined) {
      ctx.addIssue({ code: "custom", path: [want], message: `must be set when backend is ${spec.backend}` });
    }
    for (const member of V1ALPHA1_MEMBERS) {
      if (member !== want && spec[member] !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: [member],
          message: `must not be set when backend is ${spec.backend}`,
        });
      }
    }
  })
  // The superRefine above as CEL, so a CRD serving v1alpha1 refuses the same manifests at the same paths.
  .meta(
    celRules(
      ...publishCelRules(),
      TAKEOVER_STAYS_RULE,
      ...V1ALPHA1_MEMBER_BACKEND_TYPES.flatMap((type) => {
        const member = V1ALPHA1_BACKEND_MEMBER[type];
        return [
          {
            rule: `self.backend != '${type}' || has(self.${member})`,
            message: `must be set when backend is ${type}`,
            fieldPath: `.${member}`,
            reason: "FieldValueRequired" as const,
          },
          {
            rule: `self.backend == '${type}' || !has(self.${member})`,
            messageExpression: "'must not be set when backend is ' + self.backend",
            fieldPath: `.${member}`,
            reason: "FieldValueForbidden" as const,
          },
        ];
      }),
    ),
  );

export type DevicePluginConfigSpecV1alpha1 = z.infer<typeof DevicePluginConfigSpecV1alpha1Schema>;
export type DevicePluginConfigSpecV1alpha1Input = z.input<typeof DevicePluginConfigSpecV1alpha1Schema>;
