// aggregateStatus's SurgeUpgrades condition: which nodes replace instead of surging and why, from the
// rollout's modes, informational beside Ready, Stalled and Degraded.
import { describe, expect, it } from "vitest";
import { DevicePluginConfigStatusSchema } from "../../../../src/api/v1beta1/status.js";
import { aggregateStatus, type AggregateStatusInput } from "../../../../src/operator/status/aggregate.js";
import { condition, conditionSummary, configWith, input, T1, versions } from "./aggregate-support.js";

describe("aggregateStatus: version-dependent features say in the status why they are off", () => {
  const modes = { n1: "Replace", n2: "Replace", n3: "Surge" } as const;

  it("SurgeUpgrades=False names how many nodes replace and why, and leaves Ready, Stalled and Degraded alone", () => {
    const cfg = configWith({ upgrade: { strategy: "Auto" } });
    const base = input(cfg, versions("v1.35.4", "v1.35.4", "v1.37.2"));
    const without = aggregateStatus(base).status;
    const { status, events } = aggregateStatus({ ...base, upgradeModes: modes });
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=False/NoProblems",
      "SurgeUpgrades=False/KubeletWithoutPerSocketEndpoints",
    ]);
    expect(condition(status, "SurgeUpgrades")).toEqual({
      type: "SurgeUpgrades",
      status: "False",
      reason: "KubeletWithoutPerSocketEndpoints",
      message:
        "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
      lastTransitionTime: "2025-03-01T10:00:00Z",
      observedGeneration: 2,
    });
    // An informational condition: the rest of the status is what it is without it, and no Event.
    expect({ ...status, conditions: status.conditions?.slice(0, 4) }).toEqual(without);
    expect(events).toEqual([{ type: "Normal", reason: "Ready", message: "3/3 nodes ready" }]);
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("SurgeUpgrades turns True once the kubelets are upgraded, with a new transition time", () => {
    const cfg = configWith({});
    const before = aggregateStatus({
      ...input(cfg, versions("v1.35.4", "v1.35.4", "v1.37.2")),
      upgradeModes: modes,
    }).status;
    const { status } = aggregateStatus({
      ...input(cfg, versions("v1.37.2", "v1.37.2", "v1.37.2")),
      upgradeModes: { n1: "Surge", n2: "Surge", n3: "Surge" },
      previous: before,
      now: T1,
    });
    expect(condition(status, "SurgeUpgrades")).toMatchObject({
      status: "True",
      reason: "KubeletsSupportSurge",
      message: "3 of 3 nodes surge: their kubelets (v1.37.2) keep one device-plugin endpoint per socket",
      lastTransitionTime: "2025-03-01T10:05:00Z",
    });
    expect(condition(status, "Ready").lastTransitionTime).toBe("2025-03-01T10:00:00Z");
  });

  it("sets no SurgeUpgrades under Replace, nor without the rollout's modes, nor while the config yields", () => {
    const nodes = versions("v1.35.4", "v1.35.4", "v1.37.2");
    const types = (extra: Partial<AggregateStatusInput>, cfg = configWith({})) =>
      (aggregateStatus({ ...input(cfg, nodes), ...extra }).status.conditions ?? []).map((c) => c.type);
    const four = ["Ready", "Reconciling", "Stalled", "Degraded"];
    expect(types({ upgradeModes: modes }, configWith({ upgrade: { strategy: "Replace" } }))).toEqual(four);
    expect(types({})).toEqual(four);
    expect(types({ upgradeModes: modes, conflictWith: "older" })).toEqual(four);
    expect(types({ upgradeModes: modes }, configWith({ upgrade: { strategy: "Surge" } }))).toEqual([
      ...four,
      "SurgeUpgrades",
    ]);
  });

  it("counts only the targeted nodes: a kubelet too old for the plugin is a KubeletTooOld problem, and Degraded", () => {
    const cfg = configWith({});
    const { status, events } = aggregateStatus({
      ...input(cfg, [
        ...versions("v1.35.4", "v1.37.2", "v1.37.2").slice(0, 2),
        { name: "n3", kubeletVersion: "v1.28.9", pod: "none", report: "none" },
      ]),
      upgradeModes: { n1: "Replace", n2: "Surge" },
      upgradeProblems: [
        {
          node: "n3",
          reason: "KubeletTooOld",
          message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
        },
      ],
    });
    expect(status.nodes).toMatchObject({ desired: 2, ready: 2 });
    expect(status.problems).toEqual([
      {
        node: "n3",
        reason: "KubeletTooOld",
        message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
      },
    ]);
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/KubeletTooOld",
      "SurgeUpgrades=False/KubeletWithoutPerSocketEndpoints",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: KubeletTooOld 1");
    expect(condition(status, "SurgeUpgrades").message).toMatch(/^1 of 2 nodes replaces instead of surging/);
    expect(events).toContainEqual({
      type: "Warning",
      reason: "KubeletTooOld",
      message: "node n3: kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
    });
  });
});
