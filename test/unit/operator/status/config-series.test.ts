// A config's status as the dpo_config_* series: what configSeries reads, and what OperatorMetrics serves
// from it (every reason and phase as its own series, gone with the config or the leadership).
import { describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus, ProblemReason } from "../../../../src/api/v1beta1/status.js";
import { OperatorMetrics } from "../../../../src/operator/metrics.js";
import { configSeries, type ConfigSeries } from "../../../../src/operator/status/config-series.js";

const T = "2026-01-01T00:00:00Z";
const ready = (status: "True" | "False") => ({
  type: "Ready",
  status,
  reason: "R",
  message: "",
  lastTransitionTime: T,
});

describe("configSeries", () => {
  const cases: {
    name: string;
    status: DevicePluginConfigStatus;
    counts?: ReadonlyMap<ProblemReason, number>;
    want: ConfigSeries;
  }[] = [
    {
      name: "an empty status: not ready, all zero, no rollout",
      status: {},
      want: {
        ready: false,
        stalledReason: undefined,
        nodesDesired: 0,
        nodesReady: 0,
        nodesAvailable: 0,
        nodesUpdated: 0,
        devicesAdvertised: 0,
        devicesAllocatable: 0,
        devicesUnhealthy: 0,
        problemNodes: {},
        rolloutPhase: undefined,
      },
    },
    {
      name: "a ready config with its counts and a complete rollout",
      status: {
        conditions: [ready("True")],
        nodes: { desired: 3, ready: 2, available: 3, updated: 2, summary: "3/3" },
        devices: { capacity: 12, allocatable: 11, unhealthy: 1, summary: "11/12" },
        upgrade: {
          phase: "Complete",
          currentRevision: "a",
          updateRevision: "a",
          updated: 3,
          total: 3,
          summary: "3/3",
        },
      },
      want: {
        ready: true,
        stalledReason: undefined,
        nodesDesired: 3,
        nodesReady: 2,
        nodesAvailable: 3,
        nodesUpdated: 2,
        devicesAdvertised: 12,
        devicesAllocatable: 11,
        devicesUnhealthy: 1,
        problemNodes: {},
        rolloutPhase: "Complete",
      },
    },
    {
      name: "Ready False, listed problems counted by reason when no counts are given",
      status: {
        conditions: [ready("False")],
        problems: [
          { node: "a", reason: "CapacityMismatch" },
          { node: "b", reason: "CapacityMismatch" },
          { node: "c", reason: "PluginNotRegistered" },
        ],
      },
      want: {
        ready: false,
        stalledReason: undefined,
        nodesDesired: 0,
        nodesReady: 0,
        nodesAvailable: 0,
        nodesUpdated: 0,
        devicesAdvertised: 0,
        devicesAllocatable: 0,
        devicesUnhealthy: 0,
        problemNodes: { CapacityMismatch: 2, PluginNotRegistered: 1 },
        rolloutPhase: undefined,
      },
    },
    {
      name: "the counts before the list was cut win over the listed problems",
      status: { problems: [{ node: "a", reason: "UnhealthyDevices" }], problemsOmitted: 40 },
      counts: new Map([["UnhealthyDevices", 41]]),
      want: {
        ready: false,
        stalledReason: undefined,
        nodesDesired: 0,
        nodesReady: 0,
        nodesAvailable: 0,
        nodesUpdated: 0,
        devicesAdvertised: 0,
        devicesAllocatable: 0,
        devicesUnhealthy: 0,
        problemNodes: { UnhealthyDevices: 41 },
        rolloutPhase: undefined,
      },
    },
  ];
  it("reads the Stalled condition's reason while it is True, and none while it is False", () => {
    const stalled = (status: "True" | "False", reason: string) => ({
      conditions: [ready("False"), { type: "Stalled", status, reason, message: "", lastTransitionTime: T }],
    });
    expect(configSeries(stalled("True", "ResourceNameConflict")).stalledReason).toBe("ResourceNameConflict");
    expect(configSeries(stalled("True", "ApplyFailed")).stalledReason).toBe("ApplyFailed");
    expect(configSeries(stalled("True", "ResourceAPIUnavailable")).stalledReason).toBe(
      "ResourceAPIUnavailable",
    );
    expect(configSeries(stalled("False", "NoErrors")).stalledReason).toBeUndefined();
    expect(configSeries(stalled("False", "ApplyFailed")).stalledReason).toBeUndefined();
  });

  it("reads available as ready in a status written before available existed", () => {
    const old = configSeries({ nodes: { desired: 3, ready: 2, updated: 2, summary: "2/3" } });
    expect(old.nodesAvailable).toBe(2);
  });

  it.each(cases)("$name", ({ status, counts, want }) => {
    expect(configSeries(status, counts)).toEqual(want);
  });
});

