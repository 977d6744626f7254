// The age of a node's record on the operator's monotonic clock (RecordClock), whatever the wall clock does,
// and the clock's entries forgotten with a gone config.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { StepDeps } from "../../../../src/operator/controllers/reconciler-deps.js";
import { forgetRolloutWrites } from "../../../../src/operator/controllers/steps/plugin-workloads.js";
import { RecordClock } from "../../../../src/operator/upgrade/record-clock.js";
import { FENCE_SETTLE_MS, type RolloutDecision } from "../../../../src/operator/upgrade/rollout.js";
import {
  decide,
  FRESH,
  KEYS,
  NEW,
  NEW_REPLACE,
  newRev,
  node,
  NOW,
  OLD,
  pod,
  recordWritten,
  report,
  stored,
  written,
} from "./rollout-support.js";

describe("decideRollout judges a record's age on the operator's monotonic clock", () => {
  const HOUR_MS = 3_600_000;
  const DEADLINE_MS = 300_000;
  /** A monotonic clock the test moves; the wall clock is each pass's `now`, stepped at will. */
  const monotonic = (): { ms: number; clock: RecordClock } => {
    const m = { ms: 1_000_000, clock: undefined as unknown as RecordClock };
    m.clock = new RecordClock(() => m.ms);
    return m;
  };
  const base = stored(OLD, "base");
  const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
  const newPod = pod(next, "a");
  /** One pass over node a, surged at NOW by the wall clock that wrote its record, its new plugin not up. */
  const surgedPass = (clock: RecordClock, wallNow: number): RolloutDecision =>
    decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW, baseline: 4 } })],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod, false)],
      now: wallNow,
      recordTimes: clock.forPass("foo"),
    });
  const failed = (d: RolloutDecision): boolean => recordWritten(d, "a")?.failed === true;

  it("rolls nothing back when the wall clock steps forward, and fails the node when the deadline has passed", () => {
    const m = monotonic();
    expect(failed(surgedPass(m.clock, NOW))).toBe(false);
    m.ms += 10_000;
    const stepForward = surgedPass(m.clock, NOW + 24 * HOUR_MS);
    expect({ failed: failed(stepForward), phase: stepForward.status.phase }).toEqual({
      failed: false,
      phase: "Progressing",
    });
    // The wall clock steps back past the start: the deadline still runs out when it has.
    m.ms += DEADLINE_MS;
    const stepBack = surgedPass(m.clock, NOW - HOUR_MS);
    expect({ failed: failed(stepBack), phase: stepBack.status.phase }).toEqual({
      failed: true,
      phase: "RollingBack",
    });
  });

  it("gives a new leader, whose wall clock runs ahead, the whole deadline from when it first reads the record", () => {
    const newLeader = monotonic();
    newLeader.ms = 42;
    // The new leader's wall clock is ten minutes ahead of the one that wrote startedAt.
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000))).toBe(false);
    newLeader.ms += DEADLINE_MS - 1;
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000 + DEADLINE_MS))).toBe(false);
    newLeader.ms += 2;
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000 + DEADLINE_MS))).toBe(true);
  });

  it("lets a Replace fence settle for its whole time whatever the wall clock does", () => {
    const m = monotonic();
    const fencedNode = (): V1Node => {
      const n = node("a", "v1.34.1", 4, { record: { startedAt: NOW, fencedAt: NOW, baseline: 4 } });
      n.spec = { taints: [{ key: KEYS.replace, effect: "NoSchedule" }] };
      return n;
    };
    const pass = (wallNow: number): RolloutDecision =>
      decide({
        config: NEW_REPLACE,
        daemonSets: [base, next],
        nodes: [fencedNode()],
        pods: [pod(base, "a")],
        now: wallNow,
        recordTimes: m.clock.forPass("foo"),
      });
    // The wall clock jumps an hour ahead right after the fence went on: the old plugin stays.
    const jumped = pass(NOW + HOUR_MS);
    expect(written(jumped)).toEqual([]);
    expect(jumped.requeueAfterMs).toBeDefined();
    m.ms += FENCE_SETTLE_MS - 1;
    expect(written(pass(NOW + HOUR_MS))).toEqual([]);
    // Settled by the monotonic clock, with the wall clock now an hour behind: the old revision leaves.
    m.ms += 1;
    expect(written(pass(NOW - HOUR_MS))).toEqual(["Node a revision=none"]);
    expect(m.clock.size).toBe(2);
  });
});

describe("RecordClock", () => {
  it("measures from the first sight of a stamp, starts again for a new stamp or upgrade, and keeps one entry per field", () => {
    let ms = 0;
    const clock = new RecordClock(() => ms);
    expect(clock.forPass("foo").seen("a", "r2", "startedAt", 111)).toBe(0);
    ms = 50;
    const pass = clock.forPass("foo");
    expect(pass.now).toBe(50);
    expect(pass.seen("a", "r2", "startedAt", 111)).toBe(0);
    expect(pass.seen("a", "r2", "startedAt", 222)).toBe(50);
    ms = 60;
    expect(clock.forPass("foo").seen("a", "r3", "startedAt", 222)).toBe(60);
    expect(clock.forPass("bar").seen("a", "r3", "startedAt", 222)).toBe(60);
    expect(clock.size).toBe(2);
  });

  it("keeps nothing of a config once it is forgotten (a deleted config), and the others' entries stay", () => {
    const clock = new RecordClock(() => 0);
    for (let i = 0; i < 1_000; i++) {
      clock.forPass(`gone-${i}`).seen("a", "r2", "startedAt", 1);
      clock.forget(`gone-${i}`);
    }
    clock.forPass("kept").seen("a", "r2", "fencedAt", 1);
    expect(clock.size).toBe(1);
  });

  it("is forgotten with the rest of a gone config's rollout state", () => {
    const clock = new RecordClock(() => 0);
    clock.forPass("gone").seen("a", "r2", "startedAt", 1);
    // The write expectations are kept per informer: plain objects stand for the caches here.
    forgetRolloutWrites({ recordClock: clock, nodes: {}, daemonSets: {} } as unknown as StepDeps, "gone");
    expect(clock.size).toBe(0);
  });
});
