// The switch planner between the device plugin path and DRA: a table of single nodes, then properties
// over random histories of a simulated cluster (pods starting and stopping, kubelet status syncs late,
// plugins publishing slices, a kubelet restart deleting them): no node ever has both paths advertising,
// no node is switched twice, maxUnavailable holds, and a fair history ends with every node switched.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { PublishMode } from "../../src/api/v1beta1/publish.js";
import {
  planSwitch,
  type AssignedPath,
  type PodPhase,
  type SwitchAction,
  type SwitchNodeState,
} from "../../src/operator/dra-switch/plan.js";

function node(over: Partial<SwitchNodeState> = {}): SwitchNodeState {
  return {
    name: "n1",
    assigned: "DevicePlugin",
    devicePluginPod: "Ready",
    draPluginPod: "Absent",
    allocatable: 4,
    slicePublished: false,
    ...over,
  };
}

function one(target: PublishMode, state: SwitchNodeState, mayStart = true): SwitchAction {
  return planSwitch({ target, maxUnavailable: 1, mayStart, nodes: [state] }).actions[0]!.action;
}

describe("planSwitch, one node", () => {
  const cases: { name: string; target: PublishMode; state: Partial<SwitchNodeState>; want: SwitchAction }[] =
    [
      {
        name: "to DRA: a device plugin node is stopped first",
        target: "DRA",
        state: {},
        want: { kind: "Stop", path: "DevicePlugin" },
      },
      {
        name: "to DRA: waits while the device plugin pod is still there (it can still register)",
        target: "DRA",
        state: { assigned: "None", devicePluginPod: "Running", allocatable: 0 },
        want: { kind: "Wait", reason: "waiting for the device plugin pod to be gone" },
      },
      {
        name: "to DRA: waits while the Node still shows allocatable",
        target: "DRA",
        state: { assigned: "None", devicePluginPod: "Absent", allocatable: 4 },
        want: { kind: "Wait", reason: "waiting for the node's allocatable to drop to 0 (now 4)" },
      },
      {
        name: "to DRA: starts once allocatable is 0",
        target: "DRA",
        state: { assigned: "None", devicePluginPod: "Absent", allocatable: 0 },
        want: { kind: "Start", path: "DRA" },
      },
      {
        name: "to DRA: starts once the Node no longer lists the name",
        target: "DRA",
        state: { assigned: "None", devicePluginPod: "Absent", allocatable: undefined },
        want: { kind: "Start", path: "DRA" },
      },
      {
        name: "to DRA: assigned but not yet publishing",
        target: "DRA",
        state: { assigned: "DRA", devicePluginPod: "Absent", allocatable: 0, draPluginPod: "Ready" },
        want: { kind: "Wait", reason: "waiting for the DRA plugin to be ready and advertise" },
      },
      {
        name: "to DRA: done when the plugin is ready and its slice exists",
        target: "DRA",
        state: {
          assigned: "DRA",
          devicePluginPod: "Absent",
          allocatable: 0,
          draPluginPod: "Ready",
          slicePublished: true,
        },
        want: { kind: "Done" },
      },
      {
        name: "to DevicePlugin: a DRA node is stopped first",
        target: "DevicePlugin",
        state: {
          assigned: "DRA",
          devicePluginPod: "Absent",
          allocatable: undefined,
          draPluginPod: "Ready",
          slicePublished: true,
        },
        want: { kind: "Stop", path: "DRA" },
      },
      {
        name: "to DevicePlugin: waits for the DRA pod, which would publish again",
        target: "DevicePlugin",
        state: {
          assigned: "None",
          devicePluginPod: "Absent",
          allocatable: undefined,
          draPluginPod: "Running",
          slicePublished: true,
        },
        want: { kind: "Wait", reason: "waiting for the DRA plugin pod to be gone" },
      },
      {
        name: "to DevicePlugin: deletes the slice the stopped plugin left",
        target: "DevicePlugin",
        state: {
          assigned: "None",
          devicePluginPod: "Absent",
          allocatable: undefined,
          slicePublished: true,
        },
        want: { kind: "DeleteSlices" },
      },
      {
        name: "to DevicePlugin: starts once the slice is gone",
        target: "DevicePlugin",
        state: { assigned: "None", devicePluginPod: "Absent", allocatable: undefined },
        want: { kind: "Start", path: "DevicePlugin" },
      },
      {
        name: "to DevicePlugin: done when registered (allocatable listed, even 0 with all devices unhealthy)",
        target: "DevicePlugin",
        state: { allocatable: 0 },
        want: { kind: "Done" },
      },
      {
        name: "to DevicePlugin: not done before the Node lists the name",
        target: "DevicePlugin",
        state: { allocatable: undefined },
        want: { kind: "Wait", reason: "waiting for the DevicePlugin plugin to be ready and advertise" },
      },
    ];
  it.each(cases)("$name", ({ target, state, want }) => {
    expect(one(target, node(state))).toEqual(want);
  });

  it("a node not started stays queued while starting is not allowed; one in flight continues", () => {
    expect(one("DRA", node(), false)).toEqual({
      kind: "Queued",
      reason: "the switch may not start nodes now",
    });
    expect(one("DRA", node({ assigned: "None", devicePluginPod: "Absent", allocatable: 0 }), false)).toEqual({
      kind: "Start",
      path: "DRA",
    });
  });
});

