// The publish switch as the rollout planner runs it (planRollout with `switching`), over random histories
// of a simulated cluster: plugin pods starting, registering and terminating late, kubelet status syncs
// late, DRA plugins publishing their pools, the switch's own slice deletions (nodesToClearOfSlices), and a
// rollback at a random moment. Properties: no node ever has both paths advertising, no node is switched
// forward twice, maxUnavailable holds, no old path stops before its fence has been on fenceSettleMs, and a
// fair history ends Complete (or RolledBack) with every node on the path it ends on. And a blocked switch:
// no node starts, a node in flight finishes.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { PublishMode } from "../../../../src/api/v1beta1/publish.js";
import { nodesToClearOfSlices, type SliceNodeView } from "../../../../src/operator/dra-switch/slices.js";
import { planRollout, type NodeObservation, type Plan } from "../../../../src/operator/upgrade/planner.js";
import type { RolloutStrategy } from "../../../../src/operator/model/rollout.js";

type PodPhase = "Absent" | "Running" | "Ready";

interface SimNode {
  name: string;
  devices: number;
  inOld: boolean;
  inNew: boolean;
  startedAt?: number;
  baseline?: number;
  fenced: boolean;
  /** The plan's clock when the planner last fenced the node. */
  fencedAt?: number;
  dpPod: PodPhase;
  dpTerminating: boolean;
  /** The kubelet's own view: a device plugin endpoint registered (Node status follows at a sync). */
  registered: boolean;
  draPod: PodPhase;
  draTerminating: boolean;
  /** Node.status.allocatable[name]; undefined when the Node does not list it. */
  allocatable: number | undefined;
  /** Devices in the node's slice of the driver; undefined when there is none. */
  slice: number | undefined;
}

interface Sim {
  from: PublishMode;
  to: PublishMode;
  nodes: SimNode[];
  strategy: RolloutStrategy;
  maxUnavailable: number;
  rollingBack: boolean;
  /** Plans so far, and after how many a rollback starts (a failed node, or the spec changed back). */
  plans: number;
  rollbackAfter: number | undefined;
  /** Each node's paths in order: from, None, to (and back, after a rollback). */
  history: Map<string, string[]>;
  maxInFlight: number;
  now: number;
}

const where = (n: SimNode, sim: Sim): string =>
  n.inOld && n.inNew ? "Both" : n.inOld ? sim.from : n.inNew ? sim.to : "None";

const assignedHere = (n: SimNode, sim: Sim, path: PublishMode): boolean =>
  (sim.from === path && n.inOld) || (sim.to === path && n.inNew);

function bothAdvertise(n: SimNode): boolean {
  return (n.allocatable ?? 0) > 0 && n.slice !== undefined;
}

function pathCount(n: SimNode, path: PublishMode): { count: number; present: boolean } {
  return path === "DevicePlugin"
    ? { count: n.allocatable ?? 0, present: (n.allocatable ?? 0) > 0 }
    : { count: n.slice ?? 0, present: n.slice !== undefined };
}

function registeredOn(n: SimNode, path: PublishMode): boolean {
  return path === "DevicePlugin" ? n.registered && n.dpPod !== "Absent" : n.draPod === "Ready";
}

function podOf(n: SimNode, path: PublishMode): PodPhase {
  return path === "DevicePlugin" ? n.dpPod : n.draPod;
}

/** What observe.ts would hand the planner for the node in a switch. */
function observe(n: SimNode, sim: Sim): NodeObservation {
  const old = pathCount(n, sim.from);
  const next = pathCount(n, sim.to);
  return {
    name: n.name,
    kubeletVersion: "v1.37.2",
    inOld: n.inOld,
    inNew: n.inNew,
    oldPodPresent: podOf(n, sim.from) !== "Absent",
    newRegistered: registeredOn(n, sim.to),
    oldRegistered: registeredOn(n, sim.from),
    allocatable: next.count,
    unhealthy: 0,
    ...(n.startedAt !== undefined ? { startedAt: n.startedAt } : {}),
    ...(n.baseline !== undefined ? { baseline: n.baseline } : {}),
    ...(n.fenced ? { fenced: true } : {}),
    ...(n.fencedAt !== undefined ? { fencedAt: n.fencedAt } : {}),
    oldAdvertises: old.present,
    newAdvertises: next.present,
    oldAllocatable: old.count,
    newPodPresent: podOf(n, sim.to) !== "Absent",
  };
}

/** How long a fence is on before a node's old path may stop (the plan's clock moves 1 s a plan). */
const FENCE_SETTLE = 2_500;

function plan(sim: Sim): Plan {
  return planRollout({
    nodes: sim.nodes.map((n) => observe(n, sim)),
    spec: {
      strategy: sim.strategy,
      maxUnavailable: sim.maxUnavailable,
      progressDeadlineSeconds: 3600,
      paused: false,
      autoRollback: false,
    },
    now: sim.now,
    rollingBack: sim.rollingBack,
    publish: sim.to,
    fenceReplace: true,
    fenceSettleMs: FENCE_SETTLE,
    switching: true,
  });
}