const series: ConfigSeries = {
  ready: true,
  stalledReason: undefined,
  nodesDesired: 3,
  nodesReady: 2,
  nodesAvailable: 3,
  nodesUpdated: 1,
  devicesAdvertised: 12,
  devicesAllocatable: 10,
  devicesUnhealthy: 2,
  problemNodes: { UnhealthyDevices: 1 },
  rolloutPhase: "Progressing",
};

describe("OperatorMetrics config series", () => {
  it("serves each value, every reason and every phase, labelled with the config", async () => {
    const m = new OperatorMetrics();
    m.recordConfig("foo", series);
    const text = await m.render();
    for (const line of [
      'dpo_config_ready{config="foo"} 1',
      'dpo_config_nodes_desired{config="foo"} 3',
      'dpo_config_nodes_ready{config="foo"} 2',
      'dpo_config_nodes_available{config="foo"} 3',
      'dpo_config_nodes_updated{config="foo"} 1',
      'dpo_config_devices_advertised{config="foo"} 12',
      'dpo_config_devices_allocatable{config="foo"} 10',
      'dpo_config_devices_unhealthy{config="foo"} 2',
      'dpo_config_problem_nodes{config="foo",reason="UnhealthyDevices"} 1',
      'dpo_config_problem_nodes{config="foo",reason="CapacityMismatch"} 0',
      'dpo_config_rollout_phase{config="foo",phase="Progressing"} 1',
      'dpo_config_rollout_phase{config="foo",phase="RolledBack"} 0',
    ]) {
      expect(text.split("\n")).toContain(line);
    }
  });

  it("serves the Stalled reason as 1 and every other reason as 0, and all 0 once the config is no longer stalled", async () => {
    const m = new OperatorMetrics();
    m.recordConfig("foo", { ...series, ready: false, stalledReason: "ApplyFailed" });
    let lines = (await m.render()).split("\n");
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="ApplyFailed"} 1');
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="ResourceNameConflict"} 0');
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="ResourceAPIUnavailable"} 0');
    m.recordConfig("foo", series);
    lines = (await m.render()).split("\n");
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="ApplyFailed"} 0');
    expect(lines.filter((l) => l.startsWith("dpo_config_stalled{") && l.endsWith(" 1"))).toEqual([]);
  });

  it("drops every series of a forgotten config and keeps the others'", async () => {
    const m = new OperatorMetrics();
    m.recordConfig("foo", series);
    m.recordConfig("bar", { ...series, rolloutPhase: undefined });
    m.forgetConfig("foo");
    const text = await m.render();
    expect(text).not.toContain('config="foo"');
    expect(text).toContain('dpo_config_ready{config="bar"} 1');
    expect(text).toContain('dpo_config_rollout_phase{config="bar",phase="Complete"} 0');
  });

  it("drops every config's series when the replica stops leading", async () => {
    const m = new OperatorMetrics();
    m.recordConfig("foo", series);
    m.recordConfig("bar", series);
    m.forgetAllConfigs();
    expect(await m.render()).not.toMatch(/^dpo_config_\w+\{/m);
  });

  it("has every storage migration result at 0 from the start, so increase() sees the first failure", async () => {
    const text = await new OperatorMetrics().render();
    expect(text.split("\n")).toContain('dpo_operator_storage_migrations_total{result="Failed"} 0');
  });

  it("has every reconcile result at 0 from the start, so increase() sees the first failed reconcile", async () => {
    const lines = (await new OperatorMetrics().render()).split("\n");
    for (const result of ["ok", "requeue", "error"]) {
      expect(lines).toContain(`dpo_operator_reconciles_total{result="${result}"} 0`);
    }
  });
});
