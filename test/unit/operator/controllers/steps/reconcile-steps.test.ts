// Pure decisions of the reconcile steps: when a status write may go, which resourceVersion is newer,
// which retry comes first, and the status of a spec that no longer validates.
import { describe, expect, it } from "vitest";
import {
  newerOrSame,
  statusWriteDelayMs,
} from "../../../../../src/operator/controllers/steps/status-writes.js";
import { soonerRetry, soonest } from "../../../../../src/operator/controllers/reconciler-deps.js";
import { invalidSpecStatus } from "../../../../../src/operator/status/invalid-spec.js";

describe("statusWriteDelayMs", () => {
  it.each<[string, number | undefined, number, number, number | undefined]>([
    ["never written", undefined, 1_000, 500, undefined],
    ["written long ago", 0, 1_000, 500, undefined],
    ["exactly one interval ago", 500, 1_000, 500, undefined],
    ["written 50 ms ago", 950, 1_000, 500, 450],
    ["written just now", 1_000, 1_000, 500, 500],
    ["no interval", 1_000, 1_000, 0, undefined],
  ])("%s", (_name, last, now, interval, delay) => {
    expect(statusWriteDelayMs(last, now, interval)).toBe(delay);
  });
});

describe("newerOrSame", () => {
  it.each<[string | undefined, string, boolean]>([
    [undefined, "5", false],
    ["5", "5", true],
    ["6", "5", true],
    ["4", "5", false],
    // Integers, not strings: "10" sorts before "9" as text.
    ["10", "9", true],
    ["123456789012345678901", "123456789012345678900", true],
    // Not integers: only equality says anything.
    ["abc", "abc", true],
    ["abd", "abc", false],
  ])("%s against %s: %s", (candidate, reference, want) => {
    expect(newerOrSame(candidate, reference)).toBe(want);
  });
});

describe("soonest and soonerRetry", () => {
  it.each<[object, number | undefined, object]>([
    [{}, undefined, {}],
    [{}, 100, { requeueAfterMs: 100 }],
    [{ requeueAfterMs: 50 }, 100, { requeueAfterMs: 50 }],
    [{ requeueAfterMs: 500 }, 100, { requeueAfterMs: 100 }],
    [{ requeueAfterMs: 500 }, undefined, { requeueAfterMs: 500 }],
  ])("soonest(%o, %s)", (result, retry, want) => {
    expect(soonest(result, retry)).toEqual(want);
  });

  it.each<[number | undefined, number | undefined, number | undefined]>([
    [undefined, undefined, undefined],
    [undefined, 5, 5],
    [5, undefined, 5],
    [5, 3, 3],
  ])("soonerRetry(%s, %s) = %s", (a, b, want) => {
    expect(soonerRetry(a, b)).toBe(want);
  });
});

describe("invalidSpecStatus", () => {
  const now = new Date("2026-01-01T00:00:10Z");

  it("stalls the config with the validation errors and keeps the rest of the stored status", () => {
    const status = invalidSpecStatus(
      {
        metadata: { generation: 3 },
        status: {
          observedGeneration: 2,
          nodes: { desired: 1, ready: 1, updated: 1, summary: "1/1" },
          conditions: [
            {
              type: "Ready",
              status: "False",
              reason: "NodesNotReady",
              message: "0/1",
              lastTransitionTime: "2025-12-31T00:00:00Z",
            },
          ],
        },
      },
      "spec.sharing.replicas: must be >= 2",
      now,
    );
    expect(status.observedGeneration).toBe(3);
    expect(status.nodes).toEqual({ desired: 1, ready: 1, updated: 1, summary: "1/1" });
    expect(status.conditions?.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime])).toEqual([
      // Ready was False before: its transition time stays.
      ["Ready", "False", "InvalidSpec", "2025-12-31T00:00:00Z"],
      ["Reconciling", "False", "InvalidSpec", "2026-01-01T00:00:10Z"],
      ["Stalled", "True", "InvalidSpec", "2026-01-01T00:00:10Z"],
      ["Degraded", "Unknown", "InvalidSpec", "2026-01-01T00:00:10Z"],
    ]);
    expect(status.conditions?.find((c) => c.type === "Stalled")?.message).toBe(
      "spec.sharing.replicas: must be >= 2",
    );
  });

  it("bounds a long message to 1024 characters", () => {
    const status = invalidSpecStatus({}, "x".repeat(5_000), now);
    const message = status.conditions?.find((c) => c.type === "Ready")?.message ?? "";
    expect(message).toHaveLength(1024);
    expect(message.endsWith("…")).toBe(true);
    expect(status.observedGeneration).toBe(0);
  });
});
