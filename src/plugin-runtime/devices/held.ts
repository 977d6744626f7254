// Devices the node's other publish path holds after a switch of spec.publish (pure). Pods keep what they
// were given: device-plugin pods their ids after a switch to DRA, DRA pods their claims' devices after the
// way back, and neither the kubelet's device manager nor the DRA allocator knows what the other handed out.
//
// The two paths differ in what the scheduler counts. On the DRA path it allocates from the ResourceSlices
// and never counts device-plugin pods, so the DRA plugin leaves a held device out of its slice. On the
// device-plugin path it counts every pod's `resources.limits[<resourceName>]` against the Node's
// allocatable, DRA pods included, so the device plugin keeps advertising a held device (leaving it out
// would count its holder twice and keep pods Pending) and instead never hands out more of it than the
// holders leave: GetPreferredAllocation picks other devices first and Allocate refuses what is not free.
import type { AdvertisedDevice } from "./types.js";

/**
 * Physical device id → how many of its shares the other path holds: 1 per device without sharing; under
 * time-slicing one per replica id (device plugin) or per claim (DRA). Devices not held are absent.
 */
export type HeldShares = ReadonlyMap<string, number>;

/** Whether two share maps say the same. */
export function sameShares(a: HeldShares | undefined, b: HeldShares): boolean {
  if (a === undefined || a.size !== b.size) return false;
  for (const [id, n] of a) if (b.get(id) !== n) return false;
  return true;
}

/** Counts occurrences: each key once per time it is given. */
export function countShares(physicalIds: Iterable<string>): HeldShares {
  const shares = new Map<string, number>();
  for (const id of physicalIds) shares.set(id, (shares.get(id) ?? 0) + 1);
  return shares;
}

function byReplicaDescending(a: AdvertisedDevice, b: AdvertisedDevice): number {
  return b.replica - a.replica || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * Of the ids the kubelet offers (free in its view), those this path must not hand out: per held physical
 * device, as many of its offered replica ids as the other path holds shares of it, highest replica first.
 * Without sharing, every offered id of a held device. Ids the device map does not know are not counted.
 */
export function heldOfferedIds(
  offered: readonly string[],
  devices: ReadonlyMap<string, AdvertisedDevice>,
  held: HeldShares,
): Set<string> {
  if (held.size === 0) return new Set();
  const byPhysical = new Map<string, AdvertisedDevice[]>();
  const seen = new Set<string>();
  for (const id of offered) {
    if (seen.has(id)) continue;
    seen.add(id);
    const device = devices.get(id);
    if (device === undefined || !held.has(device.physicalId)) continue;
    const list = byPhysical.get(device.physicalId) ?? [];
    list.push(device.id === id ? device : { ...device, id });
    byPhysical.set(device.physicalId, list);
  }
  const out = new Set<string>();
  for (const [physicalId, list] of byPhysical) {
    const shares = held.get(physicalId) ?? 0;
    for (const device of list.sort(byReplicaDescending).slice(0, shares)) out.add(device.id);
  }
  return out;
}

/**
 * The requested ids that would give out more of a held device than its holders leave: for each held
 * physical device in the request, its replicas requested, plus those of it this path already gave
 * (`allocated`, the kubelet's PodResources view, the request's own ids left out), plus the other path's
 * shares, must not pass its advertised replicas. Returns every requested id of each device over.
 */
export function heldConflicts(
  requested: readonly string[],
  devices: ReadonlyMap<string, AdvertisedDevice>,
  held: HeldShares,
  allocated: Iterable<string>,
): string[] {
  if (held.size === 0) return [];
  const mine = new Set(requested);
  const asked = new Map<string, string[]>();
  for (const id of mine) {
    const device = devices.get(id);
    if (device === undefined || !held.has(device.physicalId)) continue;
    asked.set(device.physicalId, [...(asked.get(device.physicalId) ?? []), id]);
  }
  if (asked.size === 0) return [];
  const replicas = new Map<string, number>();
  for (const device of devices.values()) {
    if (asked.has(device.physicalId))
      replicas.set(device.physicalId, (replicas.get(device.physicalId) ?? 0) + 1);
  }
  const given = new Map<string, number>();
  for (const id of allocated) {
    if (mine.has(id)) continue;
    const device = devices.get(id);
    if (device !== undefined && asked.has(device.physicalId)) {
      given.set(device.physicalId, (given.get(device.physicalId) ?? 0) + 1);
    }
  }
  const conflicts: string[] = [];
  for (const [physicalId, ids] of asked) {
    const total = ids.length + (given.get(physicalId) ?? 0) + (held.get(physicalId) ?? 0);
    if (total > (replicas.get(physicalId) ?? 0)) conflicts.push(...ids);
  }
  return conflicts;
}
