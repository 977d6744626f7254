// The DevicePluginConfig spec (dpo.dev/v1beta1): the single source of truth for its TypeScript types,
// runtime validation and the generated CRD schema. Keep it structural: no object unions, a `type`
// discriminator with one optional member per backend, bounds and enums on every field.
import { z } from "zod";
import { celRules, type CelRule } from "./cel.crd.js";

/** Kubernetes label/annotation-style qualified name limits used by resource names. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/**
 * The shape of an extended resource name for the CRD schema (RE2, no lookarounds): one DNS
 * subdomain, one '/', a qualified name part of at most 63 characters. The CEL rules on
 * `resourceName` carry the rest of checkExtendedResourceName.
 */
export const EXTENDED_RESOURCE_NAME_PATTERN =
  "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$";

/**
 * Checks an extended resource name the way the kubelet's device manager and the API server do:
 * `<domain>/<name>`, the domain a DNS subdomain outside `kubernetes.io`, the name a qualified name
 * part of at most 63 characters, and `requests.<resourceName>` must stay a qualified name.
 * Returns a message for the first rule broken, or undefined when the name is valid.
 */
export function checkExtendedResourceName(name: string): string | undefined {
  const slash = name.indexOf("/");
  if (slash <= 0 || slash !== name.lastIndexOf("/") || slash === name.length - 1) {
    return "must be <domain>/<name> with exactly one '/'";
  }
  const domain = name.slice(0, slash);
  const short = name.slice(slash + 1);
  // requests.<domain> must itself be a DNS subdomain of at most 253 characters, so 244 for the domain.
  if (domain.length > 244 || !DNS_SUBDOMAIN.test(domain)) {
    return `domain '${domain}' must be a lowercase DNS subdomain (RFC 1123) of at most 244 characters`;
  }
  if (domain === "kubernetes.io" || domain.endsWith(".kubernetes.io") || name.includes("kubernetes.io/")) {
    return "must not be in the kubernetes.io domain (reserved for Kubernetes resources)";
  }
  if (name.startsWith("requests.")) {
    return "must not start with 'requests.'";
  }
  if (short.length > 63 || !QUALIFIED_NAME_PART.test(short)) {
    return `name '${short}' must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  return undefined;
}

const absolutePath = z
  .string()
  .min(1)
  .max(4096)
  .regex(/^\//, "must be an absolute path")
  .refine((p) => !p.split("/").includes(".."), "must not contain '..'")
  .meta(
    celRules({
      rule: "!(self == '..' || self.startsWith('../') || self.contains('/../') || self.endsWith('/..'))",
      message: "must not contain '..'",
    }),
  );

/**
 * A list of at most `max` items whose items are checked even when there are too many, as the API server
 * checks them: zod's own `.max()` on an array stops at the size and says nothing about the items, so
 * `dpo validate` would name fewer problems than admission does. `maxItems` still goes into the CRD. (A
 * non-integer number among the items still ends every check around it: zod's `.int()` aborts.)
 */
export function listOf<T extends z.ZodType>(item: T, max: number) {
  return z
    .array(item)
    .refine((items) => items.length <= max, {
      message: `Too big: expected array to have <=${max} items`,
      when: (payload) => Array.isArray(payload.value),
    })
    .meta({ maxItems: max });
}

/**
 * A map whose keys are at most `maxKey` characters. A structural schema cannot bound map keys, so the CRD
 * carries a CEL rule over them, which names the map and lets every other check run; a zod key schema
 * would name the key as a field and stop the checks of the enclosing object, so the keys are checked here
 * the way the rule checks them.
 */
export function mapOf<T extends z.ZodType>(value: T, maxKey: number) {
  return z
    .record(z.string(), value)
    .superRefine((map, ctx) => {
      for (const key of Object.keys(map)) {
        if ([...key].length <= maxKey) continue;
        const shown = key.length > 40 ? `${key.slice(0, 40)}...` : key;
        ctx.addIssue({
          code: "custom",
          message: `key ${JSON.stringify(shown)} is longer than ${maxKey} characters`,
        });
      }
    })
    .meta(
      celRules({
        rule: `self.all(k, size(k) <= ${maxKey})`,
        message: `keys must be at most ${maxKey} characters`,
      }),
    );
}

/** A device id as the kubelet sees it: no whitespace, no commas (ids are joined into env values). */
const idPrefix = z
  .string()
  .min(1)
  .max(48)
  .regex(/^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$/, "must be lowercase alphanumerics, '-', '_' or '.'");

export const MockBackendSchema = z
  .object({
    devices: z.number().int().min(1).max(4096).describe("Number of simulated physical devices."),
    idPrefix: idPrefix.default("mock").describe("Prefix of device ids: <idPrefix>-<index>."),
    numaNodes: z
      .number()
      .int()
      .min(0)
      .max(64)
      .default(1)
      .describe("NUMA nodes the devices are spread over round-robin; 0 means no topology information."),
    healthFile: absolutePath
      .optional()
      .describe(
        'JSON file mapping device id to "Healthy"|"Unhealthy" or {health, reason}; watched for changes.',
      ),
    attributes: mapOf(z.string().max(256), 63).default({}).describe("Attributes reported for every device."),
  })
  .strict();

export const DevFSPathSchema = z
  .object({
    glob: absolutePath.describe(
      "Glob of device files relative to the backend root, e.g. /dev/ttyUSB*; * and ? match within a path segment.",
    ),
    type: z
      .enum(["CharDevice", "BlockDevice", "File"])
      .default("CharDevice")
      .describe("What a matching path must be to count as healthy."),
    permissions: z
      .string()
      .regex(/^(rw?m?|wm?|m)$/, "must be a combination of r, w and m in that order, e.g. rw")
      .default("rw")
      .describe("cgroup device permissions given to the container."),
    maxContainersPerDevice: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .default(1)
      .describe("How many containers may share one matching path."),
  })
  .strict();

export const DevFSBackendSchema = z
  .object({
    root: absolutePath.default("/").describe("Host directory the globs are resolved under."),
    paths: listOf(DevFSPathSchema, 64).min(1),
  })
  .strict();

export const PCIBackendSchema = z
  .object({
    vendor: z
      .string()
      .regex(/^[0-9a-f]{4}$/, "must be a 4-digit lowercase hexadecimal PCI vendor id, e.g. 10de")
      .describe("PCI vendor id."),
    devices: listOf(
      z.string().regex(/^[0-9a-f]{4}$/, "must be a 4-digit lowercase hexadecimal PCI device id"),
      256,
    )
      .default([])
      .describe("PCI device ids to include; empty means all of the vendor's."),
    classPrefix: z
      .string()
      .regex(/^[0-9a-f]{2,6}$/, "must be 2 to 6 lowercase hexadecimal digits, e.g. 0302")
      .optional()
      .describe("Prefix of the PCI class code (without 0x), e.g. 0302 for 3D controllers."),
    sysfsRoot: absolutePath.default("/sys").describe("Where sysfs is mounted."),
    devRoot: absolutePath.default("/dev").describe("Where the host's /dev is mounted."),
  })
  .strict();

/**
 * The XIDs NVIDIA documents as caused by the application rather than the GPU (13 graphics engine
 * exception, 31 MMU fault, 43 channel stopped, 45 preemptive cleanup, 68 video processor exception,
 * 109 context switch timeout): NVIDIA's own device plugin skips the same ones by default.
 */
export const DEFAULT_IGNORED_XIDS = [13, 31, 43, 45, 68, 109] as const;

export const NVIDIABackendSchema = z
  .object({
    nvidiaSmiPath: absolutePath
      .default("/usr/bin/nvidia-smi")
      .describe("The nvidia-smi binary; the NVIDIA Container Toolkit mounts it at /usr/bin/nvidia-smi."),
    devRoot: absolutePath.default("/dev").describe("Where the host's /dev (with /dev/nvidia*) is seen."),
    sysfsRoot: absolutePath.default("/sys").describe("Where sysfs is mounted; the NUMA node of each GPU."),
    pollIntervalSeconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(10)
      .describe("How often nvidia-smi (and dmesg) are run for health."),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(300)
      .default(10)
      .describe("How long one nvidia-smi or dmesg run may take before it is killed and counted as failed."),
    dmesgPath: absolutePath
      .optional()
      .describe(
        "dmesg binary to read XID events (NVRM: Xid lines) from the kernel log; unset: nvidia-smi polling only. Needs CAP_SYSLOG.",
      ),
    ignoredXids: listOf(z.number().int().min(1).max(65535), 64)
      .default([...DEFAULT_IGNORED_XIDS])
      .describe("XIDs that do not make a GPU unhealthy (application errors)."),
  })
  .strict();

export const BACKEND_TYPES = ["Mock", "DevFS", "PCI", "NVIDIA"] as const;
export type BackendType = (typeof BACKEND_TYPES)[number];

/** Which member of `backend` belongs to each `type`. */
export const BACKEND_MEMBER: Record<BackendType, "mock" | "devFS" | "pci" | "nvidia"> = {
  Mock: "mock",
  DevFS: "devFS",
  PCI: "pci",
  NVIDIA: "nvidia",
};

export const BackendSchema = z
  .object({
    type: z.enum(BACKEND_TYPES).describe("Which backend discovers the devices; its member must be set."),
    mock: MockBackendSchema.optional(),
    devFS: DevFSBackendSchema.optional(),
    pci: PCIBackendSchema.optional(),
    nvidia: NVIDIABackendSchema.optional(),
  })
  .strict()
  .superRefine((backend, ctx) => {
    const want = BACKEND_MEMBER[backend.type];
    if (backend[want] === undefined) {
      ctx.addIssue({
        code: "custom",
        path: [want],
        message: `must be set when type is ${backend.type}`,
      });
    }
    for (const member of Object.values(BACKEND_MEMBER)) {
      if (member !== want && backend[member] !== undefined) {
        ctx.addIssue({
          code: "custom",
          path: [member],
          message: `must not be set when type is ${backend.type}`,
        });
      }
    }
  })
  // The superRefine above as CEL, so the API server refuses the same manifests at the same paths.
  .meta(
    celRules(
      ...BACKEND_TYPES.flatMap((type) => {
        const member = BACKEND_MEMBER[type];
        return [
          {
            rule: `self.type != '${type}' || has(self.${member})`,
            message: `must be set when type is ${type}`,
            fieldPath: `.${member}`,
            reason: "FieldValueRequired" as const,
          },
          {
            rule: `self.type == '${type}' || !has(self.${member})`,
            messageExpression: "'must not be set when type is ' + self.type",
            fieldPath: `.${member}`,
            reason: "FieldValueForbidden" as const,
          },
        ];
      }),
    ),
  );

export const SharingSchema = z
  .object({
    strategy: z.enum(["None", "TimeSlicing"]).default("None"),
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

const labelValue = z
  .string()
  .max(63)
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, "must be a valid label value");

export const TolerationSchema = z
  .object({
    key: z.string().max(316).optional(),
    operator: z.enum(["Exists", "Equal"]).optional(),
    value: z.string().max(63).optional(),
    effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
    tolerationSeconds: z.number().int().optional(),
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
    requests: z.record(z.string(), quantity).optional(),
    limits: z.record(z.string(), quantity).optional(),
  })
  .strict();

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error"] as const;

export const PluginSchema = z
  .object({
    image: z.string().max(1024).default("").describe("Plugin image; empty means the operator's own image."),
    priorityClassName: z.string().max(253).default("system-node-critical"),
    resources: ResourceRequirementsSchema.default({}),
    logLevel: z.enum(LOG_LEVELS).default("info"),
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
  .union([z.number().int().min(1).max(100_000), z.string().regex(new RegExp(PERCENT_PATTERN))], {
    error: MAX_UNAVAILABLE_MESSAGE,
  })
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
        "Surge starts the new plugin beside the old one; Replace stops the old one first; Auto surges where the node's kubelet can take it (v1.37.0 and later) and replaces elsewhere.",
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
      .strict(),
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
    deviceClass: DRADeviceClassSchema.default({ selectors: [] }),
  })
  .strict();
export type DRA = z.infer<typeof DRASchema>;

/**
 * The driver name a resource name gives when `spec.dra.driverName` is unset: `<name>.<domain>`, as DRA
 * drivers are named (`gpu.nvidia.com` for `nvidia.com/gpu`). It may not be a valid driver name (upper
 * case, `_`, too long): `checkDefaultDriverName` says so, and the spec must name one then. Pure.
 */
export function defaultDriverName(resourceName: string): string {
  const slash = resourceName.indexOf("/");
  return `${resourceName.slice(slash + 1)}.${resourceName.slice(0, slash)}`;
}

/** Why the default driver name of a resource name cannot be used, or undefined when it can. Pure. */
export function checkDefaultDriverName(resourceName: string): string | undefined {
  const name = defaultDriverName(resourceName);
  if (name.length <= DRA_DRIVER_NAME_MAX_LENGTH && DNS_SUBDOMAIN.test(name)) return undefined;
  return `must be set: the default ${JSON.stringify(name)} from the resource name is not a lowercase DNS subdomain of at most ${DRA_DRIVER_NAME_MAX_LENGTH} characters`;
}

/** The DRA driver name a spec publishes under. */
export function draDriverName(spec: Pick<DevicePluginConfigSpec, "resourceName" | "dra">): string {
  return spec.dra?.driverName ?? defaultDriverName(spec.resourceName);
}

/** The DeviceClass a spec's operator owns. */
export function draDeviceClassName(spec: Pick<DevicePluginConfigSpec, "resourceName" | "dra">): string {
  return spec.dra?.deviceClass.name ?? draDriverName(spec);
}

/** The default driver name as CEL: `<name>.<domain>` of resourceName (which has exactly one '/'). */
const DEFAULTED_DRIVER_CEL =
  "(self.resourceName.substring(self.resourceName.indexOf('/') + 1) + '.' + self.resourceName.substring(0, self.resourceName.indexOf('/')))";

/** With publish DRA and no driver name, the default one must be a valid driver name (CEL at spec level). */
export const DRA_DEFAULT_DRIVER_RULE = `!has(self.publish) || self.publish != 'DRA' || (has(self.dra) && has(self.dra.driverName)) || !self.resourceName.contains('/') || (size(${DEFAULTED_DRIVER_CEL}) <= ${DRA_DRIVER_NAME_MAX_LENGTH} && ${DEFAULTED_DRIVER_CEL}.matches('${DNS_SUBDOMAIN_CEL_PATTERN}'))`;

const DRA_TIME_SLICING_MESSAGE =
  "must not be TimeSlicing when publish is DRA: pods share a DRA device by sharing one ResourceClaim";

/**
 * The CEL rules of `publish` and `dra` at the spec's level, shared by both API versions: `timeSlicing` is
 * the version's CEL for "the spec shares devices by time-slicing", `sharingField` the field to name.
 */
export function publishCelRules(timeSlicing: string, sharingField: string): CelRule[] {
  return [
    {
      rule: DRA_DEFAULT_DRIVER_RULE,
      messageExpression: `'must be set: the default "' + ${DEFAULTED_DRIVER_CEL} + '" from the resource name is not a lowercase DNS subdomain of at most ${DRA_DRIVER_NAME_MAX_LENGTH} characters'`,
      fieldPath: ".dra.driverName",
      reason: "FieldValueRequired",
    },
    {
      rule: `!has(self.publish) || self.publish != 'DRA' || !(${timeSlicing})`,
      message: DRA_TIME_SLICING_MESSAGE,
      fieldPath: sharingField,
    },
  ];
}

/** The zod side of publishCelRules, naming the same fields; `sharing` is the version's own reading. */
export function checkPublish(
  spec: {
    resourceName: string;
    publish?: PublishMode | undefined;
    dra?: { driverName?: string | undefined } | undefined;
  },
  timeSlicing: boolean,
  ctx: z.RefinementCtx,
  sharingPath: (string | number)[],
): void {
  if (spec.publish !== "DRA") return;
  // As the CEL rule: judged whenever the resource name has a '/', even one with its own problems (the API
  // server runs the spec's rules over a resource name that failed its own), so both name the same fields.
  if (spec.dra?.driverName === undefined && spec.resourceName.includes("/")) {
    const problem = checkDefaultDriverName(spec.resourceName);
    if (problem !== undefined)
      ctx.addIssue({ code: "custom", path: ["dra", "driverName"], message: problem });
  }
  if (timeSlicing) {
    ctx.addIssue({ code: "custom", path: sharingPath, message: DRA_TIME_SLICING_MESSAGE });
  }
}

/** An extended resource name, with the rules of the kubelet and the API server; shared by both API versions. */
export const ResourceNameSchema = z
  .string()
  .max(316)
  .superRefine((name, ctx) => {
    const problem = checkExtendedResourceName(name);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  })
  .describe("Extended resource name the kubelet advertises, <domain>/<name>. Immutable.")
  // For the API server only: a zod .regex() here would report each bad name twice in `dpo validate`.
  .meta({
    pattern: EXTENDED_RESOURCE_NAME_PATTERN,
    ...celRules(
      {
        rule: "!self.contains('/') || self.indexOf('/') <= 244",
        message:
          "domain must be a DNS subdomain of at most 244 characters (requests.<domain> must stay a DNS subdomain)",
      },
      {
        rule: "!self.contains('kubernetes.io/')",
        message: "must not be in the kubernetes.io domain (reserved for Kubernetes resources)",
      },
      { rule: "!self.startsWith('requests.')", message: "must not start with 'requests.'" },
      { rule: "self == oldSelf", message: "is immutable" },
    ),
  });

export const DevicePluginConfigSpecSchema = z
  .object({
    resourceName: ResourceNameSchema,
    backend: BackendSchema,
    sharing: SharingSchema.default({ strategy: "None", failRequestsGreaterThanOne: false }),
    topology: TopologySchema.default({ allocationPolicy: "None" }),
    cdi: CDISchema.default({ enabled: false }),
    nodeSelector: mapOf(labelValue, 316).default({}),
    tolerations: listOf(TolerationSchema, 64).default([]),
    plugin: PluginSchema.default({
      image: "",
      priorityClassName: "system-node-critical",
      resources: {},
      logLevel: "info",
    }),
    upgrade: UpgradeSchema.default(UPGRADE_DEFAULTS),
    publish: z
      .enum(PUBLISH_MODES)
      .default("DevicePlugin")
      .describe(
        "DevicePlugin: the kubelet advertises the devices as an extended resource. DRA: the plugin publishes them in ResourceSlices for ResourceClaims (resource.k8s.io/v1).",
      ),
    dra: DRASchema.optional().describe(
      "DRA settings, read when publish is DRA (kept otherwise, so switching is one field).",
    ),
  })
  .strict()
  .superRefine((spec, ctx) =>
    checkPublish(spec, spec.sharing.strategy === "TimeSlicing", ctx, ["sharing", "strategy"]),
  )
  .meta(
    celRules(
      ...publishCelRules(
        "has(self.sharing) && has(self.sharing.strategy) && self.sharing.strategy == 'TimeSlicing'",
        ".sharing.strategy",
      ),
    ),
  );

export type DevicePluginConfigSpec = z.infer<typeof DevicePluginConfigSpecSchema>;
export type DevicePluginConfigSpecInput = z.input<typeof DevicePluginConfigSpecSchema>;
export type MockBackend = z.infer<typeof MockBackendSchema>;
export type DevFSBackend = z.infer<typeof DevFSBackendSchema>;
export type DevFSPath = z.infer<typeof DevFSPathSchema>;
export type PCIBackend = z.infer<typeof PCIBackendSchema>;
export type NVIDIABackend = z.infer<typeof NVIDIABackendSchema>;
export type Sharing = z.infer<typeof SharingSchema>;
export type Toleration = z.infer<typeof TolerationSchema>;
export type LogLevel = (typeof LOG_LEVELS)[number];
