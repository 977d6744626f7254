// The verdict every benchmark ends with: a bound holds or is missed (a figure never measured misses), the
// closing lines name each miss with its figure and bound, and a miss or a failed step exits non-zero.
import { describe, expect, it, vi } from "vitest";
import {
  atLeast,
  atMost,
  check,
  describeBound,
  exitStatus,
  holds,
  printVerdict,
  verdictLines,
} from "../../../bench/targets.js";

describe("holds", () => {
  it.each([
    { bound: atMost(1_000, "ms"), value: 1_000, want: true },
    { bound: atMost(1_000, "ms"), value: 1_000.1, want: false },
    { bound: atMost(0), value: 0, want: true },
    { bound: atMost(0), value: 1, want: false },
    { bound: atLeast(1), value: 1, want: true },
    { bound: atLeast(1), value: 0, want: false },
    { bound: atMost(1_000, "ms"), value: NaN, want: false },
    { bound: atLeast(1), value: NaN, want: false },
  ])("$value against $bound.op $bound.limit: $want", ({ bound, value, want }) => {
    expect(holds(value, bound)).toBe(want);
  });
});

describe("check", () => {
  it("names the figure, its bound and the measured value when the bound is missed", () => {
    expect(check("operator RSS", 200.5, atMost(200, "MiB"))).toEqual([
      { metric: "operator RSS", target: "≤ 200 MiB", measured: "200.50 MiB" },
    ]);
  });

  it("is empty when the bound holds", () => {
    expect(check("operator RSS", 200, atMost(200, "MiB"))).toEqual([]);
  });

  it("says a figure without samples was not measured", () => {
    expect(check("taint p99", NaN, atMost(1_000, "ms"))).toEqual([
      { metric: "taint p99", target: "≤ 1000 ms", measured: "not measured (no samples)" },
    ]);
  });
});

describe("describeBound", () => {
  it.each([
    { bound: atMost(1_000, "ms"), want: "≤ 1000 ms" },
    { bound: atMost(0), want: "≤ 0" },
    { bound: atLeast(1), want: "≥ 1" },
  ])("$want", ({ bound, want }) => {
    expect(describeBound(bound)).toBe(want);
  });
});

describe("the verdict", () => {
  const miss = { metric: "create p99", target: "≤ 1000 ms", measured: "1001 ms" };

  it("says every target met, and exits 0, when nothing was missed and nothing failed", () => {
    expect(verdictLines([])).toEqual(["every target met"]);
    expect(exitStatus([], false)).toBe(0);
  });

  it("lists each missed target with its figure and bound, and exits 1", () => {
    expect(verdictLines([miss])).toEqual(["missed targets:", "  create p99: 1001 ms, target ≤ 1000 ms"]);
    expect(exitStatus([miss], false)).toBe(1);
  });

  it("exits 1 after a failed step whatever the figures measured before it", () => {
    expect(exitStatus([], true)).toBe(1);
    expect(exitStatus([miss], true)).toBe(1);
  });
});

describe("printVerdict", () => {
  it("prints the verdict under the benchmark's name and returns the exit status", () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      expect(
        printVerdict("bench-dra", [{ metric: "taint p99", target: "≤ 1000 ms", measured: "1396 ms" }]),
      ).toBe(1);
      expect(log).toHaveBeenLastCalledWith(
        "\nbench-dra: missed targets:\n  taint p99: 1396 ms, target ≤ 1000 ms",
      );
      expect(printVerdict("bench-dra", [])).toBe(0);
      expect(log).toHaveBeenLastCalledWith("\nbench-dra: every target met");
      expect(printVerdict("bench-dra", [], true)).toBe(1);
    } finally {
      log.mockRestore();
    }
  });
});
