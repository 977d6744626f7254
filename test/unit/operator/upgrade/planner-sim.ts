// Simulated rollouts for the planner's tests. The model cluster below is the test's own account of what
// the node lists do to pods and plugins; the planner sees it only through NodeObservation, as the operator
// would. simulate() checks the invariants of every step; the end-state properties are for its callers.
import fc from "fast-check";
import { expect } from "vitest";
import {
  kubeletTooOld,
  parseKubeletVersion,
  supportsSurge,
} from "../../../../src/operator/model/kubelet-version.js";
import {
  type Action,
  type NodeObservation,
  type Plan,
  planRollout,
} from "../../../../src/operator/upgrade/planner.js";
import type { RolloutSpec, UpgradeMode } from "../../../../src/operator/model/rollout.js";

/** One plugin pod of a revision on a node. */
export interface SimPod {
  /** Terminating pods have stopped serving but still exist (oldPodPresent stays true). */
  state: "running" | "terminating";
  /** Step at which the plugin registers; Infinity for a plugin that never does. */
  registersAt: number;
  /** Step at which a terminating pod is gone. */
  goneAt: number;
  /** What the plugin advertises once registered. */
  advertises: number;
}

/** What a new plugin does on a node: register after a delay, never, or register advertising too little. */
export type Fate = { kind: "ok" | "short"; delay: number } | { kind: "never" };

export interface SimNodeSpec {
  kubelet: string;
  devices: number;
  unhealthy: number;
  fate: Fate;
  oldDelay: number;
  termDelay: number;
}

export interface SimNode extends SimNodeSpec {
  name: string;
  targeted: boolean;
  mode?: UpgradeMode;
  inOld: boolean;
  inNew: boolean;
  oldPod?: SimPod;
  newPod?: SimPod;
  startedAt?: number;
  baseline?: number;
  failed?: boolean;
  /** Test bookkeeping: RecordStart actions applied, whether any list edit ever was, and whether a rollback edit was. */
  starts: number;
  edited: boolean;
  rolledBack: boolean;
}

export const STEP_MS = 1000;

const KUBELETS = [
  "v1.37.0",
  "v1.37.2",
  "v1.38.1-eks-1234",
  "v1.37.0-rc.1",
  "v1.36.5",
  "v1.33.4-gke.1000",
  "v1.29.0",
  "v1.28.9",
  "v1.29.0-rc.0",
  "garbage",
  "",
];

export function up(pod: SimPod | undefined, step: number): boolean {
  return pod !== undefined && pod.state === "running" && step >= pod.registersAt;
}

/** Node allocatable: the plugin that registered last wins, as the kubelet's per-socket endpoints do. */
function allocatable(n: SimNode, step: number): number {
  const oldUp = up(n.oldPod, step);
  const newUp = up(n.newPod, step);
  if (oldUp && newUp)
    return n.oldPod!.registersAt > n.newPod!.registersAt ? n.oldPod!.advertises : n.newPod!.advertises;
  if (newUp) return n.newPod!.advertises;
  if (oldUp) return n.oldPod!.advertises;
  return 0;
}

function healthy(n: SimNode): number {
  return n.devices - n.unhealthy;
}

export function observe(n: SimNode, step: number): NodeObservation {
  return {
    name: n.name,
    kubeletVersion: n.kubelet,
    inOld: n.inOld,
    inNew: n.inNew,
    oldPodPresent: n.oldPod !== undefined,
    newRegistered: up(n.newPod, step),
    oldRegistered: up(n.oldPod, step),
    allocatable: allocatable(n, step),
    unhealthy: n.unhealthy,
    ...(n.baseline !== undefined ? { baseline: n.baseline } : {}),
    ...(n.startedAt !== undefined ? { startedAt: n.startedAt } : {}),
    ...(n.failed !== undefined ? { failed: n.failed } : {}),
  };
}

/** Serving fully on one revision, as the spec of the gates says; anything else holds a slot. */
function settled(n: SimNode, step: number): boolean {
  const enough = n.baseline !== undefined && allocatable(n, step) >= n.baseline - n.unhealthy;
  const onOld = n.inOld && !n.inNew && up(n.oldPod, step) && enough;
  const onNew = n.inNew && !n.inOld && n.oldPod === undefined && up(n.newPod, step) && enough;
  return onOld || onNew;
}