/** Runs the planner once and applies its actions, then the switch's slice deletions, as rollout.ts does. */
function planStep(sim: Sim): Plan {
  if (sim.plans++ === sim.rollbackAfter) sim.rollingBack = true;
  const p = plan(sim);
  // Forward only: a rollback can count a node back whose old pod was still terminating when it was
  // assigned again, and see it leave once that pod is gone (as any rollback of planRollout can).
  if (!sim.rollingBack) sim.maxInFlight = Math.max(sim.maxInFlight, p.inFlight.length);
  for (const { node, kind } of p.actions) {
    const n = sim.nodes.find((x) => x.name === node)!;
    if (kind === "AddToNew") n.inNew = true;
    else if (kind === "RemoveFromNew") n.inNew = false;
    else if (kind === "AddToOld") n.inOld = true;
    else if (kind === "RemoveFromOld") {
      // The old path stops only behind a fence that has been on long enough for the scheduler to see it.
      if (!n.fenced || n.fencedAt === undefined || sim.now - n.fencedAt < FENCE_SETTLE)
        throw new Error(`${node} left its old path ${sim.now - (n.fencedAt ?? NaN)} ms after its fence`);
      n.inOld = false;
    } else if (kind === "RecordStart") n.startedAt = sim.now;
    else if (kind === "RecordBaseline") n.baseline = pathCount(n, sim.from).count;
    else if (kind === "Fence") {
      n.fenced = true;
      n.fencedAt = sim.now;
    } else if (kind === "Unfence") n.fenced = false;
    const seen = sim.history.get(node)!;
    if (seen[seen.length - 1] !== where(n, sim)) seen.push(where(n, sim));
  }
  const back = p.phase === "RollingBack" || p.phase === "RolledBack";
  if ((back ? sim.to : sim.from) === "DRA") {
    const inFlight = new Set(p.inFlight);
    const views: SliceNodeView[] = sim.nodes.filter((n) => inFlight.has(n.name)).map((n) => observe(n, sim));
    for (const name of nodesToClearOfSlices(views, !back))
      sim.nodes.find((x) => x.name === name)!.slice = undefined;
  }
  sim.now += 1000;
  return p;
}

const EVENTS = [
  "dpPodStep",
  "draPodStep",
  "dpPodRegisters",
  "draPodReady",
  "kubeletSync",
  "publish",
] as const;
type EventName = (typeof EVENTS)[number];

/** One step of the world on a node, or false when the event cannot happen now. */
function applyEvent(n: SimNode, sim: Sim, event: EventName): boolean {
  // A pod not assigned here is deleted: a ready one terminates first (still Running), a starting one goes
  // at once; a terminating pod always finishes, even if its path was assigned again meanwhile.
  const podStep = (phase: PodPhase, terminating: boolean, here: boolean) => {
    if (terminating) return { phase: "Absent" as const, terminating: false };
    if (phase === "Absent") return here ? { phase: "Running" as const, terminating: false } : undefined;
    if (here) return undefined;
    return phase === "Ready"
      ? { phase: "Running" as const, terminating: true }
      : { phase: "Absent" as const, terminating: false };
  };
  switch (event) {
    case "dpPodStep": {
      const next = podStep(n.dpPod, n.dpTerminating, assignedHere(n, sim, "DevicePlugin"));
      if (next === undefined) return false;
      n.dpPod = next.phase;
      n.dpTerminating = next.terminating;
      if (next.phase === "Absent") n.registered = false; // the ListAndWatch stream ended
      return true;
    }
    case "draPodStep": {
      const next = podStep(n.draPod, n.draTerminating, assignedHere(n, sim, "DRA"));
      if (next === undefined) return false;
      n.draPod = next.phase;
      n.draTerminating = next.terminating;
      return true;
    }
    case "dpPodRegisters":
      // A started process registers even if its pod is about to be deleted.
      if (n.dpPod !== "Running" || n.dpTerminating || n.registered) return false;
      n.dpPod = "Ready";
      n.registered = true;
      return true;
    case "draPodReady":
      if (n.draPod !== "Running" || n.draTerminating) return false;
      n.draPod = "Ready";
      return true;
    case "kubeletSync": {
      const next = n.registered ? n.devices : n.allocatable === undefined ? undefined : 0;
      if (next === n.allocatable) return false;
      n.allocatable = next;
      return true;
    }
    case "publish":
      // A running DRA plugin (even a terminating one) publishes its whole pool.
      if (n.draPod === "Absent" || n.slice === n.devices) return false;
      n.slice = n.devices;
      return true;
  }
}

function steadyNode(name: string, path: PublishMode, devices: number): SimNode {
  const dp = path === "DevicePlugin";
  return {
    name,
    devices,
    inOld: true,
    inNew: false,
    fenced: false,
    dpPod: dp ? "Ready" : "Absent",
    dpTerminating: false,
    registered: dp,
    draPod: dp ? "Absent" : "Ready",
    draTerminating: false,
    allocatable: dp ? devices : undefined,
    slice: dp ? undefined : devices,
  };
}

