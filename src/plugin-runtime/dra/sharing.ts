// Pure: a config's sharing as a DRA device shares it (KEP-5075, consumable capacity), so that one config
// means the same sharing on both paths: TimeSlicing with replicas N lets N allocations hold one device at
// once, as the device plugin path advertises N replica ids per physical device.
import type { Sharing } from "../../api/v1beta1/spec.js";
import { replicasPerDevice } from "../devices/sharing.js";

/** The capacity each allocation of a time-sliced device consumes one of (a qualified name, dpo's domain). */
export const REPLICAS_CAPACITY = "dpo.dev/replicas";

/** resource.k8s.io/v1 DeviceCapacity with a request policy, as far as the sharing uses it. */
export interface SharedCapacity {
  readonly value: string;
  readonly requestPolicy: { readonly default: string; readonly validValues: readonly string[] };
}

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

/**
 * How many allocations can hold one device at once under the API's rules, for requests that name no
 * capacity (each takes every capacity's requestPolicy.default): 1 for a device that does not allow
 * multiple allocations; otherwise the smallest, over its capacities, of how many defaults fit in the
 * value; unbounded without capacities. The test that both paths share alike reads it. Pure.
 */
export function concurrentAllocations(device: DraDeviceSharing): number {
  if (device.allowMultipleAllocations !== true) return 1;
  let most = Number.POSITIVE_INFINITY;
  for (const capacity of Object.values(device.capacity ?? {})) {
    const each = Number(capacity.requestPolicy.default);
    if (!(each > 0)) continue;
    most = Math.min(most, Math.floor(Number(capacity.value) / each));
  }
  return most;
}
