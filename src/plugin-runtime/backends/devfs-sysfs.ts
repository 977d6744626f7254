// What sysfs says of a DevFS device node: the kernel device behind it (found by the node's name in
// /sys/class, or by its major:minor in /sys/dev), the device above that (`device` link) and the PCI
// function it hangs off, for grouping nodes into devices and for the standard locality attributes.
import { readFile, readdir, realpath, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import type { DevFSGroupKey } from "../../api/v1beta1/devfs-groups.js";
import { PCI_ADDRESS } from "./sysfs-pci.js";

/** Where a node sits in sysfs; members undefined when sysfs does not say. */
export interface NodeSysfs {
  /** The name of the device above the node's own (`/sys/class/drm/renderD128/device` → `0000:c1:00.0`). */
  readonly parent: string | undefined;
  /** The PCI function nearest above the node (`0000:c1:00.0`). */
  readonly pciAddress: string | undefined;
  /** That function's vendor id, lowercase without `0x` (`1002`). */
  readonly pciVendor?: string | undefined;
}

/** The nearest PCI function in a resolved sysfs device path, walking up from its end. Pure. */
export function pciAddressInPath(devicePath: string): string | undefined {
  const parts = devicePath.split("/");
  for (let i = parts.length - 1; i >= 0; i--) if (PCI_ADDRESS.test(parts[i]!)) return parts[i];
  return undefined;
}

/** The group key of a node from what sysfs says; undefined when sysfs does not say. Pure. */
export function sysfsGroupKey(key: Exclude<DevFSGroupKey, "Pattern">, node: NodeSysfs): string | undefined {
  switch (key) {
    case "SysfsParent":
      return node.parent;
    case "PCIAddress":
      return node.pciAddress;
    case "PCISlot":
      // 0000:65:00.1 → 0000:65:00: the management and user functions of one card share it.
      return node.pciAddress?.slice(0, -2);
  }
}

/**
 * The key of a node under `groupBy.key: Pattern`: the first capture group of `pattern` matched against
 * the node's path; undefined when it does not match or the group is empty. Pure.
 */
export function patternGroupKey(pattern: RegExp, containerPath: string): string | undefined {
  const group = pattern.exec(containerPath)?.[1];
  return group === undefined || group === "" ? undefined : group;
}

/** `/sys/class/<class>/<name>` for every class entry: how a node's name leads to its kernel device. */
export async function classEntries(sysfsRoot: string): Promise<Map<string, string>> {
  const byName = new Map<string, string>();
  const classDir = join(sysfsRoot, "class");
  const classes = await readdir(classDir).catch(() => [] as string[]);
  for (const name of classes.sort()) {
    for (const entry of (await readdir(join(classDir, name)).catch(() => [] as string[])).sort()) {
      if (!byName.has(entry)) byName.set(entry, join(classDir, name, entry));
    }
  }
  return byName;
}

/** Linux's major and minor of a device number (new_decode_dev). Pure. */
export function decodeDeviceNumber(rdev: number): { major: number; minor: number } {
  const value = BigInt(rdev);
  const major = Number(((value >> 8n) & 0xfffn) | ((value >> 32n) & ~0xfffn));
  const minor = Number((value & 0xffn) | ((value >> 12n) & ~0xffn));
  return { major, minor };
}

/**
 * The node's kernel device directory in sysfs, resolved: the class entry named like the node
 * (`/dev/dri/renderD128` → `/sys/class/drm/renderD128`), else `/sys/dev/char|block/<major>:<minor>`.
 */
async function kernelDevice(
  sysfsRoot: string,
  byName: ReadonlyMap<string, string>,
  hostPath: string,
): Promise<string | undefined> {
  const entry = byName.get(basename(hostPath));
  if (entry !== undefined) return realpath(entry).catch(() => undefined);
  try {
    const info = await stat(hostPath);
    const kind = info.isCharacterDevice() ? "char" : info.isBlockDevice() ? "block" : undefined;
    if (kind === undefined) return undefined;
    const { major, minor } = decodeDeviceNumber(info.rdev);
    return await realpath(join(sysfsRoot, "dev", kind, `${major}:${minor}`));
  } catch {
    return undefined;
  }
}

/** Reads where the node at `hostPath` sits in sysfs; never throws. */
export async function readNodeSysfs(
  sysfsRoot: string,
  byName: ReadonlyMap<string, string>,
  hostPath: string,
): Promise<NodeSysfs> {
  const device = await kernelDevice(sysfsRoot, byName, hostPath);
  if (device === undefined) return { parent: undefined, pciAddress: undefined };
  const parent = await realpath(join(device, "device")).catch(() => undefined);
  const pciAddress = pciAddressInPath(parent ?? device);
  const vendor =
    pciAddress === undefined
      ? undefined
      : await readFile(join(sysfsRoot, "bus", "pci", "devices", pciAddress, "vendor"), "utf8").catch(
          () => undefined,
        );
  return {
    parent: parent === undefined ? undefined : basename(parent),
    pciAddress,
    pciVendor: vendor?.trim().toLowerCase().replace(/^0x/, ""),
  };
}
