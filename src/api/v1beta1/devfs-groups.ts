// The DevFS fields v1beta1 adds to v1alpha1's (ADR 0010): where sysfs is, how the matched device nodes
// are grouped into devices (one GPU = a card node and a render node, one FPGA = its management and user
// nodes), and the nodes every container of the resource gets besides its devices (`/dev/kfd`).
import { z } from "zod";
import type { CelRule } from "./cel.crd.js";
import { celRules } from "./cel.crd.js";
import { absolutePath, listOf } from "./fields.js";

/**
 * What the matched nodes of one device share. SysfsParent: the device sysfs shows above the node
 * (`/sys/class/drm/renderD128/device`); PCIAddress: the PCI function above it (`0000:c1:00.0`); PCISlot:
 * the PCI device without the function (`0000:65:00`, an FPGA whose management and user nodes are two
 * functions of one card); Pattern: the first group of `pattern` matched against the node's path.
 */
export const DEVFS_GROUP_KEYS = ["SysfsParent", "PCIAddress", "PCISlot", "Pattern"] as const;
export type DevFSGroupKey = (typeof DEVFS_GROUP_KEYS)[number];

/** Longest `groupBy.pattern`. */
export const MAX_GROUP_PATTERN_LENGTH = 256;

/**
 * The shape of `groupBy.pattern` the API server checks too: exactly one capture group and no other
 * parentheses (`/dev/accel/accel(\d+)`), the group naming the device.
 */
export const GROUP_PATTERN_SHAPE = /^[^()]*\([^()]+\)[^()]*$/;

/** Why `pattern` does not compile as a regular expression, or undefined. Pure. */
export function groupPatternProblem(pattern: string): string | undefined {
  try {
    new RegExp(pattern);
    return undefined;
  } catch (error) {
    return `must be a regular expression: ${(error as Error).message}`;
  }
}

export const DevFSGroupBySchema = z
  .object({
    key: z
      .enum(DEVFS_GROUP_KEYS)
      .describe(
        "What the nodes of one device share: SysfsParent (the sysfs device above the node), PCIAddress (its PCI function), PCISlot (its PCI device, any function) or Pattern. The first three need sysfsRoot.",
      ),
    pattern: z
      .string()
      .min(1)
      .max(MAX_GROUP_PATTERN_LENGTH)
      .regex(
        GROUP_PATTERN_SHAPE,
        "must have one capture group and no other parentheses: the group names the device, e.g. accel(\\d+)",
      )
      // Beyond the shape, only `dpo validate` and the plugin can tell whether it compiles (ADR 0010).
      .superRefine((pattern, ctx) => {
        const problem = groupPatternProblem(pattern);
        if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
      })
      .optional()
      .describe(
        "With key Pattern: a regular expression matched against each node's path (/dev/...); its first capture group names the device, and nodes with the same name form one device. Only with key Pattern.",
      ),
  })
  .strict()
  .superRefine((groupBy, ctx) => {
    if (groupBy.key === "Pattern" && groupBy.pattern === undefined) {
      ctx.addIssue({ code: "custom", path: ["pattern"], message: "must be set when key is Pattern" });
    }
    if (groupBy.key !== "Pattern" && groupBy.pattern !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["pattern"],
        message: `must not be set when key is ${groupBy.key}`,
      });
    }
  })
  .meta(
    celRules(
      {
        rule: "self.key != 'Pattern' || has(self.pattern)",
        message: "must be set when key is Pattern",
        fieldPath: ".pattern",
        reason: "FieldValueRequired",
      },
      {
        rule: "self.key == 'Pattern' || !has(self.pattern)",
        messageExpression: "'must not be set when key is ' + self.key",
        fieldPath: ".pattern",
        reason: "FieldValueForbidden",
      },
    ),
  );

export const DevFSSharedPathSchema = z
  .object({
    glob: absolutePath.describe(
      "Glob of device files relative to the backend root, e.g. /dev/kfd; every match goes to every container of the resource.",
    ),
    permissions: z
      .string()
      .regex(/^(rw?m?|wm?|m)$/, "must be a combination of r, w and m in that order, e.g. rw")
      .default("rw")
      .describe("cgroup device permissions given to the container."),
  })
  .strict();

