// bench-dra's judge: the slice-taint p99 both ways and the switch's failed admissions and double
// advertising, each held just inside its bound and missed just outside, and a miss exiting non-zero.
import { describe, expect, it } from "vitest";
import { judgeDra, type DraFigures } from "../../../../bench/dra/targets.js";
import { exitStatus } from "../../../../bench/targets.js";

/** 100 samples: the p99 (nearest rank) is the 99th smallest, `p99`; the largest is above it. */
function samples(p99: number): number[] {
  return [...Array.from({ length: 98 }, (_, i) => i), p99, p99 + 500];
}

const cleanSwitch = { target: "DRA" as const, unexpectedAdmission: 0, bothPaths: 0 };

describe("judgeDra", () => {
  it.each<{ what: string; inside: DraFigures; outside: DraFigures; metric: string; target: string }>([
    {
      what: "unhealthy → tainted p99",
      inside: { taintedMs: samples(1_000) },
      outside: { taintedMs: samples(1_001) },
      metric: "device unhealthy → tainted in its node's ResourceSlice, p99",
      target: "≤ 1000 ms",
    },
    {
      what: "healthy again → taint gone p99",
      inside: { untaintedMs: samples(1_000) },
      outside: { untaintedMs: samples(1_001) },
      metric: "device healthy again → taint gone, p99",
      target: "≤ 1000 ms",
    },
    {
      what: "the switch's UnexpectedAdmissionError",
      inside: { switches: [cleanSwitch] },
      outside: { switches: [{ ...cleanSwitch, unexpectedAdmission: 1 }] },
      metric: "switch to DRA: pods rejected with UnexpectedAdmissionError",
      target: "≤ 0",
    },
    {
      what: "the switch's both paths on a node",
      inside: { switches: [{ ...cleanSwitch, target: "DevicePlugin" }] },
      outside: { switches: [{ ...cleanSwitch, target: "DevicePlugin", bothPaths: 1 }] },
      metric: "switch to DevicePlugin: a node seen advertising through both paths",
      target: "≤ 0",
    },
  ])("$what: held just inside, missed just outside", ({ inside, outside, metric, target }) => {
    expect(judgeDra(inside)).toEqual([]);
    const misses = judgeDra(outside);
    expect(misses).toEqual([{ metric, target, measured: expect.any(String) as string }]);
    expect(exitStatus(misses, false)).toBe(1);
  });

  it("misses a taint latency with no samples", () => {
    expect(judgeDra({ taintedMs: [] })).toEqual([
      {
        metric: "device unhealthy → tainted in its node's ResourceSlice, p99",
        target: "≤ 1000 ms",
        measured: "not measured (no samples)",
      },
    ]);
  });

  it("judges both directions of the switch apart", () => {
    const misses = judgeDra({
      switches: [
        { target: "DRA", unexpectedAdmission: 35, bothPaths: 0 },
        { target: "DevicePlugin", unexpectedAdmission: 0, bothPaths: 0 },
      ],
    });
    expect(misses.map((m) => [m.metric, m.measured])).toEqual([
      ["switch to DRA: pods rejected with UnexpectedAdmissionError", "35"],
    ]);
  });

  it("leaves out steps the run did not reach (a failed run exits 1 for the failure)", () => {
    expect(judgeDra({})).toEqual([]);
    expect(exitStatus(judgeDra({}), true)).toBe(1);
  });
});
