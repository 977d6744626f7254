// DevFS device groups (ADR 0010): the nodes the globs match, put together by a key (their sysfs parent,
// PCI function or slot, or a name pattern) into one device each, healthy when every glob contributed a
// node of the right type; and the shared nodes every container of the resource gets besides.
import { join } from "node:path";
import type { DevFSBackend } from "../../api/v1beta1/spec.js";
import type { ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import { pcieRootAttribute, type PciLocality } from "./sysfs-pci.js";

/** A grouped device with a `paths` entry that matched none of its nodes. */
export const REASON_INCOMPLETE_GROUP = "IncompleteGroup";
/** A `sharedPaths` glob matched nothing: no container of the resource would work. */
export const REASON_SHARED_PATH_MISSING = "SharedPathMissing";
/** Reason of a matched path that is not the configured file type (say, a regular file where a char device belongs). */
export const REASON_WRONG_FILE_TYPE = "WrongFileType";

/** A matched node (a DevFSMatch) with the key of its group; undefined when none could be found for it. */
export interface KeyedMatch {
  /** Index of the `paths` entry whose glob matched. */
  readonly pathIndex: number;
  /** The path as the glob names it, without the root (`/dev/dri/renderD128`). */
  readonly containerPath: string;
  /** What the path turned out to be (CharDevice, BlockDevice, File, Directory, Other). */
  readonly observed: string;
  readonly key: string | undefined;
}

/** A device and every node it is made of, sorted by path. */
export interface DevFSGroupDevice {
  readonly device: PhysicalDevice;
  readonly specs: readonly ContainerDeviceSpec[];
  /** The PCI function of its first node, for the locality attributes; undefined when unknown. */
  readonly pciAddress: string | undefined;
}

/** A group key as a device id: anything outside [A-Za-z0-9_.-] becomes `_` (`0000:c1:00.0` → `0000_c1_00.0`). Pure. */
export function groupDeviceId(key: string): string {
  return key.replace(/[^A-Za-z0-9_.-]/g, "_");
}

/**
 * One device per key, made of every node with that key (a path matched by two globs counts once, for the
 * first); matches without a key are returned apart. Healthy when every `paths` entry matched a node of
 * the group and every node is its entry's type. `pciAddresses` gives each node's PCI function. Pure.
 */
export function groupDevfsDevices(
  config: DevFSBackend,
  matches: readonly KeyedMatch[],
  pciAddresses: ReadonlyMap<string, string | undefined> = new Map(),
): { devices: DevFSGroupDevice[]; unkeyed: KeyedMatch[] } {
  const unkeyed: KeyedMatch[] = [];
  const groups = new Map<string, KeyedMatch[]>();
  const seen = new Set<string>();
  for (const match of matches) {
    if (seen.has(match.containerPath)) continue;
    seen.add(match.containerPath);
    if (match.key === undefined) {
      unkeyed.push(match);
      continue;
    }
    const id = groupDeviceId(match.key);
    groups.set(id, [...(groups.get(id) ?? []), match]);
  }
  const devices: DevFSGroupDevice[] = [];
  for (const [id, members] of groups) {
    const sorted = [...members].sort((a, b) =>
      a.containerPath.localeCompare(b.containerPath, "en", { numeric: true }),
    );
    const wrongType = sorted.some((m) => m.observed !== config.paths[m.pathIndex]?.type);
    const complete = config.paths.every((_, index) => sorted.some((m) => m.pathIndex === index));
    const reason = !complete ? REASON_INCOMPLETE_GROUP : wrongType ? REASON_WRONG_FILE_TYPE : "";
    const paths = sorted.map((m) => m.containerPath);
    devices.push({
      device: {
        id,
        numaNode: undefined,
        health: reason === "" ? "Healthy" : "Unhealthy",
        reason,
        attributes: { group: sorted[0]!.key!, nodes: String(paths.length), paths: paths.join(",") },
      },
      specs: sorted.map((m) => ({
        containerPath: m.containerPath,
        hostPath: join(config.root, m.containerPath),
        permissions: config.paths[m.pathIndex]?.permissions ?? "rw",
      })),
      pciAddress: pciAddresses.get(sorted[0]!.containerPath),
    });
  }
  devices.sort((a, b) => a.device.id.localeCompare(b.device.id, "en", { numeric: true }));
  return { devices, unkeyed };
}

/** The device with the NUMA node and PCIe root sysfs gives for its PCI function. Pure. */
export function withLocality(device: PhysicalDevice, locality: PciLocality | undefined): PhysicalDevice {
  if (locality === undefined) return device;
  return {
    ...device,
    numaNode: device.numaNode ?? locality.numaNode,
    attributes: { ...device.attributes, ...pcieRootAttribute(locality.pcieRoot) },
  };
}

/** The device unhealthy for a missing shared node, unless it already is for a reason of its own. Pure. */
export function withSharedNodes(device: PhysicalDevice, missing: readonly string[]): PhysicalDevice {
  if (missing.length === 0 || device.health === "Unhealthy") return device;
  return { ...device, health: "Unhealthy", reason: REASON_SHARED_PATH_MISSING };
}

/** The nodes of `specs` once each (by host path), in the order given. Pure. */
export function uniqueNodes(specs: Iterable<ContainerDeviceSpec>): ContainerDeviceSpec[] {
  const byHostPath = new Map<string, ContainerDeviceSpec>();
  for (const spec of specs) if (!byHostPath.has(spec.hostPath)) byHostPath.set(spec.hostPath, spec);
  return [...byHostPath.values()];
}
