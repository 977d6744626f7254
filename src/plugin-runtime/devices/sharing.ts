// Turns physical devices into the devices the kubelet sees: one each, or `replicas` time-sliced ids each.
import type { Sharing } from "../../api/v1beta1/spec.js";
import { replicaId } from "../../contract/replica-id.js";
import type { AdvertisedDevice, PhysicalDevice } from "./types.js";

/** How many advertised devices each physical device becomes under this sharing configuration. */
export function replicasPerDevice(sharing: Sharing): number {
  if (sharing.strategy !== "TimeSlicing") return 1;
  // The schema guarantees replicas >= 2 here; stay total for configs built without it.
  return Math.max(1, Math.floor(sharing.replicas ?? 1));
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
