// Where a PCI function sits, as sysfs says it: its NUMA node and its PCIe root complex, read the way
// k8s.io/dynamic-resource-allocation's deviceattribute package reads them, so dpo publishes the standard
// attributes `resource.kubernetes.io/numaNode` and `resource.kubernetes.io/pcieRoot` with the values
// upstream drivers publish for the same device.
import { readFile, readlink } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, normalize, relative } from "node:path";
import { STANDARD_PCIE_ROOT_ATTRIBUTE } from "../devices/attributes.js";

/** Extended BDF notation (domain:bus:device.function), lowercase, as sysfs names PCI functions. */
export const PCI_ADDRESS = /^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/;

/** sysfs `numa_node`: a node number, or -1 (or garbage) when the platform does not say. Pure. */
export function parseNumaNode(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number.parseInt(text.trim(), 10);
  return Number.isInteger(value) && value >= 0 ? value : undefined;
}

/**
 * The PCIe root complex of `address` from the target of the link `/sys/bus/pci/devices/<address>`:
 * the first directory under `/sys/devices` (`../../../devices/pci0000:00/0000:00:01.0/0000:3b:00.0` →
 * `pci0000:00`). Undefined where upstream's resolvePCIeRoot fails: an address not in extended BDF form,
 * a target outside `devices/pci*`, or one that does not end in the address. Pure.
 */
export function pcieRootFromLink(address: string, linkTarget: string): string | undefined {
  if (!PCI_ADDRESS.test(address)) return undefined;
  const link = join("bus", "pci", "devices", address);
  // Relative to the sysfs root, as upstream resolves it over an fs.FS rooted there.
  const target = isAbsolute(linkTarget)
    ? relative("/sys", normalize(linkTarget))
    : normalize(join(dirname(link), linkTarget));
  if (!target.startsWith(join("devices", "pci"))) return undefined;
  if (basename(target) !== address) return undefined;
  return target.split("/")[1];
}

/** What sysfs says of where a PCI function sits; each member undefined when sysfs does not say. */
export interface PciLocality {
  readonly numaNode: number | undefined;
  readonly pcieRoot: string | undefined;
}

/** Reads `numa_node` and the root complex of `address` under `sysfsRoot`; never throws. */
export async function readPciLocality(sysfsRoot: string, address: string): Promise<PciLocality> {
  const link = join(sysfsRoot, "bus", "pci", "devices", address);
  const [numaText, target] = await Promise.all([
    readFile(join(link, "numa_node"), "utf8").catch(() => undefined),
    readlink(link).catch(() => undefined),
  ]);
  return {
    numaNode: parseNumaNode(numaText),
    pcieRoot: target === undefined ? undefined : pcieRootFromLink(address, target),
  };
}

/** The standard attribute for a known root complex, to merge into a device's attributes. Pure. */
export function pcieRootAttribute(pcieRoot: string | undefined): Record<string, string> {
  return pcieRoot === undefined ? {} : { [STANDARD_PCIE_ROOT_ATTRIBUTE]: pcieRoot };
}
