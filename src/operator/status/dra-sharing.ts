// Whether a time-sliced DRA config's devices really are shared (KEP-5075): the API server drops
// ResourceSlice allowMultipleAllocations silently while its DRAConsumableCapacity gate is off (alpha and
// off by default in 1.35, beta and on from 1.36), and each device is then exclusive. The operator may not
// create ResourceSlices, not even as a dry run, so it compares what the plugins sent (a label on their
// slices) with what the API server stored (the field on their devices). Pure.
import { LABEL_SHARED_ALLOCATIONS } from "../../contract/names.js";
import type { FeatureCondition } from "./features.js";
import type { SlimResourceSlice } from "./published-devices.js";

/** True when a time-sliced DRA config's devices are published for several claims at once. */
export const DRA_SHARING = "DRASharing";

/** The condition's reasons, for users to grep and tests to name. */
export const DRA_SHARING_REASONS = {
  shared: "SharedAllocations",
  /** The API server drops allowMultipleAllocations: DRAConsumableCapacity is off (1.35 default). */
  unsupported: "SharedAllocationsUnsupported",
  /** No slice sent with allowMultipleAllocations has a device yet. */
  unknown: "SharedAllocationsUnknown",
  resourceApiUnavailable: "ResourceAPIUnavailable",
} as const;

/**
 * What the stored slices show: true when a slice the plugin sent with allowMultipleAllocations (labelled
 * LABEL_SHARED_ALLOCATIONS) has a device that kept it, false when such slices have devices and none kept
 * it, undefined when no labelled slice has a device (nothing sent yet, or an older plugin). The gate is
 * the API server's, so one kept device anywhere settles it.
 */
export function sharedAllocationsKept(slices: readonly SlimResourceSlice[]): boolean | undefined {
  let sent = false;
  for (const slice of slices) {
    if (slice.metadata.labels?.[LABEL_SHARED_ALLOCATIONS] !== "true") continue;
    for (const device of slice.spec.devices) {
      if (device.allowMultipleAllocations === true) return true;
      sent = true;
    }
  }
  return sent ? false : undefined;
}

export interface DraSharingFacts {
  publish: "DevicePlugin" | "DRA";
  sharing: { strategy: "None" | "TimeSlicing"; replicas?: number | undefined };
  resourceApiServed: boolean;
  /** sharedAllocationsKept over the config's slices. */
  kept: boolean | undefined;
}

/**
 * The DRASharing condition of a config with publish DRA and TimeSlicing; undefined for any other (nothing
 * is shared through DRA). Informational, like ExtendedResourceMapping: with the field dropped the config
 * still serves, one claim per device, so it neither stalls the config nor makes it not Ready; the False
 * condition says that pods get N times fewer holders per device than the config asks for.
 */
export function draSharingCondition(facts: DraSharingFacts): FeatureCondition | undefined {
  if (facts.publish !== "DRA" || facts.sharing.strategy !== "TimeSlicing") return undefined;
  const n = facts.sharing.replicas ?? 2;
  if (!facts.resourceApiServed) {
    return {
      type: DRA_SHARING,
      status: "False",
      reason: DRA_SHARING_REASONS.resourceApiUnavailable,
      message: `the API server does not serve resource.k8s.io/v1, so no device is published to share`,
    };
  }
  if (facts.kept === undefined) {
    return {
      type: DRA_SHARING,
      status: "Unknown",
      reason: DRA_SHARING_REASONS.unknown,
      message: `no ResourceSlice of this config has a device yet, so it is not known whether the API server keeps allowMultipleAllocations`,
    };
  }
  if (!facts.kept) {
    return {
      type: DRA_SHARING,
      status: "False",
      reason: DRA_SHARING_REASONS.unsupported,
      message:
        `the API server drops ResourceSlice allowMultipleAllocations (feature gate DRAConsumableCapacity is off: alpha and ` +
        `off by default in Kubernetes 1.35, on by default from 1.36), so each device goes to one claim at a time instead of ` +
        `${n}; use publish DevicePlugin for ${n} replicas per device, or turn the gate on`,
    };
  }
  return {
    type: DRA_SHARING,
    status: "True",
    reason: DRA_SHARING_REASONS.shared,
    message: `each device is published with allowMultipleAllocations and ${n} shares of dpo.dev/replicas: up to ${n} claims hold it at once, as the device plugin path gives ${n} replicas`,
  };
}