describe("planSwitch, several nodes", () => {
  it("starts nodes in name order up to maxUnavailable, counting nodes already in flight", () => {
    const plan = planSwitch({
      target: "DRA",
      maxUnavailable: 2,
      mayStart: true,
      nodes: [
        node({ name: "c" }),
        node({ name: "a", assigned: "None", devicePluginPod: "Running" }),
        node({ name: "b" }),
        node({ name: "d" }),
      ],
    });
    expect(plan.actions).toEqual([
      { node: "a", action: { kind: "Wait", reason: "waiting for the device plugin pod to be gone" } },
      { node: "b", action: { kind: "Stop", path: "DevicePlugin" } },
      { node: "c", action: { kind: "Queued", reason: "2 of at most 2 nodes are in flight" } },
      { node: "d", action: { kind: "Queued", reason: "2 of at most 2 nodes are in flight" } },
    ]);
    expect(plan.inFlight).toBe(2);
    expect(plan.done).toBe(0);
  });

  it("a fractional or zero maxUnavailable still moves one node", () => {
    const plan = planSwitch({
      target: "DRA",
      maxUnavailable: 0,
      mayStart: true,
      nodes: [node(), node({ name: "n2" })],
    });
    expect(plan.actions.map((a) => a.action.kind)).toEqual(["Stop", "Queued"]);
  });
});

// ---- A simulated cluster for the properties ----

interface SimNode extends SwitchNodeState {
  devices: number;
  /** The kubelet's own view: a device plugin endpoint registered (Node status follows at a sync). */
  registered: boolean;
  dpTerminating: boolean;
  draTerminating: boolean;
}

const EVENTS = [
  "dpPodStep",
  "draPodStep",
  "dpPodRegisters",
  "draPodReady",
  "kubeletSync",
  "publish",
  "kubeletRestart",
] as const;
type EventName = (typeof EVENTS)[number];

