// The kubelet's DRA rules as pure functions, written for the simulator from the kubelet's sources
// (k8s.io/kubernetes pkg/kubelet/cm/dra at v1.34.4, and what 1.32/1.33 did) and sharing no code with the
// plugin: which gRPC service a kubelet of a given version talks to a DRA plugin through, which of a
// pod's claims go to which driver, and the kubelet's messages.
import type { V1Pod } from "@kubernetes/client-node";
import { extendedResourceClaimStatus } from "./pod-admission.js";

export const DRA_V1_SERVICE = "v1.DRAPlugin";
export const DRA_V1BETA1_SERVICE = "v1beta1.DRAPlugin";

/** The kubelet's event reason when PrepareDynamicResources fails (pkg/kubelet/events). */
export const FAILED_PREPARE_DYNAMIC_RESOURCES = "FailedPrepareDynamicResources";

/** Minor version of a kubeletVersion such as `v1.34.4` or `v1.33.0-kwok`; undefined when unreadable. */
export function kubeletMinor(kubeletVersion: string): number | undefined {
  const m = /^v?1\.(\d+)(\.|$)/.exec(kubeletVersion.trim());
  return m ? Number(m[1]) : undefined;
}

/**
 * The DRA services a kubelet knows, in the order it prefers them. 1.34 (dra_plugin.go,
 * servicesSupportedByKubelet): v1, then v1beta1. 1.32 and 1.33 have no v1 (k8s.io/kubelet v0.32/v0.33
 * has no pkg/apis/dra/v1): v1beta1, then the v1alpha4 `Node` service, which the simulator does not speak.
 */
export function kubeletDraServices(kubeletVersion: string): string[] {
  const minor = kubeletMinor(kubeletVersion) ?? 34;
  return minor >= 34 ? [DRA_V1_SERVICE, DRA_V1BETA1_SERVICE] : [DRA_V1BETA1_SERVICE];
}

/**
 * The service the kubelet of `kubeletVersion` chooses among those a plugin lists in GetInfo's
 * supported_versions, or the kubelet's refusal.
 * - 1.34 (dra_plugin_manager.go, validateSupportedServices): the first of the plugin's list the kubelet
 *   knows, so the plugin's order decides.
 * - 1.32/1.33 (registration.go, validateSupportedServices): the first of the kubelet's own list the
 *   plugin offers (they fell back to v1alpha4 for plugins that listed none; that is refused here).
 */
export function chooseDraService(
  kubeletVersion: string,
  supportedServices: readonly string[],
): { service: string } | { error: string } {
  const known = kubeletDraServices(kubeletVersion);
  if (supportedServices.length === 0) {
    return { error: "empty list of supported gRPC services (aka supported versions)" };
  }
  const minor = kubeletMinor(kubeletVersion) ?? 34;
  const service =
    minor >= 34
      ? supportedServices.find((s) => known.includes(s))
      : known.find((s) => supportedServices.includes(s));
  if (service !== undefined) return { service };
  const q = (list: readonly string[]): string => `[${list.map((s) => JSON.stringify(s)).join(" ")}]`;
  return {
    error: `none of services supported by the plugin (${q(supportedServices)}) are supported by the kubelet (${q(known)})`,
  };
}

/** The plugin watcher's wrapping of a handler's ValidatePlugin error (DRA: ValidatePlugin's own prefix). */
export function draValidationMessage(driverName: string, endpoint: string, error: string): string {
  return `RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin ${driverName} at endpoint ${endpoint}: ${error}`;
}

/** A pod's claim as the kubelet resolves it: the pod's name for it and the ResourceClaim object's name. */
export interface PodClaimName {
  /** The entry's name in `spec.resourceClaims`. */
  podClaimName: string;
  /** The ResourceClaim's name, or undefined while the resourceclaim controller has not made it. */
  claimName: string | undefined;
}

/**
 * resourceclaim.Name: `resourceClaimName` directly, or for a template the name the controller recorded
 * in `status.resourceClaimStatuses` (a template entry absent there is not made yet; one present with no
 * name needs no claim, and is left out). Then the claim the scheduler made for the pod's extended
 * resources mapped to DRA (KEP-5004, `status.extendedResourceClaimStatus`), which no entry of
 * spec.resourceClaims names: its podClaimName is the claim's own name.
 */
export function podClaimNames(pod: V1Pod): PodClaimName[] {
  const statuses = pod.status?.resourceClaimStatuses ?? [];
  const out: PodClaimName[] = [];
  for (const c of pod.spec?.resourceClaims ?? []) {
    if (c.resourceClaimName) {
      out.push({ podClaimName: c.name, claimName: c.resourceClaimName });
      continue;
    }
    const status = statuses.find((s) => s.name === c.name);
    if (status === undefined) out.push({ podClaimName: c.name, claimName: undefined });
    else if (status.resourceClaimName)
      out.push({ podClaimName: c.name, claimName: status.resourceClaimName });
  }
  const extended = extendedResourceClaimStatus(pod)?.resourceClaimName;
  if (extended !== undefined) out.push({ podClaimName: extended, claimName: extended });
  return out;
}

/** The part of a ResourceClaim the kubelet reads before preparing it. */
export interface ClaimForPrepare {
  metadata?: { name?: string; namespace?: string; uid?: string };
  status?: {
    allocation?: { devices?: { results?: { driver: string }[] } };
    reservedFor?: { resource?: string; name?: string; uid?: string }[];
  };
}

/** resourceclaim.IsReservedForPod: the pod's uid among the claim's consumers. */
export function isReservedForPod(pod: V1Pod, claim: ClaimForPrepare): boolean {
  const uid = pod.metadata?.uid;
  return (claim.status?.reservedFor ?? []).some((r) => r.resource === "pods" && r.uid === uid);
}

/**
 * Which claims go to which driver: every driver with an allocation result in a claim is called with
 * that claim (a claim with devices of two drivers goes to both), in the claims' order.
 */
export function claimsByDriver<C extends ClaimForPrepare>(claims: readonly C[]): Map<string, C[]> {
  const out = new Map<string, C[]>();
  for (const claim of claims) {
    const drivers = new Set((claim.status?.allocation?.devices?.results ?? []).map((r) => r.driver));
    for (const driver of drivers) out.set(driver, [...(out.get(driver) ?? []), claim]);
  }
  return out;
}