export function touched(n: SimNode): boolean {
  return n.starts > 0 || n.edited;
}

function simInFlight(nodes: SimNode[], step: number): number {
  return nodes.filter((n) => n.targeted && touched(n) && !settled(n, step)).length;
}

function stopPod(pod: SimPod | undefined, step: number, termDelay: number): void {
  if (pod?.state === "running") {
    pod.state = "terminating";
    pod.goneAt = step + termDelay;
  }
}

/** Applies one action the way the operator would: an edit of a node list, or a persisted record. */
function apply(n: SimNode, a: Action, step: number): void {
  switch (a.kind) {
    case "RecordStart":
      n.starts++;
      n.startedAt = step * STEP_MS;
      return;
    case "RecordBaseline":
      n.baseline = allocatable(n, step);
      return;
    case "MarkFailed":
      n.failed = true;
      return;
    case "AddToNew":
      n.inNew = true;
      break;
    case "AddToOld":
      n.inOld = true;
      n.rolledBack = true;
      break;
    case "RemoveFromOld":
      n.inOld = false;
      stopPod(n.oldPod, step, n.termDelay);
      break;
    case "RemoveFromNew":
      n.inNew = false;
      n.rolledBack = true;
      stopPod(n.newPod, step, n.termDelay);
      break;
  }
  n.edited = true;
}

/** Time passes: terminating pods go, and each revision's DaemonSet starts a pod on a listed node without one. */
function advance(n: SimNode, step: number): void {
  if (n.oldPod?.state === "terminating" && step >= n.oldPod.goneAt) delete n.oldPod;
  if (n.newPod?.state === "terminating" && step >= n.newPod.goneAt) delete n.newPod;
  if (n.inOld && n.oldPod === undefined) {
    n.oldPod = { state: "running", registersAt: step + n.oldDelay, goneAt: Infinity, advertises: healthy(n) };
  }
  if (n.inNew && n.newPod === undefined) {
    const f = n.fate;
    n.newPod = {
      state: "running",
      registersAt: f.kind === "never" ? Infinity : step + f.delay,
      goneAt: Infinity,
      // Short of the gate by one device: devices - 2·unhealthy is what the gate asks for.
      advertises: f.kind === "short" ? n.devices - 2 * n.unhealthy - 1 : healthy(n),
    };
  }
}

