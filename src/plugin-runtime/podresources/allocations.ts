// Pure: which container holds which device of this plugin, from the kubelet's PodResources List answer (the
// device-plugin resource's ids, or the DRA driver's claimed devices), and the one-series-per-device view the
// metrics export.
import type { ListPodResourcesResponse } from "../proto/wire.js";
import { physicalIdOf } from "../../contract/replica-id.js";
import { countShares, type HeldShares } from "../devices/held.js";
import type { AdvertisedDevice } from "../devices/types.js";

/** The container a device is allocated to. */
export interface DeviceHolder {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
}

/** Device id (as advertised to the kubelet) → the container holding it; devices nobody holds are absent. */
export type Allocations = ReadonlyMap<string, DeviceHolder>;

/**
 * The devices of `resourceName` that the kubelet has given to containers. The kubelet lists every pod it
 * runs, its containers (restartable init containers included, others not) and, per container, one entry
 * per device and NUMA node; a device listed twice (on two NUMA nodes, or reused) counts once, for the
 * first container that lists it, in the kubelet's order.
 */
export function allocationsOf(response: ListPodResourcesResponse, resourceName: string): Allocations {
  const held = new Map<string, DeviceHolder>();
  for (const pod of response.podResources) {
    for (const container of pod.containers) {
      for (const devices of container.devices) {
        if (devices.resourceName !== resourceName) continue;
        for (const id of devices.deviceIds) {
          if (id === "" || held.has(id)) continue;
          held.set(id, { namespace: pod.namespace, pod: pod.name, container: container.name });
        }
      }
    }
  }
  return held;
}

/** This DRA plugin's devices as claims name them: its driver, its pool, and each device name's device id. */
export interface DraDeviceTable {
  readonly driver: string;
  readonly pool: string;
  /** DRA device name (as published in the ResourceSlice) → the device id the metrics use. */
  readonly ids: ReadonlyMap<string, string>;
}

/**
 * The devices of this DRA plugin that the kubelet has given to containers through ResourceClaims. The
 * kubelet lists, per container, every claim it uses and each claim's devices by driver, pool and device
 * name (as the driver's NodePrepareResources answered). Devices of other drivers or pools are not this
 * plugin's; a device name it does not know (a device gone from the backend) cannot be named and is left
 * out. A device in several containers (a claim shared by containers or pods, or shares of one device)
 * counts once, for the first container that lists it, in the kubelet's order.
 */
export function draAllocationsOf(response: ListPodResourcesResponse, table: DraDeviceTable): Allocations {
  const held = new Map<string, DeviceHolder>();
  for (const { id, pod, container } of claimedDevices(response, table)) {
    if (!held.has(id)) held.set(id, { namespace: pod.namespace, pod: pod.name, container: container.name });
  }
  return held;
}

/** Each device of the plugin's driver and pool that a container's claim lists, in the kubelet's order. */
function* claimedDevices(response: ListPodResourcesResponse, table: DraDeviceTable) {
  for (const pod of response.podResources) {
    for (const container of pod.containers) {
      for (const claim of container.dynamicResources) {
        for (const device of claim.claimResources) {
          if (device.driverName !== table.driver || device.poolName !== table.pool) continue;
          const id = table.ids.get(device.deviceName);
          if (id !== undefined) yield { id, pod, container, claim, device };
        }
      }
    }
  }
}

/**
 * What the device plugin's pods hold, as the DRA path counts it: one share per held id of each physical
 * device (a time-sliced id `<physical>::<k>` is one replica).
 */
export function devicePluginShares(allocations: Allocations): HeldShares {
  return countShares([...allocations.keys()].map(physicalIdOf));
}

/**
 * What the DRA driver's claims hold on this node, as the device-plugin path counts it: per device of this
 * driver and pool (`table.ids`: DRA device name → physical id), one share per distinct claim (and share
 * of a device with consumable capacity) listing it; a claim several containers use counts once.
 */
export function draClaimShares(response: ListPodResourcesResponse, table: DraDeviceTable): HeldShares {
  const claims = new Map<string, Set<string>>();
  for (const { id, claim, device } of claimedDevices(response, table)) {
    const holders = claims.get(id) ?? new Set<string>();
    holders.add(`${claim.claimNamespace}/${claim.claimName}/${device.shareId ?? ""}`);
    claims.set(id, holders);
  }
  return new Map([...claims].map(([id, holders]) => [id, holders.size]));
}

export function sameAllocations(a: Allocations | undefined, b: Allocations | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (a.size !== b.size) return false;
  for (const [id, x] of a) {
    const y = b.get(id);
    if (y === undefined || x.namespace !== y.namespace || x.pod !== y.pod || x.container !== y.container)
      return false;
  }
  return true;
}

/** One exported device: its holder (empty strings when free) and what is known of it. */
export interface DeviceSeries {
  readonly device: string;
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  /** 1 allocated, 0 free; undefined while the kubelet's allocations are unknown. */
  readonly allocated: 0 | 1 | undefined;
  /** 1 healthy, 0 unhealthy; undefined for a device the plugin no longer advertises. */
  readonly healthy: 0 | 1 | undefined;
}

const FREE: DeviceHolder = { namespace: "", pod: "", container: "" };

/**
 * One entry per device the kubelet knows of this plugin: every advertised device (the kubelet's ids, so
 * one per replica under time-slicing), then, sorted, devices still allocated that the plugin no longer
 * advertises (gone from the backend while a container holds them). Bounded by the devices, not by pods:
 * a device's pod labels change when it moves, its series count does not.
 */
export function deviceSeries(
  advertised: readonly AdvertisedDevice[],
  allocations: Allocations | undefined,
): DeviceSeries[] {
  const rows: DeviceSeries[] = [];
  const seen = new Set<string>();
  for (const device of advertised) {
    if (seen.has(device.id)) continue;
    seen.add(device.id);
    const holder = allocations?.get(device.id);
    rows.push({
      device: device.id,
      ...(holder ?? FREE),
      allocated: allocations === undefined ? undefined : holder === undefined ? 0 : 1,
      healthy: device.health === "Healthy" ? 1 : 0,
    });
  }
  const gone = [...(allocations ?? new Map<string, DeviceHolder>())]
    .filter(([id]) => !seen.has(id))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [id, holder] of gone) rows.push({ device: id, ...holder, allocated: 1, healthy: undefined });
  return rows;
}
