// The conditions that say which version-dependent features a config gets and, where it does not, why:
// SurgeUpgrades (kubelets that can run two instances of a plugin side by side) and DRAPublishing (the
// resource.k8s.io/v1 API and kubelets that serve DRA plugins). Pure: the caller passes in the facts.
import type { Condition } from "../../api/v1beta1/status.js";
import {
  compareKubeletVersions,
  DRA_SEAMLESS_UPGRADES,
  MINIMUM_DRA_KUBELET,
  parseKubeletVersion,
  PER_SOCKET_ENDPOINTS,
  showRelease,
  type FixedReleases,
} from "../model/kubelet-version.js";
import type { RolloutStrategy, UpgradeMode } from "../model/rollout.js";

/** A condition before its generation and transition time are known. */
export type FeatureCondition = Pick<Condition, "type" | "status" | "reason" | "message">;

/** True when every targeted node's kubelet lets a plugin upgrade surge; set for strategies Auto and Surge. */
export const SURGE_UPGRADES = "SurgeUpgrades";
/** True when the config's devices can be published through DRA everywhere it runs; set for publish DRA. */
export const DRA_PUBLISHING = "DRAPublishing";

/** The reasons of the two conditions, for users to grep and tests to name. */
export const FEATURE_REASONS = {
  surgeSupported: "KubeletsSupportSurge",
  /** Device plugins: kubelets before per-socket endpoints (kubernetes#135437, v1.37.0). */
  withoutPerSocketEndpoints: "KubeletWithoutPerSocketEndpoints",
  /** DRA: kubelets before seamless driver upgrades (kubernetes#129832, v1.33.0). */
  withoutSeamlessDraUpgrades: "KubeletWithoutSeamlessDRAUpgrades",
  noMatchingNodes: "NoMatchingNodes",
  resourceApiServed: "ResourceAPIServed",
  resourceApiUnavailable: "ResourceAPIUnavailable",
  kubeletTooOld: "KubeletTooOld",
} as const;

/** How many distinct kubelet versions a message names; the rest are counted. */
const EXAMPLE_VERSIONS = 3;

/** What a kubelet needs for a surge in each publish mode, and how messages put it. */
const SURGE_FEATURE = {
  DevicePlugin: {
    fixed: PER_SOCKET_ENDPOINTS,
    feature: "per-socket device-plugin endpoints",
    has: "keep one device-plugin endpoint per socket",
    hasOne: "keeps one device-plugin endpoint per socket",
    reason: FEATURE_REASONS.withoutPerSocketEndpoints,
  },
  DRA: {
    fixed: DRA_SEAMLESS_UPGRADES,
    feature: "seamless DRA driver upgrades",
    has: "keep every registered instance of a DRA driver",
    hasOne: "keeps every registered instance of a DRA driver",
    reason: FEATURE_REASONS.withoutSeamlessDraUpgrades,
  },
} as const;

function nodes(count: number): string {
  return count === 1 ? "1 node" : `${count} nodes`;
}

/**
 * A few of the versions, distinct and oldest first as Kubernetes orders them (unreadable ones last, as
 * reported), then how many more: "v1.34.4, v1.35.4, v1.36.3 and 2 more". An empty version is "none".
 */
