// The conditions of version-dependent features: SurgeUpgrades from the kubelets' versions and the rollout's
// modes, DRAPublishing from the API server's groups and the kubelets too old for DRA plugins.
import { describe, expect, it } from "vitest";
import {
  draPublishingCondition,
  exampleVersions,
  surgeUpgradesCondition,
  type DraPublishingFacts,
  type FeatureCondition,
  type SurgeUpgradeFacts,
} from "../../../../src/operator/status/features.js";

/** Nodes as "version:mode" pairs, S for Surge and R for Replace. */
function nodes(...specs: string[]): SurgeUpgradeFacts["nodes"] {
  return specs.map((s) => {
    const [kubeletVersion, mode] = s.split(":") as [string, "S" | "R"];
    return { kubeletVersion, mode: mode === "S" ? ("Surge" as const) : ("Replace" as const) };
  });
}

describe("surgeUpgradesCondition", () => {
  it.each<{ case: string; facts: SurgeUpgradeFacts; want: FeatureCondition | undefined }>([
    {
      case: "Auto, every kubelet with per-socket endpoints",
      facts: {
        strategy: "Auto",
        publish: "DevicePlugin",
        nodes: nodes("v1.37.2:S", "v1.37.0:S", "v1.37.2+k3s1:S"),
      },
      want: {
        type: "SurgeUpgrades",
        status: "True",
        reason: "KubeletsSupportSurge",
        message:
          "3 of 3 nodes surge: their kubelets (v1.37.0, v1.37.2, v1.37.2+k3s1) keep one device-plugin endpoint per socket",
      },
    },
    {
      case: "Auto, one node",
      facts: { strategy: "Auto", publish: "DevicePlugin", nodes: nodes("v1.37.2:S") },
      want: {
        type: "SurgeUpgrades",
        status: "True",
        reason: "KubeletsSupportSurge",
        message: "1 of 1 node surges: its kubelet (v1.37.2) keeps one device-plugin endpoint per socket",
      },
    },
    {
      case: "Auto, two of three kubelets before v1.37.0",
      facts: {
        strategy: "Auto",
        publish: "DevicePlugin",
        nodes: nodes("v1.35.4:R", "v1.35.4:R", "v1.37.2:S"),
      },
      want: {
        type: "SurgeUpgrades",
        status: "False",
        reason: "KubeletWithoutPerSocketEndpoints",
        message:
          "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
      },
    },
    {
      case: "Auto, one old kubelet",
      facts: { strategy: "Auto", publish: "DevicePlugin", nodes: nodes("v1.36.3-eks-1234:R", "v1.37.2:S") },
      want: {
        type: "SurgeUpgrades",
        status: "False",
        reason: "KubeletWithoutPerSocketEndpoints",
        message:
          "1 of 2 nodes replaces instead of surging: its kubelet (v1.36.3-eks-1234) is older than v1.37.0, which per-socket device-plugin endpoints need",
      },
    },
    {
      case: "Surge asked for explicitly, every kubelet too old for it",
      facts: { strategy: "Surge", publish: "DevicePlugin", nodes: nodes("v1.35.4:R", "v1.36.3:R") },
      want: {
        type: "SurgeUpgrades",
        status: "False",
        reason: "KubeletWithoutPerSocketEndpoints",
        message:
          "spec.upgrade.strategy is Surge, but 2 of 2 nodes replace instead of surging: their kubelets (v1.35.4, v1.36.3) are older than v1.37.0, which per-socket device-plugin endpoints need",
      },
    },
    {
      case: "Surge with kubelets that can",
      facts: { strategy: "Surge", publish: "DevicePlugin", nodes: nodes("v1.37.2:S", "v1.37.2:S") },
      want: {
        type: "SurgeUpgrades",
        status: "True",
        reason: "KubeletsSupportSurge",
        message: "2 of 2 nodes surge: their kubelets (v1.37.2) keep one device-plugin endpoint per socket",
      },
    },
    {
      case: "DRA: v1.32 kubelets replace, later ones surge",
      facts: { strategy: "Auto", publish: "DRA", nodes: nodes("v1.32.13:R", "v1.35.4:S", "v1.33.4:S") },
      want: {
        type: "SurgeUpgrades",
        status: "False",
        reason: "KubeletWithoutSeamlessDRAUpgrades",
        message:
          "1 of 3 nodes replaces instead of surging: its kubelet (v1.32.13) is older than v1.33.0, which seamless DRA driver upgrades need",
      },
    },
    {
      case: "DRA: v1.35 kubelets surge (the DRA fix is older than the device-plugin one)",
      facts: { strategy: "Auto", publish: "DRA", nodes: nodes("v1.35.4:S") },
      want: {
        type: "SurgeUpgrades",
        status: "True",
        reason: "KubeletsSupportSurge",
        message: "1 of 1 node surges: its kubelet (v1.35.4) keeps every registered instance of a DRA driver",
      },
    },
    {
      case: "no targeted node: not known",
      facts: { strategy: "Auto", publish: "DevicePlugin", nodes: [] },
      want: {
        type: "SurgeUpgrades",
        status: "Unknown",
        reason: "NoMatchingNodes",
        message:
          "no nodes are targeted; surging needs kubelets v1.37.0 or later, which keep one device-plugin endpoint per socket",
      },
    },
    {
      case: "Replace: no node surges by choice, no condition",
      facts: { strategy: "Replace", publish: "DevicePlugin", nodes: nodes("v1.35.4:R") },
      want: undefined,
    },
  ])("$case", ({ facts, want }) => {
    expect(surgeUpgradesCondition(facts)).toEqual(want);
  });

  it("names at most three versions however many nodes replace: the message does not grow with the cluster", () => {
    const many = Array.from({ length: 5000 }, (_, i) => `v1.3${5 + (i % 2)}.${i % 7}:R`);
    const condition = surgeUpgradesCondition({
      strategy: "Auto",
      publish: "DevicePlugin",
      nodes: nodes(...many, "v1.37.2:S"),
    });
    expect(condition?.message).toBe(
      "5000 of 5001 nodes replace instead of surging: their kubelets (v1.35.0, v1.35.1, v1.35.2 and 11 more) are older than v1.37.0, which per-socket device-plugin endpoints need",
    );
  });
});

