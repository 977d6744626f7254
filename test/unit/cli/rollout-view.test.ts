// `kubectl dpo rollout status`'s decisions: when a rollout is over and with which exit code, the counts of
// its progress line, the pace, kubectl's durations, and lines that never wrap.
import { describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus, UpgradeStatus } from "../../../src/api/v1beta1/status.js";
import {
  formatDuration,
  formatProgressLine,
  formatProgressPlain,
  parseDuration,
  RolloutPace,
  rolloutProgress,
  rolloutVerdict,
  type ConfigView,
} from "../../../src/cli/rollout-view.js";

const T = "2026-01-01T00:00:00Z";

function upgrade(
  phase: UpgradeStatus["phase"],
  updated: number,
  total: number,
  more: Partial<UpgradeStatus> = {},
) {
  return {
    phase,
    currentRevision: "old1",
    updateRevision: "new2",
    updated,
    total,
    summary: `${updated}/${total}`,
    ...more,
  } satisfies UpgradeStatus;
}

function config(status: Partial<DevicePluginConfigStatus> | undefined, generation = 3): ConfigView {
  return {
    metadata: { name: "gpu", generation },
    ...(status === undefined ? {} : { status: { observedGeneration: generation, ...status } }),
  };
}

const stalled = (reason: string, message: string) => ({
  conditions: [{ type: "Stalled", status: "True" as const, reason, message, lastTransitionTime: T }],
});

describe("rolloutVerdict", () => {
  it.each<[string, ConfigView, { done: boolean; exitCode?: number; message: RegExp }]>([
    ["no status yet", config(undefined), { done: false, message: /observe generation 3/ }],
    [
      "a status of the generation before (its Complete is the old spec's)",
      {
        metadata: { name: "gpu", generation: 4 },
        status: { observedGeneration: 3, upgrade: upgrade("Complete", 3, 3) },
      },
      { done: false, message: /observe generation 4 of config "gpu"/ },
    ],
    [
      "complete on every node",
      config({ upgrade: upgrade("Complete", 3, 3) }),
      { done: true, exitCode: 0, message: /^config "gpu" successfully rolled out$/ },
    ],
    [
      "complete but a node not counted yet",
      config({ upgrade: upgrade("Complete", 2, 3) }),
      { done: false, message: /2 of 3 nodes updated/ },
    ],
    [
      "progressing",
      config({ upgrade: upgrade("Progressing", 1, 3, { inFlight: ["n2"] }) }),
      { done: false, message: /Waiting for config "gpu" rollout to finish: 1 of 3 nodes updated/ },
    ],
    [
      "paused, with the command that resumes it",
      config({ upgrade: upgrade("Paused", 1, 3) }),
      { done: false, message: /paused .*kubectl dpo rollout resume gpu/ },
    ],
    [
      "rolling back is not over yet",
      config({ upgrade: upgrade("RollingBack", 1, 3) }),
      { done: false, message: /roll back to revision old1/ },
    ],
    [
      "rolled back fails with the operator's message",
      config({
        upgrade: upgrade("RolledBack", 0, 3, { message: "node(s) n1 did not get the new plugin advertised" }),
      }),
      { done: true, exitCode: 1, message: /rolled back to revision old1: node\(s\) n1 did not/ },
    ],
    [
      "failed",
      config({ upgrade: upgrade("Failed", 1, 3, { message: "the upgrade stopped" }) }),
      { done: true, exitCode: 1, message: /rollout failed: the upgrade stopped/ },
    ],
    [
      "stalled for a reason waiting cannot fix",
      config({ ...stalled("InvalidSpec", "spec.backend: bad"), upgrade: upgrade("Progressing", 0, 3) }),
      { done: true, exitCode: 1, message: /stalled \(InvalidSpec\): spec.backend: bad/ },
    ],
    [
      "no upgrade status: every node updated",
      config({ nodes: { desired: 2, ready: 2, updated: 2, summary: "2/2" } }),
      { done: true, exitCode: 0, message: /successfully rolled out/ },
    ],
    [
      "no upgrade status: a node not updated",
      config({ nodes: { desired: 2, ready: 1, updated: 1, summary: "1/2" } }),
      { done: false, message: /1 of 2 nodes updated/ },
    ],
  ])("%s", (_what, input, want) => {
    const verdict = rolloutVerdict(input);
    expect(verdict.done).toBe(want.done);
    expect(verdict.message).toMatch(want.message);
    if (verdict.done) expect(verdict.exitCode).toBe(want.exitCode);
  });
});