/** One step of the world on a node, or false when the event cannot happen now. */
function applyEvent(n: SimNode, event: EventName): boolean {
  // A pod not assigned here is deleted: a ready one terminates first (still Running), a starting one
  // goes at once; a terminating pod always finishes, even if its path was assigned again meanwhile.
  const podStep = (
    phase: PodPhase,
    terminating: boolean,
    assignedHere: boolean,
  ): { phase: PodPhase; terminating: boolean } | undefined => {
    if (terminating) return { phase: "Absent", terminating: false };
    if (phase === "Absent") return assignedHere ? { phase: "Running", terminating: false } : undefined;
    if (assignedHere) return undefined;
    return phase === "Ready"
      ? { phase: "Running", terminating: true }
      : { phase: "Absent", terminating: false };
  };
  switch (event) {
    case "dpPodStep": {
      const next = podStep(n.devicePluginPod, n.dpTerminating, n.assigned === "DevicePlugin");
      if (next === undefined) return false;
      n.devicePluginPod = next.phase;
      n.dpTerminating = next.terminating;
      if (next.phase === "Absent") n.registered = false; // the ListAndWatch stream ended
      return true;
    }
    case "draPodStep": {
      const next = podStep(n.draPluginPod, n.draTerminating, n.assigned === "DRA");
      if (next === undefined) return false;
      n.draPluginPod = next.phase;
      n.draTerminating = next.terminating;
      return true;
    }
    case "dpPodRegisters":
      // A started process registers even if its pod is about to be deleted.
      if (n.devicePluginPod !== "Running" || n.dpTerminating || n.registered) return false;
      n.devicePluginPod = "Ready";
      n.registered = true;
      return true;
    case "draPodReady":
      if (n.draPluginPod !== "Running" || n.draTerminating) return false;
      n.draPluginPod = "Ready";
      return true;
    case "kubeletSync": {
      const next = n.registered ? n.devices : n.allocatable === undefined ? undefined : 0;
      if (next === n.allocatable) return false;
      n.allocatable = next;
      return true;
    }
    case "publish":
      if (n.draPluginPod === "Absent" || n.slicePublished) return false;
      // A running DRA plugin (even a terminating one) publishes its pool.
      n.slicePublished = true;
      return true;
    case "kubeletRestart":
      if (!n.slicePublished) return false;
      n.slicePublished = false;
      return true;
  }
}

function steadyNode(name: string, path: PublishMode, devices: number): SimNode {
  return path === "DevicePlugin"
    ? {
        name,
        devices,
        assigned: "DevicePlugin",
        devicePluginPod: "Ready",
        draPluginPod: "Absent",
        registered: true,
        dpTerminating: false,
        draTerminating: false,
        allocatable: devices,
        slicePublished: false,
      }
    : {
        name,
        devices,
        assigned: "DRA",
        devicePluginPod: "Absent",
        draPluginPod: "Ready",
        registered: false,
        dpTerminating: false,
        draTerminating: false,
        allocatable: undefined,
        slicePublished: true,
      };
}

function bothAdvertise(n: SimNode): boolean {
  return (n.allocatable ?? 0) > 0 && n.slicePublished;
}

interface Sim {
  nodes: SimNode[];
  target: PublishMode;
  maxUnavailable: number;
  /** Each node's assigned paths, in order, since the target was last set. */
  history: Map<string, AssignedPath[]>;
  maxInFlight: number;
}

/** Runs the planner once and applies every action it returns; checks the plan's own promises. */
function planStep(sim: Sim): void {
  const plan = planSwitch({
    target: sim.target,
    maxUnavailable: sim.maxUnavailable,
    mayStart: true,
    nodes: sim.nodes,
  });
  sim.maxInFlight = Math.max(sim.maxInFlight, plan.inFlight);
  for (const { node: name, action } of plan.actions) {
    const n = sim.nodes.find((x) => x.name === name)!;
    if (action.kind === "Stop") n.assigned = "None";
    else if (action.kind === "Start") n.assigned = action.path;
    else if (action.kind === "DeleteSlices") n.slicePublished = false;
    const seen = sim.history.get(name)!;
    if (seen[seen.length - 1] !== n.assigned) seen.push(n.assigned);
  }
}

function newSim(devices: number[], from: PublishMode, maxUnavailable: number): Sim {
  const nodes = devices.map((d, i) => steadyNode(`node-${String(i).padStart(2, "0")}`, from, d));
  const target: PublishMode = from === "DRA" ? "DevicePlugin" : "DRA";
  return {
    nodes,
    target,
    maxUnavailable,
    history: new Map(nodes.map((n) => [n.name, [n.assigned]])),
    maxInFlight: 0,
  };
}

/**
 * Every enabled world event on every node in `order`, with a plan after each, until nothing changes;
 * bounded. The order is random per scenario, so a kubelet status sync can come after everything else.
 */
