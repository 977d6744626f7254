// CEL rules of v1beta1's DevFS device groups (ADR 0010): sysfsRoot where grouping or the vendor filter
// reads sysfs, and one slot per path entry when nodes are grouped.
import { DEVFS_GROUP_CEL_RULES } from "../../../src/api/v1beta1/devfs-groups.js";
import type { CelHandler } from "./cel-rules.js";
import { isObject, type Json } from "./json.js";

const [vendorRule, sysfsRule, slotsRule] = DEVFS_GROUP_CEL_RULES.map((r) => r.rule);

function exactRule(rule: string | undefined): RegExp {
  if (rule === undefined)
    throw new Error("config-gen: DEVFS_GROUP_CEL_RULES changed; update cel-rules-devfs.ts");
  return new RegExp(`^${rule.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`);
}

const groupedBySysfs = (value: Json): boolean =>
  isObject(value) && isObject(value.groupBy) && value.groupBy.key !== "Pattern";

export const DEVFS_GROUP_CEL_HANDLERS: CelHandler[] = [
  {
    rule: exactRule(vendorRule),
    satisfy(value) {
      if (isObject(value) && value.pciVendor !== undefined && value.sysfsRoot === undefined)
        value.sysfsRoot = "/sys";
      return value;
    },
    violate(value) {
      if (!isObject(value)) return undefined;
      value.pciVendor = "1002";
      delete value.sysfsRoot;
      return { value, what: "pciVendor without sysfsRoot" };
    },
  },
  {
    rule: exactRule(sysfsRule),
    satisfy(value) {
      if (isObject(value) && groupedBySysfs(value) && value.sysfsRoot === undefined) value.sysfsRoot = "/sys";
      return value;
    },
    violate(value) {
      if (!isObject(value) || value.pciVendor !== undefined) return undefined;
      value.groupBy = { key: "PCIAddress" };
      delete value.sysfsRoot;
      return { value, what: "groupBy PCIAddress without sysfsRoot" };
    },
  },
  {
    rule: exactRule(slotsRule),
    satisfy(value) {
      if (!isObject(value) || value.groupBy === undefined || !Array.isArray(value.paths)) return value;
      for (const path of value.paths) if (isObject(path)) path.maxContainersPerDevice = 1;
      return value;
    },
    violate(value) {
      if (!isObject(value) || !Array.isArray(value.paths) || !isObject(value.paths[0])) return undefined;
      value.groupBy = { key: "Pattern", pattern: "/dev/accel(\\d+)" };
      value.paths[0].maxContainersPerDevice = 2;
      return { value, what: "groupBy with maxContainersPerDevice 2" };
    },
  },
];