describe("rolloutProgress", () => {
  it.each([
    [
      "counts in flight apart from waiting, serving from available",
      config({
        upgrade: upgrade("Progressing", 2, 6, { inFlight: ["n3"], inFlightOmitted: 1 }),
        nodes: { desired: 6, ready: 4, available: 5, updated: 2, summary: "5/6" },
      }),
      2,
      { phase: "Progressing", updated: 2, total: 6, serving: 5, fenced: 2, waiting: 2, inFlight: 2 },
    ],
    [
      "falls back to ready where available is absent (statuses of older operators)",
      config({
        upgrade: upgrade("Complete", 3, 3),
        nodes: { desired: 3, ready: 3, updated: 3, summary: "3/3" },
      }),
      0,
      { phase: "Complete", updated: 3, total: 3, serving: 3, fenced: 0, waiting: 0, inFlight: 0 },
    ],
    [
      "no status",
      config(undefined),
      0,
      { phase: "Unknown", updated: 0, total: 0, serving: 0, fenced: 0, waiting: 0, inFlight: 0 },
    ],
  ])("%s", (_what, input, fenced, want) => {
    expect(rolloutProgress(input, fenced)).toEqual(want);
  });
});

describe("RolloutPace", () => {
  it("has no estimate until a node has moved", () => {
    const pace = new RolloutPace();
    expect(pace.remainingMs(4)).toBeUndefined();
    pace.observe(0, 0);
    pace.observe(10_000, 0);
    expect(pace.remainingMs(4)).toBeUndefined();
  });

  it("extrapolates from the first reading: 2 nodes in 60 s leaves 2 more in 60 s", () => {
    const pace = new RolloutPace();
    pace.observe(1_000, 0);
    pace.observe(31_000, 1);
    pace.observe(61_000, 2);
    expect(pace.remainingMs(4)).toBe(60_000);
    expect(pace.remainingMs(2)).toBe(0);
  });

  it("starts over when the count drops (a rollback, or a new rollout)", () => {
    const pace = new RolloutPace();
    pace.observe(0, 3);
    pace.observe(10_000, 0);
    pace.observe(20_000, 1);
    expect(pace.remainingMs(3)).toBe(20_000);
  });
});

describe("durations", () => {
  it.each([
    ["30s", 30_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1_500],
    ["250ms", 250],
    ["0", 0],
    ["0s", 0],
  ])("parses %s as kubectl does", (text, ms) => {
    expect(parseDuration("timeout", text)).toBe(ms);
  });

  it.each(["30", "5 m", "1d", "", "m5", "-1s"])("refuses %j, naming the flag", (text) => {
    expect(() => parseDuration("timeout", text)).toThrow(/^--timeout: '.*' is not a duration/);
  });

  it.each([
    [0, "0s"],
    [44_600, "45s"],
    [80_000, "1m20s"],
    [120_000, "2m"],
    [3_600_000, "1h"],
    [7_500_000, "2h5m"],
  ])("writes %d ms as %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("progress lines", () => {
  const p = { phase: "Progressing", updated: 2, total: 4, serving: 4, fenced: 1, waiting: 1, inFlight: 1 };

  it("draws a half-full bar with every count, the pace and the timeout", () => {
    expect(formatProgressLine("gpu", p, 80_000, 600_000, 200)).toBe(
      "gpu [##########----------] Progressing: 2/4 updated, 4 serving, 1 fenced, 1 waiting, ~1m20s left (timeout in 10m)",
    );
  });

  it("has no time left to estimate once every node is updated", () => {
    expect(
      formatProgressLine(
        "gpu",
        { ...p, phase: "Complete", updated: 4, waiting: 0, fenced: 0 },
        0,
        5_000,
        200,
      ),
    ).toBe(
      "gpu [####################] Complete: 4/4 updated, 4 serving, 0 fenced, 0 waiting (timeout in 5s)",
    );
  });

  it("leaves out what it cannot know", () => {
    expect(formatProgressLine("gpu", p, undefined, undefined, 200)).toBe(
      "gpu [##########----------] Progressing: 2/4 updated, 4 serving, 1 fenced, 1 waiting",
    );
  });

  it.each([20, 40, 79])("is never wider than %d columns, so a terminal never wraps it", (columns) => {
    const line = formatProgressLine("a-long-config-name", p, 80_000, 600_000, columns);
    expect([...line].length).toBeLessThanOrEqual(columns);
    expect(line.endsWith("…")).toBe(true);
  });

  it("writes the same counts as a plain line", () => {
    expect(formatProgressPlain("gpu", p)).toBe(
      'config "gpu" Progressing: 2/4 updated, 4 serving, 1 fenced, 1 waiting',
    );
  });
});
