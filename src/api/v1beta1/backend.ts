// The backends of the v1beta1 spec, which discover the devices on a node: a `type` discriminator with one
// optional member per backend, so the CRD schema stays structural.
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import { DEVFS_GROUP_CEL_RULES, DEVFS_GROUP_FIELDS, refineDevFSGroups } from "./devfs-groups.js";
import { absolutePath, listOf, mapOf } from "./fields.js";

/** A device id as the kubelet sees it: no whitespace, no commas (ids are joined into env values). */
const idPrefix = z
  .string()
  .min(1)
  .max(48)
  .regex(/^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$/, "must be lowercase alphanumerics, '-', '_' or '.'");

/**
 * A device id another plugin gives a device, as the kubelet takes it: letters, digits, '-', '_' and '.',
 * starting and ending with a letter or digit (no whitespace or commas: ids are joined into env values).
 */
const foreignId = z
  .string()
  .min(1)
  .max(128)
  .regex(
    /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/,
    "must be letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
  );

export const MockBackendSchema = z
  .object({
    devices: z.number().int().min(1).max(4096).describe("Number of simulated physical devices."),
    idPrefix: idPrefix.default("mock").describe("Prefix of device ids: <idPrefix>-<index>."),
    ids: listOf(foreignId, 4096)
      .meta({ "x-kubernetes-list-type": "set" })
      .optional()
      .describe(
        "The id of each device, in order, instead of <idPrefix>-<index>: one per device, each once (for example the ids of the plugin a takeover replaces).",
      ),
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
  .strict()
  .superRefine((mock, ctx) => {
    if (mock.ids === undefined) return;
    if (mock.ids.length !== mock.devices)
      ctx.addIssue({
        code: "custom",
        path: ["ids"],
        message: `must have one id per device (${mock.devices}), not ${mock.ids.length}`,
      });
    const seen = new Set<string>();
    mock.ids.forEach((id, index) => {
      // The API server's own check of a list of type set, with its words.
      if (seen.has(id))
        ctx.addIssue({ code: "custom", path: ["ids", index], message: `Duplicate value: "${id}"` });
      seen.add(id);
    });
  })
  .meta(
    celRules({
      rule: "!has(self.ids) || size(self.ids) == self.devices",
      message: "must have one id per device",
      fieldPath: ".ids",
    }),
  );

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

/** The DevFS settings v1alpha1 knows: every path a glob matches is one device. */
export const DevFSBackendV1alpha1Schema = z
  .object({
    root: absolutePath.default("/").describe("Host directory the globs are resolved under."),
    paths: listOf(DevFSPathSchema, 64)
      .min(1)
      .describe("Globs of device files; every path a glob matches is one device."),
  })
  .strict();

/** v1beta1's DevFS settings: v1alpha1's, plus sysfs, device groups and shared nodes (ADR 0010). */
export const DevFSBackendSchema = DevFSBackendV1alpha1Schema.extend(DEVFS_GROUP_FIELDS)
  .strict()
  .superRefine(refineDevFSGroups)
  .meta(celRules(...DEVFS_GROUP_CEL_RULES));

/** The PCI settings v1alpha1 knows. */
export const PCIBackendV1alpha1Schema = z
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

const pciAddress = z
  .string()
  .regex(
    /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/,
    "must be a PCI address in lowercase domain:bus:device.function form, e.g. 0000:3b:00.0",
  );

/** v1beta1's PCI settings: v1alpha1's, plus the driver and SR-IOV physical-function selectors. */
export const PCIBackendSchema = PCIBackendV1alpha1Schema.extend({
  drivers: listOf(
    z
      .string()
      .min(1)
      .max(64)
      .regex(/^[A-Za-z0-9_.-]+$/, "must be a kernel driver name, e.g. vfio-pci or iavf"),
    16,
  )
    .optional()
    .describe("Kernel drivers a function must be bound to (vfio-pci, iavf, mlx5_core); unset: any or none."),
  physicalFunctions: listOf(pciAddress, 64)
    .optional()
    .describe(
      "Only SR-IOV virtual functions of these physical functions (PCI addresses, as the VF's physfn link names them); unset: any function.",
    ),
}).strict();

/**
 * The XIDs NVIDIA documents as caused by the application rather than the GPU (13 graphics engine
 * exception, 31 MMU fault, 43 channel stopped, 45 preemptive cleanup, 68 video processor exception,
 * 109 context switch timeout): NVIDIA's own device plugin skips the same ones by default.
 */
export const DEFAULT_IGNORED_XIDS = [13, 31, 43, 45, 68, 109] as const;

/** How MIG-enabled GPUs are offered, as NVIDIA's device plugin names its `--mig-strategy` values. */
export const MIG_STRATEGIES = ["None", "Single", "Mixed"] as const;

/**
 * A MIG profile as nvidia-smi names it: `<n>g.<m>gb`, a compute-instance prefix (`1c.3g.20gb`) and an
 * attribute suffix (`1g.10gb+me`, `1g.24gb+me.all`) allowed.
 */
export const MIG_PROFILE_PATTERN = /^([1-9][0-9]*c\.)?[1-9][0-9]*g\.[1-9][0-9]*gb(\+[a-z]+(\.[a-z]+)*)?$/;

export const MIGSchema = z
  .object({
    strategy: z
      .enum(MIG_STRATEGIES)
      .default("None")
      .describe(
        "None: a GPU in MIG mode is reported unhealthy (MIGEnabled) and its MIG devices are not offered. Single: every GPU of the node has MIG on with one MIG profile, and the MIG devices are offered under this config's resource name. Mixed: this config offers the MIG devices of one profile (mig.profile), or with no profile the GPUs that have MIG off; one config per resource name, as NVIDIA's plugin names them (nvidia.com/mig-1g.10gb). See docs/adr/0007.",
      ),
    profile: z
      .string()
      .max(32)
      .regex(MIG_PROFILE_PATTERN, "must be a MIG profile as nvidia-smi -L prints it, e.g. 1g.10gb or 3g.40gb")
      .optional()
      .describe(
        "With strategy Mixed: the MIG profile whose devices this config offers (1g.10gb, 3g.40gb, 1g.10gb+me); unset: the whole GPUs that have MIG off. Only with strategy Mixed.",
      ),
  })
  .strict()
  .superRefine((mig, ctx) => {
    if (mig.profile !== undefined && mig.strategy !== "Mixed") {
      ctx.addIssue({
        code: "custom",
        path: ["profile"],
        message: `must not be set when strategy is ${mig.strategy} (a profile selects the MIG devices of one resource only with strategy Mixed)`,
      });
    }
  })
  .meta(
    celRules({
      rule: "!has(self.profile) || (has(self.strategy) && self.strategy == 'Mixed')",
      message:
        "must not be set unless strategy is Mixed (a profile selects the MIG devices of one resource only with strategy Mixed)",
      fieldPath: ".profile",
      reason: "FieldValueForbidden" as const,
    }),
  );

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
    kmsgPath: absolutePath
      .optional()
      .describe(
        "The kernel log device to read XID events (NVRM: Xid lines) from, normally /dev/kmsg; no dmesg binary is needed. Unset (and no dmesgPath): nvidia-smi polling only. Needs CAP_SYSLOG where kernel.dmesg_restrict is 1.",
      ),
    dmesgPath: absolutePath
      .optional()
      .describe(
        "Deprecated: use kmsgPath (the release image has no dmesg binary). A dmesg binary to read XID events from the kernel log; still honoured when kmsgPath is unset. Needs CAP_SYSLOG.",
      ),
    ignoredXids: listOf(z.number().int().min(1).max(65535), 64)
      .default([...DEFAULT_IGNORED_XIDS])
      .describe("XIDs that do not make a GPU unhealthy (application errors)."),
    mig: MIGSchema.optional().describe(
      "MIG (Multi-Instance GPU): whether and how MIG devices are offered; unset: strategy None.",
    ),
  })
  .strict()
  .refine((nvidia) => nvidia.kmsgPath === undefined || nvidia.dmesgPath === undefined, {
    path: ["dmesgPath"],
    message: "set kmsgPath or the deprecated dmesgPath, not both",
  })
  // The same at admission, so the API server refuses what dpo validate refuses.
  .meta(
    celRules({
      rule: "!has(self.kmsgPath) || !has(self.dmesgPath)",
      message: "set kmsgPath or the deprecated dmesgPath, not both",
      fieldPath: ".dmesgPath",
    }),
  );