function settle(sim: Sim, order: readonly EventName[], check: () => void): void {
  for (let round = 0; round < 500; round++) {
    const before = JSON.stringify(sim.nodes);
    for (const n of sim.nodes) {
      for (const event of order) {
        if (event === "kubeletRestart") continue;
        applyEvent(n, event);
        check();
        planStep(sim);
        check();
      }
    }
    if (JSON.stringify(sim.nodes) === before) return;
  }
  throw new Error(`no fixed point after 500 rounds; nodes: ${JSON.stringify(sim.nodes)}`);
}

const stepArb = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ kind: "plan" as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("event" as const),
      node: fc.nat(),
      event: fc.constantFrom(...EVENTS),
    }),
  },
);

const scenarioArb = fc.record({
  devices: fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 6 }),
  from: fc.constantFrom<PublishMode>("DevicePlugin", "DRA"),
  maxUnavailable: fc.integer({ min: 1, max: 3 }),
  steps: fc.array(stepArb, { maxLength: 120 }),
  order: fc.shuffledSubarray([...EVENTS], { minLength: EVENTS.length }),
});

describe("planSwitch over random histories", () => {
  it("never lets both paths advertise on a node, switches each node once, keeps maxUnavailable, and finishes", () => {
    fc.assert(
      fc.property(scenarioArb, ({ devices, from, maxUnavailable, steps, order }) => {
        const sim = newSim(devices, from, maxUnavailable);
        const check = () => {
          for (const n of sim.nodes) {
            if (bothAdvertise(n)) throw new Error(`both paths advertise on ${n.name}: ${JSON.stringify(n)}`);
          }
        };
        for (const step of steps) {
          if (step.kind === "plan") planStep(sim);
          else applyEvent(sim.nodes[step.node % sim.nodes.length]!, step.event);
          check();
        }
        settle(sim, order, check);
        const old = from;
        for (const [name, seen] of sim.history) {
          // old → None → target, each at most once, in that order.
          expect(seen, name).toEqual([old, "None", sim.target].slice(0, seen.length));
        }
        expect(sim.maxInFlight).toBeLessThanOrEqual(maxUnavailable);
        const final = planSwitch({ target: sim.target, maxUnavailable, mayStart: true, nodes: sim.nodes });
        expect(final.done).toBe(sim.nodes.length);
      }),
      { numRuns: 150 },
    );
  });

  it("keeps both paths apart when the target flips back in the middle of a switch", () => {
    fc.assert(
      fc.property(
        scenarioArb,
        fc.array(stepArb, { maxLength: 60 }),
        ({ devices, from, maxUnavailable, steps, order }, after) => {
          const sim = newSim(devices, from, maxUnavailable);
          const check = () => {
            for (const n of sim.nodes) {
              if (bothAdvertise(n))
                throw new Error(`both paths advertise on ${n.name}: ${JSON.stringify(n)}`);
            }
          };
          const run = (list: typeof steps) => {
            for (const step of list) {
              if (step.kind === "plan") planStep(sim);
              else applyEvent(sim.nodes[step.node % sim.nodes.length]!, step.event);
              check();
            }
          };
          run(steps);
          sim.target = from;
          for (const n of sim.nodes) sim.history.set(n.name, [n.assigned]);
          sim.maxInFlight = 0;
          run(after);
          settle(sim, order, check);
          for (const [name, seen] of sim.history) {
            // Back to the old path: a node may be anywhere on the way, but it only ever moves forward.
            const order: AssignedPath[] = [other(from), "None", from];
            const positions = seen.map((p) => order.indexOf(p));
            expect(positions, name).toEqual([...positions].sort((a, b) => a - b));
            expect(new Set(seen).size, name).toBe(seen.length);
          }
          const final = planSwitch({ target: from, maxUnavailable, mayStart: true, nodes: sim.nodes });
          expect(final.done).toBe(sim.nodes.length);
        },
      ),
      { numRuns: 100 },
    );
  });
});

function other(path: PublishMode): PublishMode {
  return path === "DRA" ? "DevicePlugin" : "DRA";
}
