// aggregateStatus while the config cannot run (a resourceName conflict, a refused apply), while its
// DaemonSet rolls out, and with the rollout's own problems (a kubelet too old, a failed upgrade) in Degraded.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { PROBLEM_REASONS } from "../../../../src/api/v1beta1/status.js";
import { aggregateStatus } from "../../../../src/operator/status/aggregate.js";
import { DEGRADED_REASON_ORDER } from "../../../../src/operator/status/degraded.js";
import {
  condition,
  conditionSummary,
  config,
  daemonSet,
  input,
  RESOURCE,
  three,
} from "./aggregate-support.js";

describe("aggregateStatus", () => {
  it("stalls on a resourceName conflict: no DaemonSet, nothing evaluated", () => {
    const cfg = config();
    const { status, events } = aggregateStatus(
      input(cfg, three(), { conflictWith: "older-foo", daemonSet: undefined }),
    );
    expect(conditionSummary(status)).toEqual([
      "Ready=False/ResourceNameConflict",
      "Reconciling=False/ResourceNameConflict",
      "Stalled=True/ResourceNameConflict",
      "Degraded=Unknown/ResourceNameConflict",
    ]);
    expect(condition(status, "Stalled").message).toBe(
      `DevicePluginConfig older-foo already serves ${RESOURCE} on overlapping nodes; this config gets no DaemonSet while it does`,
    );
    expect(status.nodes).toEqual({ desired: 3, ready: 0, available: 0, updated: 0, summary: "0/3" });
    expect(status.devices).toEqual({
      capacity: 0,
      allocatable: 0,
      unhealthy: 0,
      allocated: 0,
      summary: "0/0",
    });
    expect(status.problems).toEqual([]);
    expect(status).not.toHaveProperty("daemonSetName");
    expect(events).toEqual([
      { type: "Warning", reason: "ResourceNameConflict", message: condition(status, "Stalled").message },
    ]);
  });

  it("stalls when applying failed, and still reports the nodes", () => {
    const cfg = config();
    const { status } = aggregateStatus(input(cfg, three(), { applyError: "daemonsets.apps is forbidden" }));
    expect(conditionSummary(status)).toEqual([
      "Ready=False/ApplyFailed",
      "Reconciling=False/ApplyFailed",
      "Stalled=True/ApplyFailed",
      "Degraded=False/NoProblems",
    ]);
    expect(condition(status, "Stalled").message).toContain("daemonsets.apps is forbidden");
    expect(status.nodes?.ready).toBe(3);
  });

  it.each<{ case: string; daemonSet: (cfg: DevicePluginConfig) => V1DaemonSet | undefined; reason: string }>([
    { case: "DaemonSet not created yet", daemonSet: () => undefined, reason: "DaemonSetPending" },
    {
      case: "DaemonSet controller behind the last apply",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, generation: 2, observed: 1 }),
      reason: "Progressing",
    },
    {
      case: "cache still holding the previous template",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, hash: "previous" }),
      reason: "Progressing",
    },
    {
      case: "pods still being replaced",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, updated: 1 }),
      reason: "RollingOut",
    },
  ])("is Reconciling while rolling out: $case → $reason", ({ daemonSet: ds, reason }) => {
    const cfg = config();
    const { status, events } = aggregateStatus(
      input(cfg, three({ n2: { pod: { hash: "previous" } }, n3: { pod: { hash: "previous" } } }), {
        daemonSet: ds(cfg),
      }),
    );
    expect(conditionSummary(status)).toEqual([
      `Ready=False/${reason}`,
      `Reconciling=True/${reason}`,
      "Stalled=False/NoErrors",
      "Degraded=False/NoProblems",
    ]);
    expect(status.nodes).toMatchObject({ desired: 3, updated: 1 });
    expect(events).toEqual([]);
  });
});

describe("aggregateStatus: the rollout's problems count in Degraded", () => {
  const tooOld = {
    node: "n3",
    reason: "KubeletTooOld" as const,
    message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
  };

  it("a kubelet too old for the plugin: listed, Degraded with its reason, counted among the matched nodes", () => {
    const cfg = config();
    const setups = three({ n3: { pod: "none", report: "none" } });
    const { status, events } = aggregateStatus({ ...input(cfg, setups), upgradeProblems: [tooOld] });
    expect(status.nodes).toMatchObject({ desired: 2, ready: 2 });
    expect(status.problems).toEqual([tooOld]);
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/KubeletTooOld",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: KubeletTooOld 1");
    expect(events).toContainEqual({
      type: "Warning",
      reason: "Degraded",
      message: "KubeletTooOld: 1 of 3 nodes have problems: KubeletTooOld 1",
    });
  });

  it("a node whose upgrade failed is Degraded as UpgradeFailed", () => {
    const cfg = config();
    const failed = {
      node: "n1",
      reason: "UpgradeFailed" as const,
      message: "the kubelet did not advertise the new plugin",
    };
    const { status } = aggregateStatus({ ...input(cfg, three()), upgradeProblems: [failed] });
    expect(condition(status, "Degraded")).toMatchObject({
      status: "True",
      reason: "UpgradeFailed",
      message: "1 of 3 nodes have problems: UpgradeFailed 1",
    });
  });

  it("orders every problem reason for Degraded, the rollout's too", () => {
    expect([...DEGRADED_REASON_ORDER].sort()).toEqual([...PROBLEM_REASONS].sort());
  });
});
