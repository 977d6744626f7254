import { describe, expect, it } from "vitest";
import {
  CAPACITY_HEAL_MAX_MS,
  healWaitMs,
  INITIAL_CAPACITY_STATE,
  judgeCapacity,
  type CapacityObservation,
  type CapacityState,
} from "../../../../src/plugin-runtime/podresources/capacity-check.js";

const BOUND = 30_000;
const ALL = new Set(["d0", "d1", "d2", "d3"]);
const NONE = new Set<string>();

function obs(
  atMs: number,
  kubelet: ReadonlySet<string> | undefined,
  over: Partial<CapacityObservation> = {},
) {
  return {
    atMs,
    registered: true,
    standingBy: false,
    pluginHealthy: ALL,
    kubeletAllocatable: kubelet,
    ...over,
  };
}

/** Feeds the readings in order; returns the actions' kinds and the last state. */
function run(readings: CapacityObservation[], state: CapacityState = INITIAL_CAPACITY_STATE) {
  const kinds: string[] = [];
  for (const r of readings) {
    const next = judgeCapacity(state, r, BOUND);
    state = next.state;
    kinds.push(next.action.kind);
  }
  return { kinds, state };
}

describe("judgeCapacity", () => {
  it.each([
    {
      name: "kubelet lists every healthy device",
      readings: [obs(0, ALL), obs(40_000, ALL)],
      kinds: ["none", "none"],
    },
    {
      name: "short for less than the bound",
      readings: [obs(0, NONE), obs(29_999, NONE)],
      kinds: ["none", "none"],
    },
    {
      name: "short for the bound",
      readings: [obs(0, NONE), obs(30_000, NONE)],
      kinds: ["none", "reregister"],
    },
    {
      name: "one device missing counts",
      readings: [obs(0, new Set(["d0", "d1", "d2"])), obs(30_000, new Set(["d0", "d1", "d2"]))],
      kinds: ["none", "reregister"],
    },
    {
      name: "kubelet ids of another plugin do not count as ours",
      readings: [obs(0, new Set(["x0", "x1", "x2", "x3"])), obs(30_000, new Set(["x0", "x1", "x2", "x3"]))],
      kinds: ["none", "reregister"],
    },
    {
      name: "a kubelet that did not answer is not judged",
      readings: [obs(0, NONE), obs(30_000, undefined)],
      kinds: ["none", "none"],
    },
    {
      name: "not registered: the plugin's own paths register it",
      readings: [obs(0, NONE, { registered: false }), obs(60_000, NONE, { registered: false })],
      kinds: ["none", "none"],
    },
    {
      name: "standing by for an older instance: never",
      readings: [obs(0, NONE, { standingBy: true }), obs(60_000, NONE, { standingBy: true })],
      kinds: ["none", "none"],
    },
    {
      name: "a gap while not registered restarts the clock",
      readings: [
        obs(0, NONE),
        obs(20_000, NONE, { registered: false }),
        obs(40_000, NONE),
        obs(60_000, NONE),
      ],
      kinds: ["none", "none", "none", "none"],
    },
    {
      name: "back before the bound: nothing to heal",
      readings: [obs(0, NONE), obs(20_000, ALL), obs(40_000, NONE), obs(60_000, NONE)],
      kinds: ["none", "none", "none", "none"],
    },
    {
      name: "healed once the kubelet lists them all after a heal",
      readings: [obs(0, NONE), obs(30_000, NONE), obs(40_000, ALL), obs(50_000, ALL)],
      kinds: ["none", "reregister", "healed", "none"],
    },
    {
      name: "a heal that did not help: the next waits twice the bound",
      readings: [obs(0, NONE), obs(30_000, NONE), obs(89_999, NONE), obs(90_000, NONE)],
      kinds: ["none", "reregister", "none", "reregister"],
    },
    {
      name: "no plugin devices healthy: nothing is missing",
      readings: [obs(0, NONE, { pluginHealthy: NONE }), obs(60_000, NONE, { pluginHealthy: NONE })],
      kinds: ["none", "none"],
    },
  ])("$name", ({ readings, kinds }) => {
    expect(run(readings).kinds).toEqual(kinds);
  });

  it("says what it saw, naming the counts and how long", () => {
    const first = judgeCapacity(INITIAL_CAPACITY_STATE, obs(0, new Set(["d1"])), BOUND);
    const { action } = judgeCapacity(first.state, obs(30_000, new Set(["d1"])), BOUND);
    expect(action).toEqual({
      kind: "reregister",
      kubelet: 1,
      plugin: 4,
      shortForMs: 30_000,
      message: "kubelet advertised 1 of 4 healthy devices for 30 s; registered again",
    });
  });

  it("reports how long the heal took, and starts the backoff over", () => {
    const { state } = run([obs(0, NONE), obs(30_000, NONE), obs(90_000, NONE)]);
    expect(state.healsWithoutRecovery).toBe(2);
    const healed = judgeCapacity(state, obs(91_500, ALL), BOUND);
    expect(healed.action).toEqual({ kind: "healed", afterMs: 1_500 });
    expect(healed.state.healsWithoutRecovery).toBe(0);
  });

  it("the wait doubles per heal, up to five minutes", () => {
    expect([0, 1, 2, 3, 4, 50].map((n) => healWaitMs(BOUND, n))).toEqual([
      30_000,
      60_000,
      120_000,
      240_000,
      CAPACITY_HEAL_MAX_MS,
      CAPACITY_HEAL_MAX_MS,
    ]);
  });
});