/** The fields v1beta1's DevFS settings add to v1alpha1's. */
export const DEVFS_GROUP_FIELDS = {
  sysfsRoot: absolutePath
    .optional()
    .describe(
      "Where sysfs is mounted, e.g. /sys. Set: each device's NUMA node and PCIe root are read for the PCI device above its nodes (published as resource.kubernetes.io/numaNode and pcieRoot), and groupBy may use sysfs.",
    ),
  pciVendor: z
    .string()
    .regex(/^[0-9a-f]{4}$/, "must be a 4-digit lowercase hexadecimal PCI vendor id, e.g. 1002")
    .optional()
    .describe(
      "Only nodes of this vendor's PCI devices (as sysfs shows the function above each node), e.g. 1002 for AMD: a server's on-board VGA card is left out. Needs sysfsRoot.",
    ),
  groupBy: DevFSGroupBySchema.optional().describe(
    "Group the nodes the paths match into devices: one device per group, made of every node in it, healthy when each paths entry matched a node of the right type in it. Unset: every node is a device.",
  ),
  sharedPaths: listOf(DevFSSharedPathSchema, 16)
    .optional()
    .describe(
      "Nodes every container of the resource gets besides its devices' own, e.g. /dev/kfd for AMD GPUs. A glob that matches nothing makes every device unhealthy (SharedPathMissing).",
    ),
};

interface DevFSGroupInput {
  readonly sysfsRoot?: string | undefined;
  readonly pciVendor?: string | undefined;
  readonly groupBy?: { readonly key: DevFSGroupKey } | undefined;
  readonly paths: readonly { readonly maxContainersPerDevice?: number | undefined }[];
}

/** The cross-field rules of a DevFS backend with groups, for `.superRefine`. */
export function refineDevFSGroups(devFS: DevFSGroupInput, ctx: z.RefinementCtx): void {
  if (devFS.pciVendor !== undefined && devFS.sysfsRoot === undefined) {
    ctx.addIssue({ code: "custom", path: ["sysfsRoot"], message: "must be set when pciVendor is set" });
  }
  const key = devFS.groupBy?.key;
  if (key === undefined) return;
  if (key !== "Pattern" && devFS.sysfsRoot === undefined) {
    ctx.addIssue({ code: "custom", path: ["sysfsRoot"], message: `must be set when groupBy.key is ${key}` });
  }
  // Named at `paths`, as the CEL rule (which cannot name one item) names it.
  if (devFS.paths.some((path) => (path.maxContainersPerDevice ?? 1) !== 1)) {
    ctx.addIssue({ code: "custom", path: ["paths"], message: GROUPED_SLOTS_MESSAGE });
  }
}

const GROUPED_SLOTS_MESSAGE =
  "maxContainersPerDevice must be 1 in every entry with groupBy (a group is one device; share it with spec.sharing)";

/** refineDevFSGroups as CEL, so the API server refuses the same manifests at the same paths. */
export const DEVFS_GROUP_CEL_RULES: readonly CelRule[] = [
  {
    rule: "!has(self.pciVendor) || has(self.sysfsRoot)",
    message: "must be set when pciVendor is set",
    fieldPath: ".sysfsRoot",
    reason: "FieldValueRequired",
  },
  {
    rule: "!has(self.groupBy) || self.groupBy.key == 'Pattern' || has(self.sysfsRoot)",
    messageExpression: "'must be set when groupBy.key is ' + self.groupBy.key",
    fieldPath: ".sysfsRoot",
    reason: "FieldValueRequired",
  },
  {
    rule: "!has(self.groupBy) || self.paths.all(p, !has(p.maxContainersPerDevice) || p.maxContainersPerDevice == 1)",
    message: GROUPED_SLOTS_MESSAGE,
    fieldPath: ".paths",
    reason: "FieldValueInvalid",
  },
];