/** mulberry32: the simulation's own dice, seeded by fast-check so runs replay and shrink by seed. */
export function dice(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function shuffle<T>(items: readonly T[], roll: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(roll() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const maxUnavailableArb: fc.Arbitrary<RolloutSpec["maxUnavailable"]> = fc.oneof(
  fc.integer({ min: 0, max: 6 }),
  fc.constantFrom<`${number}%`>("0%", "10%", "25%", "33%", "50%", "100%"),
);

export interface Scenario {
  nodes: SimNodeSpec[];
  strategy: RolloutSpec["strategy"];
  maxUnavailable: RolloutSpec["maxUnavailable"];
  /** A lowered (or raised) maxUnavailable from some step on, as an operator restarted with a new spec sees it. */
  newMaxUnavailable?: { at: number; value: RolloutSpec["maxUnavailable"] };
  autoRollback: boolean;
  /** Whether new plugins may fail at all; without it every node's gate eventually holds. */
  flaky: boolean;
  deadlineSteps: number;
  pause?: { from: number; steps: number };
  /** Probability per step that the operator stops part-way through applying a plan. */
  restartRate: number;
  seed: number;
}

export function scenarioArb(): fc.Arbitrary<Scenario> {
  return fc.boolean().chain((flaky) =>
    fc.record(
      {
        nodes: fc.array(
          fc.record({
            kubelet: fc.constantFrom(...KUBELETS),
            devices: fc.integer({ min: 3, max: 8 }),
            unhealthy: fc.integer({ min: 0, max: 1 }),
            fate: flaky
              ? fc.oneof(
                  { weight: 6, arbitrary: fc.record({ kind: fc.constant("ok" as const), delay: fc.nat(3) }) },
                  {
                    weight: 1,
                    arbitrary: fc.record({ kind: fc.constant("short" as const), delay: fc.nat(3) }),
                  },
                  { weight: 1, arbitrary: fc.constant({ kind: "never" as const }) },
                )
              : fc.record({ kind: fc.constant("ok" as const), delay: fc.nat(3) }),
            oldDelay: fc.nat(3),
            termDelay: fc.nat(4),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        strategy: fc.constantFrom("Auto", "Replace", "Surge"),
        maxUnavailable: maxUnavailableArb,
        newMaxUnavailable: fc.option(fc.record({ at: fc.nat(30), value: maxUnavailableArb }), {
          nil: undefined,
        }),
        autoRollback: fc.boolean(),
        flaky: fc.constant(flaky),
        // Without failures the deadline never bites, so a run is Complete whatever the restarts cost.
        deadlineSteps: flaky ? fc.integer({ min: 4, max: 15 }) : fc.constant(1_000_000),
        pause: fc.option(fc.record({ from: fc.nat(20), steps: fc.integer({ min: 1, max: 20 }) }), {
          nil: undefined,
        }),
        restartRate: fc.constantFrom(0, 0.1, 0.3),
        seed: fc.integer(),
      },
      {
        requiredKeys: [
          "nodes",
          "strategy",
          "maxUnavailable",
          "autoRollback",
          "flaky",
          "deadlineSteps",
          "restartRate",
          "seed",
        ],
      },
    ),
  );
}

/** The model's own reading of a kubelet, independent of the planner's. */
function simTarget(kubelet: string, strategy: RolloutSpec["strategy"]): UpgradeMode | undefined {
  const v = parseKubeletVersion(kubelet);
  if (v === undefined || kubeletTooOld(v) !== undefined) return undefined;
  return strategy !== "Replace" && supportsSurge(v) ? "Surge" : "Replace";
}

function simLimit(value: RolloutSpec["maxUnavailable"], targeted: number): number {
  const raw = typeof value === "number" ? value : Math.floor((targeted * Number(value.slice(0, -1))) / 100);
  return Math.max(1, Math.floor(raw));
}

export interface Outcome {
  phase: Plan["phase"];
  nodes: SimNode[];
  markedFailed: boolean;
  step: number;
  lastPlan: Plan;
}

/**
 * Runs a rollout to its end (Complete, RolledBack, or a Failed rollout that has stopped moving) and
 * checks the step invariants on the way; the end-state properties are for the callers.
 */
export function simulate(sc: Scenario, stopAt = Infinity): Outcome {
  const roll = dice(sc.seed);
  const nodes: SimNode[] = sc.nodes.map((s, i) => {
    const mode = simTarget(s.kubelet, sc.strategy);
    return {
      ...s,
      name: `node-${String(i).padStart(2, "0")}`,
      targeted: mode !== undefined,
      ...(mode !== undefined ? { mode } : {}),
      inOld: true,
      inNew: false,
      // Every node starts served by the old plugin, registered long ago.
      oldPod: { state: "running", registersAt: -1, goneAt: Infinity, advertises: s.devices - s.unhealthy },
      starts: 0,
      edited: false,
      rolledBack: false,
    };
  });
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const targeted = nodes.filter((n) => n.targeted).length;
  let rollingBack = false;
  let markedFailed = false;
  let previousInFlight = 0;
  let quiet = 0;
  const cap = 100 + 40 * nodes.length;
  let lastPlan: Plan | undefined;

  for (let step = 0; step < Math.min(cap, stopAt); step++) {
    const maxUnavailable =
      sc.newMaxUnavailable !== undefined && step >= sc.newMaxUnavailable.at
        ? sc.newMaxUnavailable.value
        : sc.maxUnavailable;
    const paused = sc.pause !== undefined && step >= sc.pause.from && step < sc.pause.from + sc.pause.steps;
    const spec: RolloutSpec = {
      strategy: sc.strategy,
      maxUnavailable,
      progressDeadlineSeconds: sc.deadlineSteps,
      paused,
      autoRollback: sc.autoRollback,
    };
    // The caller lists nodes in whatever order its cache has them.
    const observed = shuffle(
      nodes.map((n) => observe(n, step)),
      roll,
    );
    const p = planRollout({ nodes: observed, spec, now: step * STEP_MS, rollingBack });
    lastPlan = p;
    const limit = simLimit(maxUnavailable, targeted);

    expect(p.total).toBe(targeted);
    expect(p.modes).toEqual(Object.fromEntries(nodes.filter((n) => n.targeted).map((n) => [n.name, n.mode])));
    // (1) The planner never grows the in-flight set past the limit; it may only be above it when it
    // already was (a lowered maxUnavailable), and then it does not grow.
    expect(p.inFlight.length).toBeLessThanOrEqual(Math.max(limit, previousInFlight));

    for (const a of p.actions) {
      const n = byName.get(a.node)!;
      expect(n.targeted, `${a.kind} on untargeted ${n.name}`).toBe(true);
      if (a.kind === "MarkFailed") {
        // Only a node past its deadline without its gate fails.
        const o = observe(n, step);
        expect(o.startedAt).toBeDefined();
        expect(step * STEP_MS - o.startedAt!).toBeGreaterThan(sc.deadlineSteps * 1000);
        expect(o.newRegistered && o.allocatable >= o.baseline! - o.unhealthy).toBe(false);
      }
    }

    // An operator restart stops part-way through the plan and loses the phase it had not persisted.
    const restart = roll() < sc.restartRate;
    const applied = restart ? p.actions.slice(0, Math.floor(roll() * p.actions.length)) : p.actions;
    const before = simInFlight(nodes, step);
    for (const a of applied) {
      const n = byName.get(a.node)!;
      const edit = !a.kind.startsWith("Record") && a.kind !== "MarkFailed";
      // (4, second half) Nothing moves a node whose start was not recorded first.
      if (edit) expect(n.startedAt, `${a.kind} on ${n.name} before RecordStart`).toBeDefined();
      // No new node starts once a failure is known, or while paused.
      if (a.kind === "RecordStart") expect(markedFailed || rollingBack || paused).toBe(false);
      // A failed node moves only back to the old revision.
      if (n.failed === true && edit) expect(["AddToOld", "RemoveFromNew"]).toContain(a.kind);
      apply(n, a, step);
      if (a.kind === "MarkFailed") markedFailed = true;
      // (2) No node is started twice.
      expect(n.starts, `${n.name} started twice`).toBeLessThanOrEqual(1);
    }
    if (!restart && (p.phase === "RollingBack" || p.phase === "RolledBack")) rollingBack = true;

    // (1) In the model too, whatever the planner believes.
    const after = simInFlight(nodes, step);
    expect(after).toBeLessThanOrEqual(Math.max(limit, before, previousInFlight));
    if (sc.newMaxUnavailable === undefined) expect(after).toBeLessThanOrEqual(limit);
    previousInFlight = p.inFlight.length;

    const surgeSafe = (s: number): void => {
      for (const n of nodes) {
        // (3) A surge node always has a plugin serving: never an allocatable-zero window.
        if (n.mode === "Surge") {
          expect(up(n.oldPod, s) || up(n.newPod, s), `${n.name} has no plugin at step ${s}`).toBe(true);
        }
        // And going forward a replaced node never runs the two side by side, which is what its
        // kubelet cannot take. (Rolling back brings the old one back beside the new one on every
        // node, as the design says; see the planner.)
        if (n.mode === "Replace" && !n.rolledBack) {
          expect(n.oldPod !== undefined && n.newPod !== undefined, `${n.name} runs both at step ${s}`).toBe(
            false,
          );
        }
      }
    };
    surgeSafe(step);
    for (const n of nodes) advance(n, step + 1);
    surgeSafe(step + 1);

    if (!restart && (p.phase === "Complete" || p.phase === "RolledBack")) {
      return { phase: p.phase, nodes, markedFailed, step, lastPlan: p };
    }
    // A Failed rollout without rollback ends when nothing has moved for a while.
    quiet = p.phase === "Failed" && p.actions.length === 0 ? quiet + 1 : 0;
    if (quiet > 10) return { phase: p.phase, nodes, markedFailed, step, lastPlan: p };
  }
  return { phase: lastPlan!.phase, nodes, markedFailed, step: Math.min(cap, stopAt), lastPlan: lastPlan! };
}
