// Pure: device health as ResourceSlice device taints (KEP-5055). An unhealthy device stays in the slice
// with a NoSchedule taint naming the reason, so new claims avoid it while pods holding it keep it; the
// taint goes when the device is healthy again; a device gone from the node leaves the slice.
import type { Health } from "../devices/types.js";
import {
  RESOURCE_SLICE_MAX_DEVICES,
  sliceDeviceChunks,
  type PoolDevice,
  type ResourceSlice,
  type SliceDevice,
} from "./slices.js";

/** The taint key dpo writes on its unhealthy devices (a label name). */
export const UNHEALTHY_TAINT_KEY = "dpo.dev/unhealthy";
/** The taint value when the backend gave no usable reason. */
export const UNHEALTHY_DEFAULT_VALUE = "Unhealthy";
/** Longest taint value: a label value (DeviceTaint.Value). */
export const MAX_TAINT_VALUE_LENGTH = 63;
/** Most taints per device (DeviceTaintsMaxLength). */
export const MAX_TAINTS_PER_DEVICE = 16;
/** Most devices in a slice in which any device has taints (ResourceSliceMaxDevicesWithAdvancedFeatures). */
export const RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS = 64;

/** The effects resource.k8s.io/v1 accepts; PreferNoSchedule is not one. */
export type DeviceTaintEffect = "None" | "NoSchedule" | "NoExecute";

/** resource.k8s.io/v1 DeviceTaint. `timeAdded` is RFC 3339, as the API server writes metav1.Time. */
export interface DeviceTaint {
  readonly key: string;
  readonly value?: string;
  readonly effect: DeviceTaintEffect;
  readonly timeAdded?: string;
}

/** A published device that may carry taints. */
export interface TaintedSliceDevice extends SliceDevice {
  readonly taints?: readonly DeviceTaint[];
}

/** A device of the node with what its health taint needs: its reason. */
export interface HealthDevice extends PoolDevice {
  readonly reason: string;
}

/**
 * A health reason as a label value: at most 63 characters of [A-Za-z0-9._-], starting and ending with
 * an alphanumeric. Each run of other characters becomes one `_` ("ECC error: 12" → "ECC_error_12"),
 * and the result is cut and trimmed. An empty result is "Unhealthy". Pure.
 */
export function taintValue(reason: string): string {
  const cleaned = reason
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .slice(0, MAX_TAINT_VALUE_LENGTH)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
  return cleaned === "" ? UNHEALTHY_DEFAULT_VALUE : cleaned;
}

/** RFC 3339 with second precision, as the API server writes metav1.Time. */
function rfc3339(time: Date): string {
  return time.toISOString().replace(/\.\d+Z$/, "Z");
}

/**
 * The taints of one device from its health: none when healthy; when unhealthy one NoSchedule taint with
 * key dpo.dev/unhealthy and the reason as value. `previous` is the device's taints in the slice now: a
 * dpo taint already there keeps its timeAdded (even if the reason changed, as the API does for a key or
 * value change that keeps the effect), so an unchanged device never rewrites the slice. Taints of other
 * keys are not dpo's and are not carried over (the driver owns its slice). Pure.
 */
export function healthTaints(
  device: { health: Health; reason: string },
  previous: NonNullable<SliceDevice["taints"]> | undefined,
  now: Date,
): DeviceTaint[] {
  if (device.health === "Healthy") return [];
  const before = previous?.find((t) => t.key === UNHEALTHY_TAINT_KEY && t.effect === "NoSchedule");
  return [
    {
      key: UNHEALTHY_TAINT_KEY,
      value: taintValue(device.reason),
      effect: "NoSchedule",
      timeAdded: before?.timeAdded ?? rfc3339(now),
    },
  ];
}

/** Each device's taints in the existing slices of the pool, by device name. Pure. */
export function taintsInSlices(
  slices: readonly { spec: { devices?: readonly SliceDevice[] | undefined } }[],
): Map<string, NonNullable<SliceDevice["taints"]>> {
  const out = new Map<string, NonNullable<SliceDevice["taints"]>>();
  for (const slice of slices) {
    for (const device of slice.spec.devices ?? []) {
      if (device.taints !== undefined && device.taints.length > 0) out.set(device.name, device.taints);
    }
  }
  return out;
}

/**
 * The node's devices as published with taints: every device the node has now, healthy or not (a device
 * gone from the node is simply not in `devices`, so it leaves the slice), sorted by name, each with its
 * health taints (previous ones' timeAdded kept). Empty attribute and capacity maps are left out, as
 * sliceDeviceChunks does. Pure.
 */
export function taintedSliceDevices(
  devices: readonly HealthDevice[],
  existing: readonly ResourceSlice[],
  now: Date,
): TaintedSliceDevice[] {
  const previous = taintsInSlices(existing);
  const seen = new Set<string>();
  const out: TaintedSliceDevice[] = [];
  for (const device of devices) {
    if (seen.has(device.name)) continue;
    seen.add(device.name);
    const taints = healthTaints(device, previous.get(device.name), now);
    out.push({
      name: device.name,
      ...(device.attributes !== undefined && Object.keys(device.attributes).length > 0
        ? { attributes: device.attributes }
        : {}),
      ...(device.capacity !== undefined && Object.keys(device.capacity).length > 0
        ? { capacity: device.capacity }
        : {}),
      // A time-sliced device stays shared while tainted (sharing.ts).
      ...(device.allowMultipleAllocations === true ? { allowMultipleAllocations: true } : {}),
      ...(taints.length > 0 ? { taints } : {}),
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * The published devices split into slices: at most 128 each, or 64 each once any device of the pool has
 * taints (the API server's limit for a slice holding a tainted device; one size for the whole pool keeps
 * the split a function of the device list alone). At least one (empty) slice, as sliceDeviceChunks. Pure.
 */
export function taintedDeviceChunks(
  devices: readonly TaintedSliceDevice[],
  plain = RESOURCE_SLICE_MAX_DEVICES,
): TaintedSliceDevice[][] {
  const size = devices.some((d) => (d.taints?.length ?? 0) > 0)
    ? Math.min(plain, RESOURCE_SLICE_MAX_DEVICES_WITH_TAINTS)
    : plain;
  const chunks: TaintedSliceDevice[][] = [];
  for (let i = 0; i < devices.length; i += size) chunks.push(devices.slice(i, i + size));
  return chunks.length === 0 ? [[]] : chunks;
}

/**
 * The devices of each slice of the pool, as the publisher writes them. Where the API server keeps taints
 * (`taintsKept`), every device of the node, the unhealthy ones tainted (timeAdded carried over from
 * `existing`), at most 64 per slice once any is tainted; where it drops them (1.35 defaults) or that is not
 * known, the healthy devices only, as before taints existed: a tainted device stored without its taint
 * would be handed to new claims. Pure.
 */
export function publishedDeviceChunks(
  devices: readonly PoolDevice[],
  existing: readonly ResourceSlice[],
  taintsKept: boolean,
  now: Date,
): SliceDevice[][] {
  if (!taintsKept) return sliceDeviceChunks(devices);
  const withReasons = devices.map((device) => ({ ...device, reason: device.reason ?? "" }));
  return taintedDeviceChunks(taintedSliceDevices(withReasons, existing, now));
}
