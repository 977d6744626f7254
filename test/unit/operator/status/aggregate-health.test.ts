// aggregateStatus node by node: a healthy cluster, each problem a node can have and what it does to Ready
// and Degraded, the device counts, and reports under an old name beside the current one.
import { describe, expect, it } from "vitest";
import type { DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { DevicePluginConfigStatusSchema } from "../../../../src/api/v1beta1/status.js";
import { aggregateStatus, previousStatusOf } from "../../../../src/operator/status/aggregate.js";
import {
  condition,
  conditionSummary,
  config,
  input,
  three,
  world,
  type NodeSetup,
} from "./aggregate-support.js";

describe("aggregateStatus", () => {
  it("reports a healthy cluster as Ready with full counts", () => {
    const cfg = config();
    const { status, events } = aggregateStatus(input(cfg, three()));
    const at = "2025-03-01T10:00:00Z";
    expect(status).toEqual({
      observedGeneration: 2,
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "AllNodesReady",
          message: "3/3 nodes ready",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Reconciling",
          status: "False",
          reason: "RolloutComplete",
          message: "3/3 plugin pods run the current template",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Stalled",
          status: "False",
          reason: "NoErrors",
          message: "the plugin objects are applied",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Degraded",
          status: "False",
          reason: "NoProblems",
          message: "no problems on 3 nodes",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
      ],
      nodes: { desired: 3, ready: 3, available: 3, updated: 3, summary: "3/3" },
      devices: { capacity: 12, allocatable: 12, unhealthy: 0, allocated: 0, summary: "12/12" },
      problems: [],
      problemsOmitted: 0,
      daemonSetName: "dpo-example-foo",
    });
    expect(events).toEqual([{ type: "Normal", reason: "Ready", message: "3/3 nodes ready" }]);
  });

  it.each<{ case: string; replicas: number; devices: string[]; unhealthy: number; summary: string }>([
    { case: "without sharing", replicas: 1, devices: ["foo-1"], unhealthy: 1, summary: "11/12" },
    {
      case: "time-sliced ×4",
      replicas: 4,
      devices: ["foo-1::0", "foo-1::1", "foo-1::2", "foo-1::3"],
      unhealthy: 4,
      summary: "44/48",
    },
  ])("shows an unhealthy device $case as UnhealthyDevices with the advertised ids, still Ready", (row) => {
    const cfg = config(row.replicas);
    const { status } = aggregateStatus(input(cfg, three({ n2: { report: { unhealthy: [1] } } })));
    expect(status.problems).toEqual([
      {
        node: "n2",
        reason: "UnhealthyDevices",
        message: `${row.unhealthy} of ${4 * row.replicas} devices unhealthy: MarkedUnhealthy`,
        devices: row.devices,
      },
    ]);
    expect(status.devices).toMatchObject({ unhealthy: row.unhealthy, summary: row.summary });
    expect(status.nodes).toMatchObject({ ready: 3, summary: "3/3" });
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/UnhealthyDevices",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: UnhealthyDevices 1");
  });

  it.each<{ case: string; n2: Partial<NodeSetup>; reason: string; message: RegExp }>([
    {
      case: "plugin stopped: the kubelet keeps capacity but nothing is allocatable (stale report)",
      n2: { allocatable: 0 },
      reason: "NoCapacity",
      message: /capacity 4, allocatable 0; the plugin advertises 4, 4 healthy/,
    },
    {
      case: "plugin gone for long: the kubelet dropped the resource",
      n2: { capacity: undefined, allocatable: undefined },
      reason: "NoCapacity",
      message: /capacity none, allocatable none/,
    },
    {
      case: "plugin reports NotRegistered while its pod looks ready",
      n2: { report: { state: "NotRegistered", lastError: "kubelet.sock: connection refused" } },
      reason: "PluginNotRegistered",
      message: /not registered with the kubelet: kubelet.sock: connection refused/,
    },
    {
      case: "plugin has not reported",
      n2: { report: "none" },
      reason: "PluginNotRegistered",
      message: /has not reported/,
    },
    {
      case: "pod not ready and the report says why",
      n2: { pod: { ready: false }, report: { state: "NotRegistered" } },
      reason: "PluginNotRegistered",
      message: /not registered/,
    },
    {
      case: "pod crash-looping",
      n2: { pod: { ready: false, waiting: "CrashLoopBackOff" } },
      reason: "PluginNotReady",
      message: /is Running \(CrashLoopBackOff\) and not ready/,
    },
    { case: "no pod on the node", n2: { pod: "none" }, reason: "PluginNotReady", message: /no plugin pod/ },
    {
      case: "kubelet capacity differs from the plugin's",
      n2: { capacity: 3, allocatable: 3 },
      reason: "CapacityMismatch",
      message: /capacity 3, allocatable 3; the plugin advertises 4, 4 healthy/,
    },
    {
      case: "kubelet allocatable differs from the plugin's healthy count",
      n2: { allocatable: 2 },
      reason: "CapacityMismatch",
      message: /allocatable 2; the plugin advertises 4, 4 healthy/,
    },
  ])("$case → $reason, node not ready", ({ n2, reason, message }) => {
    const cfg = config();
    const { status } = aggregateStatus(input(cfg, three({ n2 })));
    expect(status.problems).toHaveLength(1);
    expect(status.problems?.[0]).toMatchObject({ node: "n2", reason });
    expect(status.problems?.[0]?.message).toMatch(message);
    expect(status.nodes).toMatchObject({ desired: 3, ready: 2, summary: "2/3" });
    expect(conditionSummary(status)).toEqual([
      "Ready=False/NodesNotReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      `Degraded=True/${reason}`,
    ]);
    expect(condition(status, "Ready").message).toBe(`2/3 nodes ready; not ready: n2 (${reason})`);
  });

  it("sums device totals from the kubelet and unhealthy counts from the reports", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { report: { unhealthy: [0, 3] } }, n3: { allocatable: 0 } })),
    );
    expect(status.devices).toEqual({
      capacity: 12,
      allocatable: 6,
      unhealthy: 2,
      allocated: 0,
      summary: "6/12",
    });
  });

  it("sums the devices the kubelets allocated from the reports; a report that does not know counts none", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { report: { allocated: 3 } }, n2: { report: { allocated: 1 } }, n3: {} })),
    );
    expect(status.devices).toEqual({
      capacity: 12,
      allocatable: 12,
      unhealthy: 0,
      allocated: 4,
      summary: "12/12",
    });
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
    // A status an earlier operator wrote, without the field, still reads as the previous status.
    const older: Record<string, unknown> = { ...status.devices };
    delete older.allocated;
    expect(previousStatusOf({ status: { ...status, devices: older } })).toBeDefined();
  });

  describe("while reports are renamed (an old-named one lingers beside the current one)", () => {
    /** n2's report as `report` describes it, under the `<config>-<node>` name of earlier plugins. */
    function oldNamed(
      cfg: DevicePluginConfig,
      report: NodeSetup["report"],
      updateTime: string,
    ): DeviceNodeState {
      const [r] = world(cfg, [{ name: "n2", report }]).reports;
      return {
        ...r!,
        metadata: { ...r!.metadata, name: `${cfg.metadata.name}-n2` },
        status: { ...r!.status!, updateTime },
      };
    }

    it("counts the node once, as its current report says, even when the old one is newer", () => {
      const cfg = config();
      const base = input(cfg, three());
      const stale = oldNamed(cfg, { unhealthy: [0, 1], state: "NotRegistered" }, "2025-03-01T09:59:00Z");
      const { status } = aggregateStatus({ ...base, reports: [stale, ...base.reports] });
      expect(status).toEqual(aggregateStatus(base).status);
      expect(status.nodes).toMatchObject({ desired: 3, ready: 3 });
      expect(status.devices).toMatchObject({ capacity: 12, allocatable: 12, unhealthy: 0 });
    });

    it("takes the current report's problem, once, over a healthy old one", () => {
      const cfg = config();
      const base = input(cfg, three({ n2: { report: { unhealthy: [1] } } }));
      const stale = oldNamed(cfg, {}, "2025-03-01T09:59:00Z");
      const { status } = aggregateStatus({ ...base, reports: [...base.reports, stale] });
      expect(status.devices?.unhealthy).toBe(1);
      expect(status.problems).toEqual([expect.objectContaining({ node: "n2", reason: "UnhealthyDevices" })]);
    });

    it("still uses the old-named report of a node whose plugin has not written the current one", () => {
      const cfg = config();
      const base = input(cfg, three({ n2: { report: "none" } }));
      const stale = oldNamed(cfg, { unhealthy: [1] }, "2025-03-01T09:00:00Z");
      const { status } = aggregateStatus({ ...base, reports: [...base.reports, stale] });
      expect(status.devices?.unhealthy).toBe(1);
      expect(status.problems?.map((p) => p.node)).toEqual(["n2"]);
    });
  });
});
