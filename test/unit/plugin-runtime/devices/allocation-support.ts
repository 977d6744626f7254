// Builders for the allocation tests: the sharing settings, a node's advertised devices from
// [physical id, NUMA node, healthy?] rows, replica ids, and the Mock backend's four devices on two NUMA nodes.
import type { Sharing } from "../../../../src/api/v1beta1/spec.js";
import { advertiseDevices, indexAdvertisedDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { AdvertisedDevice, PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";

export const noSharing: Sharing = { strategy: "None", failRequestsGreaterThanOne: false };
export const timeSlicing = (replicas: number, failRequestsGreaterThanOne = false): Sharing => ({
  strategy: "TimeSlicing",
  replicas,
  failRequestsGreaterThanOne,
});

/** A node's devices: [physical id, NUMA node, healthy?] with the given sharing. */
export function node(
  physical: readonly (readonly [string, number | undefined, boolean?])[],
  sharing: Sharing,
): Map<string, AdvertisedDevice> {
  const devices: PhysicalDevice[] = physical.map(([id, numaNode, healthy = true]) => ({
    id,
    numaNode,
    health: healthy ? "Healthy" : "Unhealthy",
    reason: healthy ? "" : "test fault",
    attributes: {},
  }));
  return indexAdvertisedDevices(advertiseDevices(devices, sharing));
}

/** Replica ids `foo-<p>::<k>` for each k. */
export function replicas(p: number, ...ks: number[]): string[] {
  return ks.map((k) => `foo-${p}::${k}`);
}

/** Four physical devices round-robin on two NUMA nodes (as the Mock backend lays them out). */
export const fourOnTwoNodes = [
  ["foo-0", 0],
  ["foo-1", 1],
  ["foo-2", 0],
  ["foo-3", 1],
] as const;
export const sharedFour = node(fourOnTwoNodes, timeSlicing(4));
export const plainFour = node(fourOnTwoNodes, noSharing);