function newSim(
  devices: number[],
  from: PublishMode,
  maxUnavailable: number,
  strategy: RolloutStrategy,
  rollbackAfter?: number,
): Sim {
  const nodes = devices.map((d, i) => steadyNode(`node-${String(i).padStart(2, "0")}`, from, d));
  return {
    from,
    to: from === "DRA" ? "DevicePlugin" : "DRA",
    nodes,
    strategy,
    maxUnavailable,
    rollingBack: false,
    plans: 0,
    rollbackAfter,
    history: new Map(nodes.map((n) => [n.name, [from as string]])),
    maxInFlight: 0,
    now: 1_000_000,
  };
}

/** Every world event on every node in `order`, with a plan after each, until nothing changes; bounded. */
function settle(sim: Sim, order: readonly EventName[], check: () => void): Plan {
  for (let round = 0; round < 500; round++) {
    const before = JSON.stringify([sim.nodes, sim.rollingBack]);
    for (const n of sim.nodes) {
      for (const event of order) {
        applyEvent(n, sim, event);
        check();
        planStep(sim);
        check();
      }
    }
    const p = planStep(sim);
    if (JSON.stringify([sim.nodes, sim.rollingBack]) === before) return p;
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
  strategy: fc.constantFrom<RolloutStrategy>("Auto", "Surge", "Replace"),
  maxUnavailable: fc.integer({ min: 1, max: 3 }),
  steps: fc.array(stepArb, { maxLength: 150 }),
  /** After how many plans a rollback starts, if one does (the settling plans count too). */
  rollbackAfter: fc.option(fc.nat({ max: 400 }), { nil: undefined }),
  order: fc.shuffledSubarray([...EVENTS], { minLength: EVENTS.length }),
});

describe("planRollout switching the publish mode, over random histories", () => {
  it("never lets both paths advertise on a node, switches each node once, keeps maxUnavailable, and finishes", () => {
    fc.assert(
      fc.property(scenarioArb, ({ devices, from, strategy, maxUnavailable, steps, rollbackAfter, order }) => {
        const sim = newSim(devices, from, maxUnavailable, strategy, rollbackAfter);
        const check = () => {
          for (const n of sim.nodes) {
            if (bothAdvertise(n)) throw new Error(`both paths advertise on ${n.name}: ${JSON.stringify(n)}`);
            if (n.inOld && n.inNew) throw new Error(`${n.name} runs both revisions: ${JSON.stringify(n)}`);
          }
        };
        for (const step of steps) {
          if (step.kind === "plan") {
            const p = planStep(sim);
            expect(Object.values(p.modes).every((m) => m === "Replace")).toBe(true);
          } else applyEvent(sim.nodes[step.node % sim.nodes.length]!, sim, step.event);
          check();
        }
        const final = settle(sim, order, check);
        const end = sim.rollingBack ? sim.from : sim.to;
        expect(final.phase).toBe(sim.rollingBack ? "RolledBack" : "Complete");
        for (const n of sim.nodes) {
          expect(where(n, sim), n.name).toBe(end);
          expect(podOf(n, end === "DRA" ? "DevicePlugin" : "DRA"), n.name).toBe("Absent");
          expect(n.fenced, n.name).toBe(false);
        }
        for (const [name, seen] of sim.history) {
          // from → None → to, each at most once; a rollback goes on → None → from, or from None
          // straight back to from where the node had not reached the new path yet.
          const forward = [sim.from, "None", sim.to, "None", sim.from];
          const shortBack = [sim.from, "None", sim.from];
          const prefixOf = (path: string[]) =>
            JSON.stringify(path.slice(0, seen.length)) === JSON.stringify(seen);
          expect(
            prefixOf(forward) || (sim.rollingBack && prefixOf(shortBack)),
            `${name}: ${seen.join(" → ")}`,
          ).toBe(true);
          expect(seen.filter((p) => p === sim.to).length, name).toBeLessThanOrEqual(1);
        }
        expect(sim.maxInFlight).toBeLessThanOrEqual(maxUnavailable);
      }),
      { numRuns: 200 },
    );
  });
});

describe("planRollout: a blocked switch", () => {
  it("starts no node, says why, and lets a node in flight finish", () => {
    const sim = newSim([2, 2], "DevicePlugin", 1, "Auto");
    sim.nodes[0]!.inOld = false; // node-00 is in flight: its device plugin unassigned
    const p = planRollout({
      nodes: sim.nodes.map((n) => observe(n, sim)),
      spec: {
        strategy: "Auto",
        maxUnavailable: 2,
        progressDeadlineSeconds: 600,
        paused: false,
        autoRollback: false,
      },
      now: sim.now,
      rollingBack: false,
      publish: "DRA",
      fenceReplace: true,
      switching: true,
      startBlocked: "the switch to DRA waits",
    });
    expect(p.blocked).toBe("the switch to DRA waits");
    expect(p.phase).toBe("Progressing");
    expect(p.inFlight).toEqual(["node-00"]);
    expect(p.actions.filter((a) => a.node === "node-01")).toEqual([]);
  });
});