/** The descriptions of the backend members both API versions have, for `kubectl explain`. */
export const MOCK_DESCRIPTION =
  "Settings of the Mock backend (type Mock): simulated devices, for tests and demos; health from a file.";
export const DEVFS_DESCRIPTION =
  "Settings of the DevFS backend (type DevFS): device files such as serial ports, found by globs under a root.";
export const PCI_DESCRIPTION =
  "Settings of the PCI backend (type PCI): PCI functions found in sysfs by vendor, device and class.";

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
    mock: MockBackendSchema.optional().describe(MOCK_DESCRIPTION),
    devFS: DevFSBackendSchema.optional().describe(DEVFS_DESCRIPTION),
    pci: PCIBackendSchema.optional().describe(PCI_DESCRIPTION),
    nvidia: NVIDIABackendSchema.optional().describe(
      "Settings of the NVIDIA backend (type NVIDIA): GPUs found and checked for health with nvidia-smi and, optionally, XID events from the kernel log.",
    ),
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

export type MockBackend = z.infer<typeof MockBackendSchema>;
export type DevFSBackend = z.infer<typeof DevFSBackendSchema>;
export type DevFSPath = z.infer<typeof DevFSPathSchema>;
export type PCIBackend = z.infer<typeof PCIBackendSchema>;
export type NVIDIABackend = z.infer<typeof NVIDIABackendSchema>;
export type MIG = z.infer<typeof MIGSchema>;
export type MIGStrategy = (typeof MIG_STRATEGIES)[number];
