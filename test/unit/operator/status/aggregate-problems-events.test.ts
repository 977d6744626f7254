// aggregateStatus's problem list and Degraded reason, condition transition times and the Events on
// transitions, a status independent of the caches' order that the CRD schema accepts; and statusEqual.
import { describe, expect, it } from "vitest";
import {
  DevicePluginConfigStatusSchema,
  type DevicePluginConfigStatus,
} from "../../../../src/api/v1beta1/status.js";
import { aggregateStatus, previousStatusOf } from "../../../../src/operator/status/aggregate.js";
import { statusEqual } from "../../../../src/operator/status/conditions.js";
import { condition, config, daemonSet, input, T1, three } from "./aggregate-support.js";

describe("aggregateStatus", () => {
  it("lists at most 20 problem nodes, sorted by name, and counts the rest", () => {
    const cfg = config();
    const names = Array.from({ length: 25 }, (_, i) => `node-${String(i).padStart(2, "0")}`).reverse();
    const { status } = aggregateStatus(
      input(
        cfg,
        names.map((name) => ({ name, pod: "none" as const })),
      ),
    );
    expect(status.problems).toHaveLength(20);
    expect(status.problems?.map((p) => p.node)).toEqual(names.slice().reverse().slice(0, 20));
    expect(status.problemsOmitted).toBe(5);
    expect(condition(status, "Degraded")).toMatchObject({
      reason: "PluginNotReady",
      message: "25 of 25 nodes have problems: PluginNotReady 25",
    });
    expect(condition(status, "Ready").message).toBe(
      "0/25 nodes ready; not ready: node-00 (PluginNotReady), node-01 (PluginNotReady), node-02 (PluginNotReady), node-03 (PluginNotReady), node-04 (PluginNotReady), and 20 more",
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("names the most frequent problem as Degraded's reason, the more fundamental on a tie", () => {
    const cfg = config();
    const mostly = aggregateStatus(
      input(cfg, [
        { name: "a", report: { unhealthy: [0] } },
        { name: "b", report: { unhealthy: [1] } },
        { name: "c", pod: "none" },
      ]),
    ).status;
    expect(condition(mostly, "Degraded")).toMatchObject({
      reason: "UnhealthyDevices",
      message: "3 of 3 nodes have problems: UnhealthyDevices 2, PluginNotReady 1",
    });
    const tie = aggregateStatus(
      input(cfg, [
        { name: "a", report: { unhealthy: [0] } },
        { name: "b", allocatable: 0 },
      ]),
    ).status;
    expect(condition(tie, "Degraded").reason).toBe("NoCapacity");
  });

  it("bounds the device list of a node to 32 ids", () => {
    const cfg = config(16);
    const { status } = aggregateStatus(input(cfg, [{ name: "n1", report: { unhealthy: [0, 1, 2] } }]));
    expect(status.problems?.[0]?.devices).toHaveLength(32);
    expect(status.problems?.[0]?.devices?.[31]).toBe("foo-1::15");
    expect(status.problems?.[0]?.message).toBe(
      "48 of 64 devices unhealthy (first 32 listed): MarkedUnhealthy",
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("keeps lastTransitionTime for conditions whose status did not change", () => {
    const cfg = config();
    const first = aggregateStatus(input(cfg, three())).status;
    const again = aggregateStatus(input(cfg, three(), { previous: first, now: T1 }));
    expect(again.status).toEqual(first);
    expect(statusEqual(first, again.status)).toBe(true);
    expect(again.events).toEqual([]);

    const degraded = aggregateStatus(
      input(cfg, three({ n1: { report: { unhealthy: [2] } } }), { previous: first, now: T1 }),
    ).status;
    expect(statusEqual(first, degraded)).toBe(false);
    expect(condition(degraded, "Ready").lastTransitionTime).toBe("2025-03-01T10:00:00Z");
    expect(condition(degraded, "Degraded").lastTransitionTime).toBe("2025-03-01T10:05:00Z");
  });

  it("emits Events on transitions only: degraded with the device id, then recovered", () => {
    const cfg = config(2);
    const healthy = aggregateStatus(input(cfg, three())).status;
    const sick = aggregateStatus(
      input(cfg, three({ n3: { report: { unhealthy: [1] } } }), { previous: healthy, now: T1 }),
    );
    expect(sick.events).toEqual([
      {
        type: "Warning",
        reason: "Degraded",
        message: "UnhealthyDevices: 1 of 3 nodes have problems: UnhealthyDevices 1",
      },
      {
        type: "Warning",
        reason: "UnhealthyDevices",
        message: "node n3: 2 of 8 devices unhealthy: MarkedUnhealthy [foo-1::0, foo-1::1]",
      },
    ]);
    const stillSick = aggregateStatus(
      input(cfg, three({ n3: { report: { unhealthy: [1] } } }), { previous: sick.status, now: T1 }),
    );
    expect(stillSick.events).toEqual([]);
    const recovered = aggregateStatus(input(cfg, three(), { previous: sick.status, now: T1 }));
    expect(recovered.events).toEqual([
      { type: "Normal", reason: "Recovered", message: "no problems on 3 nodes" },
    ]);
    const notReady = aggregateStatus(
      input(cfg, three({ n1: { allocatable: 0 } }), { previous: healthy, now: T1 }),
    );
    expect(notReady.events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Warning/NotReady",
      "Warning/Degraded",
      "Warning/NoCapacity",
    ]);
  });

  it("reports a problem that outlives a rollout once the rollout is done", () => {
    const cfg = config();
    const setups = three({ n2: { report: { unhealthy: [0] } } });
    const rolling = aggregateStatus(
      input(cfg, setups, { daemonSet: daemonSet(cfg, { desired: 3, updated: 2 }) }),
    );
    expect(rolling.events).toEqual([]);
    const done = aggregateStatus(input(cfg, setups, { previous: rolling.status, now: T1 }));
    expect(done.events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Normal/Ready",
      "Warning/Degraded",
      "Warning/UnhealthyDevices",
    ]);
  });

  it("gives the same status whatever order the caches list objects in", () => {
    const cfg = config(2);
    const base = input(
      cfg,
      three({ n1: { report: { unhealthy: [3] } }, n2: { pod: "none" }, n3: { capacity: 9 } }),
    );
    const shuffled = {
      ...base,
      nodes: [...base.nodes].reverse(),
      pods: [...base.pods].reverse(),
      reports: [...base.reports].reverse(),
    };
    const a = aggregateStatus(base);
    const b = aggregateStatus(shuffled);
    expect(b).toEqual(a);
    expect(JSON.stringify(b.status)).toBe(JSON.stringify(a.status));
  });

  it("writes statuses the CRD schema accepts and reads them back", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { pod: "none" }, n2: { allocatable: 0 }, n3: { report: { unhealthy: [1] } } })),
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
    expect(previousStatusOf({ status: JSON.parse(JSON.stringify(status)) })).toEqual(status);
    expect(previousStatusOf({ status: { bogus: true } })).toBeUndefined();
    expect(previousStatusOf({})).toBeUndefined();
  });
});

