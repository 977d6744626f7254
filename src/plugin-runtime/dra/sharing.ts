// Pure: a config's sharing as a DRA device shares it (KEP-5075, consumable capacity), so that one config
// means the same sharing on both paths: TimeSlicing with replicas N lets N allocations hold one device at
// once, as the device plugin path advertises N replica ids per physical device.
import type { Sharing } from "../../api/v1beta1/spec.js";
import { MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE, quantityAmount } from "../devices/attributes.js";
import { replicasPerDevice } from "../devices/sharing.js";

/** The capacity each allocation of a time-sliced device consumes one of (a qualified name, dpo's domain). */
export const REPLICAS_CAPACITY = "dpo.dev/replicas";

/** resource.k8s.io/v1 CapacityRequestPolicy, as far as the sharing uses it. */
export interface CapacityRequestPolicy {
  readonly default: string;
  readonly validValues?: readonly string[];
}

/** resource.k8s.io/v1 DeviceCapacity with a request policy, as far as the sharing uses it. */
export interface SharedCapacity {
  readonly value: string;
  readonly requestPolicy: CapacityRequestPolicy;
}

/**
 * The request policy of a backend's own capacity (memory, say) on a shared device: an allocation that
 * names it takes what it asks for, one that does not takes none. Without a policy the scheduler counts the
 * whole value as taken by every allocation that does not name it, so the first holder would fill the device.
 */
export const UNREQUESTED_CAPACITY_POLICY: CapacityRequestPolicy = { default: "0" };

/** The members of a resource.k8s.io/v1 Device that say how it is shared. */
export interface DraDeviceSharing {
  readonly allowMultipleAllocations?: true;
  readonly capacity?: Readonly<Record<string, SharedCapacity>>;
}

/**
 * The Device members for a config's sharing. None: nothing (an exclusive device). TimeSlicing with
 * replicas N: allowMultipleAllocations and a capacity dpo.dev/replicas of N whose request policy makes
 * every allocation take exactly 1 (default 1, validValues [1]): a request that names no capacity, as the
 * claim the scheduler writes for `<resourceName>: 1` does, takes the default, so at most N allocations
 * hold the device at once. failRequestsGreaterThanOne has no DRA form: it stays a device plugin check.
 * Needs DRAConsumableCapacity (beta, on by default from 1.36); a 1.35 API server drops both members and
 * the device is exclusive. Pure.
 */
export function draDeviceSharing(sharing: Sharing): DraDeviceSharing {
  const replicas = replicasPerDevice(sharing);
  if (sharing.strategy !== "TimeSlicing" || replicas < 2) return {};
  return {
    allowMultipleAllocations: true,
    capacity: {
      [REPLICAS_CAPACITY]: { value: String(replicas), requestPolicy: { default: "1", validValues: ["1"] } },
    },
  };
}

/** A device as the publisher hands it to the slice builder, as far as sharing it touches. */
export interface ShareableDevice {
  readonly attributes?: Readonly<Record<string, unknown>>;
  readonly capacity?: Readonly<Record<string, { readonly value: string }>>;
}

/** A device with its sharing applied: the capacities may carry request policies now. */
export type SharedDevice<D extends ShareableDevice> = Omit<D, "capacity"> & {
  readonly allowMultipleAllocations?: true;
  readonly capacity?: Readonly<
    Record<string, { readonly value: string; readonly requestPolicy?: CapacityRequestPolicy }>
  >;
};

/**
 * `device` as a config's sharing publishes it. Not shared: unchanged. Shared (draDeviceSharing is not
 * empty): allowMultipleAllocations, the dpo.dev/replicas capacity, and UNREQUESTED_CAPACITY_POLICY on each
 * of the backend's own capacities, so only the replicas capacity bounds the holders. A device with the
 * most attributes and capacities the API allows gives up the one whose name sorts last (a capacity before
 * an attribute) to make room for the replicas capacity: without it the device would be shared unbounded.
 * Pure.
 */
export function shareDevice<D extends ShareableDevice>(device: D, sharing: Sharing): SharedDevice<D> {
  const shared = draDeviceSharing(sharing);
  if (shared.allowMultipleAllocations !== true) return device;
  const capacity: Record<string, { value: string; requestPolicy?: CapacityRequestPolicy }> = {};
  for (const [name, c] of Object.entries(device.capacity ?? {})) {
    if (name === REPLICAS_CAPACITY) continue;
    capacity[name] = { value: c.value, requestPolicy: UNREQUESTED_CAPACITY_POLICY };
  }
  let attributes = device.attributes;
  const over = Object.keys(attributes ?? {}).length + Object.keys(capacity).length + 1;
  if (over > MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE) {
    const capacityNames = Object.keys(capacity).sort();
    const last = capacityNames[capacityNames.length - 1];
    if (last !== undefined) delete capacity[last];
    else {
      const names = Object.keys(attributes ?? {}).sort();
      const drop = names[names.length - 1];
      attributes = Object.fromEntries(Object.entries(attributes ?? {}).filter(([name]) => name !== drop));
    }
  }
  Object.assign(capacity, shared.capacity);
  return { ...device, attributes, allowMultipleAllocations: true, capacity };
}

/**
 * How many allocations can hold one device at once under the scheduler's rules (KEP-5075,
 * calculateConsumedCapacity), for requests that name no capacity, as a pod's `<resourceName>: 1` claim
 * does: 1 for a device that does not allow multiple allocations; otherwise each allocation takes every
 * capacity's requestPolicy.default, or the whole value of a capacity without a policy, and the answer is
 * the smallest, over the capacities, of how many such takings fit in the value; unbounded without
 * capacities. The tests that both paths share alike read it. Pure.
 */
export function concurrentAllocations(device: {
  readonly allowMultipleAllocations?: boolean;
  readonly capacity?: Readonly<
    Record<string, { readonly value: string; readonly requestPolicy?: CapacityRequestPolicy }>
  >;
}): number {
  if (device.allowMultipleAllocations !== true) return 1;
  let most = Number.POSITIVE_INFINITY;
  for (const capacity of Object.values(device.capacity ?? {})) {
    const each = quantityAmount(capacity.requestPolicy?.default ?? capacity.value);
    if (!(each > 0)) continue;
    most = Math.min(most, Math.floor(quantityAmount(capacity.value) / each));
  }
  return most;
}
