// Turns physical devices into the devices the kubelet sees: one each, or `replicas` time-sliced ids each.
import type { Sharing } from "../../api/v1beta1/spec.js";
import type { AdvertisedDevice, PhysicalDevice } from "./types.js";

/** Separates the physical id from the replica index in a time-sliced id: `<physical>::<k>`. */
export const REPLICA_SEPARATOR = "::";

// Bounded so the index stays an exact integer; replicas are at most 1024.
const REPLICA_INDEX = /^(0|[1-9][0-9]{0,8})$/;

/** How many advertised devices each physical device becomes under this sharing configuration. */
export function replicasPerDevice(sharing: Sharing): number {
  if (sharing.strategy !== "TimeSlicing") return 1;
  // The schema guarantees replicas >= 2 here; stay total for configs built without it.
  return Math.max(1, Math.floor(sharing.replicas ?? 1));
}

/** The id the kubelet sees for replica `replica` of a physical device under time-slicing. */
export function replicaId(physicalId: string, replica: number): string {
  return `${physicalId}${REPLICA_SEPARATOR}${replica}`;
}

/**
 * Advertised devices in a stable order (physical order, then replica index), so every ListAndWatch
 * message lists the same devices the same way. Health, reason and NUMA node follow the physical
 * device: a time-sliced replica is exactly as healthy as the hardware under it. A physical id seen
 * twice is advertised once (the first wins), because the kubelet keys devices by id.
 */
export function advertiseDevices(physical: readonly PhysicalDevice[], sharing: Sharing): AdvertisedDevice[] {
  const timeSliced = sharing.strategy === "TimeSlicing";
  const replicas = replicasPerDevice(sharing);
  const seen = new Set<string>();
  const advertised: AdvertisedDevice[] = [];
  for (const device of physical) {
    if (seen.has(device.id)) continue;
    seen.add(device.id);
    for (let replica = 0; replica < replicas; replica++) {
      advertised.push({
        id: timeSliced ? replicaId(device.id, replica) : device.id,
        physicalId: device.id,
        replica,
        numaNode: device.numaNode,
        health: device.health,
        reason: device.reason,
      });
    }
  }
  return advertised;
}

/** Indexes advertised devices by the id the kubelet uses. */
export function indexAdvertisedDevices(devices: readonly AdvertisedDevice[]): Map<string, AdvertisedDevice> {
  return new Map(devices.map((device) => [device.id, device]));
}

export interface ParsedAdvertisedId {
  readonly physicalId: string;
  /** Replica index, or undefined when the id carries none (no time-slicing). */
  readonly replica: number | undefined;
}

/**
 * Splits `<physical>::<k>` at the last separator. An id without a numeric replica suffix is a
 * physical id as is; PCI addresses contain single colons, which never match the separator.
 * Prefer the advertised device map when it is at hand: this only reads the id's shape.
 */
export function parseAdvertisedId(advertisedId: string): ParsedAdvertisedId {
  const at = advertisedId.lastIndexOf(REPLICA_SEPARATOR);
  if (at > 0) {
    const suffix = advertisedId.slice(at + REPLICA_SEPARATOR.length);
    if (REPLICA_INDEX.test(suffix)) {
      return { physicalId: advertisedId.slice(0, at), replica: Number(suffix) };
    }
  }
  return { physicalId: advertisedId, replica: undefined };
}

/** The physical device behind an advertised id (the id itself without time-slicing). */
export function physicalIdOf(advertisedId: string): string {
  return parseAdvertisedId(advertisedId).physicalId;
}