describe("statusEqual", () => {
  it.each<{
    case: string;
    a: DevicePluginConfigStatus | undefined;
    b: DevicePluginConfigStatus | undefined;
    want: boolean;
  }>([
    { case: "both absent", a: undefined, b: undefined, want: true },
    { case: "absent and empty", a: undefined, b: {}, want: true },
    {
      case: "key order",
      a: { observedGeneration: 1, problemsOmitted: 0 },
      b: { problemsOmitted: 0, observedGeneration: 1 },
      want: true,
    },
    {
      case: "undefined equals missing",
      a: { observedGeneration: 1, daemonSetName: undefined },
      b: { observedGeneration: 1 },
      want: true,
    },
    { case: "different value", a: { observedGeneration: 1 }, b: { observedGeneration: 2 }, want: false },
    {
      case: "array order matters",
      a: {
        problems: [
          { node: "a", reason: "NoCapacity" },
          { node: "b", reason: "NoCapacity" },
        ],
      },
      b: {
        problems: [
          { node: "b", reason: "NoCapacity" },
          { node: "a", reason: "NoCapacity" },
        ],
      },
      want: false,
    },
    { case: "empty list and missing list differ", a: { problems: [] }, b: {}, want: false },
  ])("$case → $want", ({ a, b, want }) => {
    expect(statusEqual(a, b)).toBe(want);
  });
});