describe("draPublishingCondition", () => {
  it.each<{ case: string; facts: DraPublishingFacts; want: FeatureCondition }>([
    {
      case: "the API served, every kubelet runs DRA plugins",
      facts: { resourceApiServed: true, matched: 3, tooOld: [] },
      want: {
        type: "DRAPublishing",
        status: "True",
        reason: "ResourceAPIServed",
        message: "the API server serves resource.k8s.io/v1 and the kubelets of all 3 nodes run DRA plugins",
      },
    },
    {
      case: "the API served, no nodes match",
      facts: { resourceApiServed: true, matched: 0, tooOld: [] },
      want: {
        type: "DRAPublishing",
        status: "True",
        reason: "ResourceAPIServed",
        message: "the API server serves resource.k8s.io/v1; no nodes match",
      },
    },
    {
      case: "the API not served: nothing is published anywhere, whatever the kubelets",
      facts: { resourceApiServed: false, matched: 3, tooOld: ["v1.31.4"] },
      want: {
        type: "DRAPublishing",
        status: "False",
        reason: "ResourceAPIUnavailable",
        message:
          "the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) or set spec.publish to DevicePlugin",
      },
    },
    {
      case: "one kubelet before the DRA plugin API",
      facts: { resourceApiServed: true, matched: 3, tooOld: ["v1.31.4"] },
      want: {
        type: "DRAPublishing",
        status: "False",
        reason: "KubeletTooOld",
        message:
          "1 of 3 nodes runs no DRA plugin: its kubelet (v1.31.4) is older than v1.32.0, which DRA plugins (the kubelet's v1beta1.DRAPlugin service) need",
      },
    },
    {
      case: "two kubelets, one unreadable",
      facts: { resourceApiServed: true, matched: 2, tooOld: ["v1.30.1", "junk"] },
      want: {
        type: "DRAPublishing",
        status: "False",
        reason: "KubeletTooOld",
        message:
          "2 of 2 nodes run no DRA plugin: their kubelets (v1.30.1, junk) are older than v1.32.0 or unreadable, which DRA plugins (the kubelet's v1beta1.DRAPlugin service) need",
      },
    },
  ])("$case", ({ facts, want }) => {
    expect(draPublishingCondition(facts)).toEqual(want);
  });
});

describe("exampleVersions", () => {
  it.each<{ versions: string[]; want: string }>([
    { versions: ["v1.35.4"], want: "v1.35.4" },
    { versions: ["v1.35.4", " v1.35.4\n", "v1.35.4"], want: "v1.35.4" },
    // Kubernetes' order, not the text's: v1.9 before v1.10, a pre-release before its release.
    {
      versions: ["v1.36.10", "v1.36.9", "v1.37.0", "v1.37.0-rc.1"],
      want: "v1.36.9, v1.36.10, v1.37.0-rc.1 and 1 more",
    },
    { versions: ["junk", "", "v1.35.4"], want: "v1.35.4, none, junk" },
  ])("$versions → $want", ({ versions, want }) => {
    expect(exampleVersions(versions)).toBe(want);
  });
});
