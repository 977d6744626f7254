// Decisions behind Allocate and GetPreferredAllocation: is a request acceptable, and which devices to prefer.
import type { AllocationPolicy, Sharing } from "../../api/v1beta1/spec.js";
import { chooseConnectedDevices, type Interconnect } from "./interconnect.js";
import { naturalCompare } from "./policies.js";
import type { AdvertisedDevice } from "./types.js";

/**
 * The verdict on one container's Allocate request. Checks run in this order: a malformed request
 * (Empty, Unknown, Duplicate, TooManyReplicas) is reported as such before the state of the node
 * (Unhealthy) is looked at, so Unhealthy means the request would be fine on healthy hardware.
 * The server maps Unknown, Duplicate, Empty and TooManyReplicas to INVALID_ARGUMENT and Unhealthy
 * to FAILED_PRECONDITION.
 */
export type AllocateCheck =
  | {
      readonly kind: "Ok";
      /** The distinct physical devices behind the request, in first-seen order. */
      readonly physicalIds: readonly string[];
    }
  | { readonly kind: "Empty" }
  | { readonly kind: "Unknown"; readonly ids: readonly string[] }
  | { readonly kind: "Duplicate"; readonly ids: readonly string[] }
  | {
      readonly kind: "TooManyReplicas";
      /** How many (distinct) devices the container asked for. */
      readonly requested: number;
    }
  | { readonly kind: "Unhealthy"; readonly ids: readonly string[] }
  /** The node's other publish path holds these devices (pods admitted through it before a switch). */
  | { readonly kind: "HeldElsewhere"; readonly ids: readonly string[] };

export type AllocateRejection = Exclude<AllocateCheck, { kind: "Ok" }>;

/**
 * Checks one container's requested device ids against the advertised devices and the sharing rules, and
 * last (`heldConflicts`, held.ts) against what the other publish path holds.
 */
export function checkAllocateRequest(
  ids: readonly string[],
  devices: ReadonlyMap<string, AdvertisedDevice>,
  sharing: Sharing,
  heldConflicts?: (ids: readonly string[]) => readonly string[],
): AllocateCheck {
  if (ids.length === 0) return { kind: "Empty" };

  const seen = new Set<string>();
  const duplicates = new Set<string>();
  const unknown = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) duplicates.add(id);
    seen.add(id);
    if (!devices.has(id)) unknown.add(id);
  }
  if (unknown.size > 0) return { kind: "Unknown", ids: [...unknown] };
  if (duplicates.size > 0) return { kind: "Duplicate", ids: [...duplicates] };
  if (sharing.strategy === "TimeSlicing" && sharing.failRequestsGreaterThanOne && ids.length > 1) {
    return { kind: "TooManyReplicas", requested: ids.length };
  }

  const unhealthy: string[] = [];
  const physicalIds = new Set<string>();
  for (const id of ids) {
    const device = devices.get(id);
    if (device === undefined) continue;
    if (device.health !== "Healthy") unhealthy.push(id);
    physicalIds.add(device.physicalId);
  }
  if (unhealthy.length > 0) return { kind: "Unhealthy", ids: unhealthy };
  const held = heldConflicts?.(ids) ?? [];
  if (held.length > 0) return { kind: "HeldElsewhere", ids: held };
  return { kind: "Ok", physicalIds: [...physicalIds] };
}

/** A human-readable reason for a rejected Allocate request, naming the offending ids. */
export function describeAllocateRejection(rejection: AllocateRejection): string {
  switch (rejection.kind) {
    case "Empty":
      return "container request lists no device ids";
    case "Unknown":
      return `unknown device ids: ${rejection.ids.join(", ")}`;
    case "Duplicate":
      return `device ids requested more than once: ${rejection.ids.join(", ")}`;
    case "TooManyReplicas":
      return `container requests ${rejection.requested} shared devices; sharing.failRequestsGreaterThanOne allows 1`;
    case "Unhealthy":
      return `unhealthy devices: ${rejection.ids.join(", ")}`;
    case "HeldElsewhere":
      return `devices held by pods of the other publish path: ${rejection.ids.join(", ")}`;
  }
}

/** The kubelet's GetPreferredAllocation question for one container. */
export interface PreferredAllocationRequest {
  /** Free devices the kubelet may give (it already includes mustInclude). */
  readonly available: readonly string[];
  /** Devices the container already holds; always part of the answer. */
  readonly mustInclude: readonly string[];
  /** How many devices the container gets in total. */
  readonly size: number;
  /**
   * Available ids this path must not give, since the node's other publish path holds them
   * (`heldOfferedIds`): chosen only after every other healthy one.
   */
  readonly held?: ReadonlySet<string>;
}

function distinct(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}

/**
 * The devices this plugin prefers for a container: must-include first (natural order), then the
 * chosen devices in reading order (physical id in natural order, then replica). Guarantees, whatever
 * the input (see the property tests):
 * - every must-include id is in the answer, and nothing outside available ∪ must-include;
 * - no duplicates; the same answer for any order of `available`;
 * - exactly `size` ids whenever must-include plus the available ids known to `devices` reach `size`,
 *   otherwise all of them; never more than `size` unless must-include alone is larger, in which case
 *   the answer is must-include;
 * - available ids the device map does not know are never chosen;
 * - held devices (`request.held`) are chosen only after every other healthy one, and unhealthy devices
 *   only after every healthy one, by the same policy. The kubelet only
 *   offers devices it believes healthy, so an unhealthy one here means its view is behind ours; an
 *   exact-size answer lets it proceed, and Allocate then rejects the device with a precise error
 *   instead of the kubelet silently filling the gap with the same device.
 * Policies (see policies.ts for the tie-breaks): Packed, Spread, NUMAAligned; None takes devices in
 * reading order (the server does not advertise GetPreferredAllocation for None, but this is total).
 * With an `interconnect` (the backend's link scores), the best-connected set of physical devices of the
 * size the policy picks wins, the policy deciding among equals (interconnect.ts).
 */
export function preferredAllocation(
  policy: AllocationPolicy,
  devices: ReadonlyMap<string, AdvertisedDevice>,
  request: PreferredAllocationRequest,
  interconnect?: Interconnect,
): string[] {
  const size = Number.isFinite(request.size) ? Math.max(0, Math.floor(request.size)) : 0;
  const mustInclude = distinct(request.mustInclude).sort(naturalCompare);
  if (mustInclude.length >= size) return mustInclude;

  const anchors: AdvertisedDevice[] = [];
  for (const id of mustInclude) {
    const device = devices.get(id);
    if (device !== undefined) anchors.push(device);
  }
  const healthy: AdvertisedDevice[] = [];
  const held: AdvertisedDevice[] = [];
  const unhealthy: AdvertisedDevice[] = [];
  const seen = new Set(mustInclude);
  for (const id of request.available) {
    if (seen.has(id)) continue;
    seen.add(id);
    const found = devices.get(id);
    if (found === undefined) continue;
    // The answer must name the ids the kubelet sent, even if a map entry disagrees with its key.
    const device = found.id === id ? found : { ...found, id };
    (device.health !== "Healthy" ? unhealthy : request.held?.has(id) === true ? held : healthy).push(device);
  }

  const chosen: AdvertisedDevice[] = [];
  for (const pool of [healthy, held, unhealthy]) {
    const need = size - mustInclude.length - chosen.length;
    if (need <= 0) break;
    chosen.push(...chooseConnectedDevices(policy, [...anchors, ...chosen], pool, need, interconnect));
  }
  return [...mustInclude, ...chosen.map((d) => d.id)];
}