export function exampleVersions(versions: readonly string[]): string {
  const distinct = [...new Set(versions.map((v) => v.trim()))];
  const sorted = distinct.sort((a, b) => {
    const pa = parseKubeletVersion(a);
    const pb = parseKubeletVersion(b);
    if (pa !== undefined && pb !== undefined) {
      const byVersion = compareKubeletVersions(pa, pb);
      if (byVersion !== 0) return byVersion;
    } else if (pa !== undefined || pb !== undefined) {
      return pa !== undefined ? -1 : 1;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  });
  const shown = sorted.slice(0, EXAMPLE_VERSIONS).map((v) => (v === "" ? "none" : v));
  const more = sorted.length - shown.length;
  return more > 0 ? `${shown.join(", ")} and ${more} more` : shown.join(", ");
}

/** "older than v1.37.0", or for a fix on several release lines each line's first release with it. */
function olderThan(fixed: FixedReleases): string {
  return fixed.length === 1
    ? `older than ${showRelease(fixed[0]!)}`
    : `older than ${fixed.map(showRelease).join(" / ")} on their release lines`;
}

export interface SurgeUpgradeFacts {
  strategy: RolloutStrategy;
  publish: "DevicePlugin" | "DRA";
  /**
   * Every node the rollout targets (kubelets too old for the plugin are not targeted), with its
   * kubelet version and the upgrade mode the planner gives it: Replace where the kubelet cannot surge.
   */
  nodes: readonly { kubeletVersion: string; mode: UpgradeMode }[];
}

/**
 * SurgeUpgrades: whether a plugin upgrade can surge on every targeted node (the new plugin beside the old
 * one, no window without devices), and where it cannot, how many nodes replace instead and which
 * kubelet versions they run. Only for strategies that would surge (Auto, Surge): under Replace no node
 * surges by choice and the condition is not set (undefined).
 */
export function surgeUpgradesCondition(facts: SurgeUpgradeFacts): FeatureCondition | undefined {
  if (facts.strategy === "Replace") return undefined;
  const feature = SURGE_FEATURE[facts.publish];
  const total = facts.nodes.length;
  if (total === 0) {
    return {
      type: SURGE_UPGRADES,
      status: "Unknown",
      reason: FEATURE_REASONS.noMatchingNodes,
      message: `no nodes are targeted; surging needs kubelets ${showRelease(feature.fixed[0]!)} or later, which ${feature.has}`,
    };
  }
  const replacing = facts.nodes.filter((n) => n.mode === "Replace");
  if (replacing.length === 0) {
    const versions = exampleVersions(facts.nodes.map((n) => n.kubeletVersion));
    return {
      type: SURGE_UPGRADES,
      status: "True",
      reason: FEATURE_REASONS.surgeSupported,
      message:
        total === 1
          ? `1 of 1 node surges: its kubelet (${versions}) ${feature.hasOne}`
          : `${total} of ${nodes(total)} surge: their kubelets (${versions}) ${feature.has}`,
    };
  }
  const versions = exampleVersions(replacing.map((n) => n.kubeletVersion));
  const one = replacing.length === 1;
  const what = one
    ? `1 of ${nodes(total)} replaces instead of surging: its kubelet (${versions}) is`
    : `${replacing.length} of ${nodes(total)} replace instead of surging: their kubelets (${versions}) are`;
  const asked = facts.strategy === "Surge" ? "spec.upgrade.strategy is Surge, but " : "";
  return {
    type: SURGE_UPGRADES,
    status: "False",
    reason: feature.reason,
    message: `${asked}${what} ${olderThan(feature.fixed)}, which ${feature.feature} need`,
  };
}

export interface DraPublishingFacts {
  /** Whether the API server serves resource.k8s.io/v1 (ResourceSlices, DeviceClasses). */
  resourceApiServed: boolean;
  /** Nodes the config matches (nodeSelector and tolerations), kubelets too old for DRA included. */
  matched: number;
  /** The kubelet versions of the matched nodes too old for DRA plugins or unreadable, one per node. */
  tooOld: readonly string[];
}

/**
 * DRAPublishing: whether the config's devices can be published through DRA. False with
 * ResourceAPIUnavailable when the API server does not serve resource.k8s.io/v1 (nothing can be
 * published anywhere: the caller makes the config Stalled), or with KubeletTooOld when some matched
 * nodes' kubelets cannot run a DRA plugin (those nodes get none; each is also a KubeletTooOld problem).
 */
export function draPublishingCondition(facts: DraPublishingFacts): FeatureCondition {
  if (!facts.resourceApiServed) {
    return {
      type: DRA_PUBLISHING,
      status: "False",
      reason: FEATURE_REASONS.resourceApiUnavailable,
      message:
        "the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: " +
        "enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) " +
        "or set spec.publish to DevicePlugin",
    };
  }
  if (facts.tooOld.length > 0) {
    const count = facts.tooOld.length;
    const versions = exampleVersions(facts.tooOld);
    const unreadable = facts.tooOld.some((v) => parseKubeletVersion(v) === undefined);
    const minimum = showRelease(MINIMUM_DRA_KUBELET.minimum);
    const what =
      count === 1
        ? `${count} of ${nodes(facts.matched)} runs no DRA plugin: its kubelet (${versions}) is`
        : `${count} of ${nodes(facts.matched)} run no DRA plugin: their kubelets (${versions}) are`;
    return {
      type: DRA_PUBLISHING,
      status: "False",
      reason: FEATURE_REASONS.kubeletTooOld,
      message: `${what} older than ${minimum}${unreadable ? " or unreadable" : ""}, which ${MINIMUM_DRA_KUBELET.needs} need`,
    };
  }
  return {
    type: DRA_PUBLISHING,
    status: "True",
    reason: FEATURE_REASONS.resourceApiServed,
    message:
      facts.matched === 0
        ? "the API server serves resource.k8s.io/v1; no nodes match"
        : `the API server serves resource.k8s.io/v1 and the kubelets of all ${nodes(facts.matched)} run DRA plugins`,
  };
}
