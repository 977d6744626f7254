// The benchmarks' figures: nearest-rank percentiles and the "dpo / Go" ratios beside them.
import { describe, expect, it } from "vitest";
import { formatRatio, maxInWindow, minGap, percentile } from "../../../tools/stats.js";

describe("formatRatio", () => {
  it.each([
    { a: 3, b: 1, want: "3.00" },
    { a: 1, b: 3, want: "0.33" },
    { a: 0.5, b: 0.25, want: "2.00" },
    { a: 0, b: 2, want: "0.00" },
    { a: 1, b: 0, want: "n/a" },
    { a: 1, b: -1, want: "n/a" },
    { a: -1, b: 1, want: "n/a" },
    { a: NaN, b: 1, want: "n/a" },
    { a: 1, b: NaN, want: "n/a" },
    { a: Infinity, b: 1, want: "n/a" },
  ])("$a / $b is $want", ({ a, b, want }) => {
    expect(formatRatio(a, b)).toBe(want);
  });
});

describe("percentile", () => {
  it.each([
    { values: [], p: 50, want: NaN },
    { values: [5], p: 99, want: 5 },
    { values: [4, 1, 3, 2], p: 50, want: 2 },
    { values: [4, 1, 3, 2], p: 99, want: 4 },
    { values: [4, 1, 3, 2], p: 0, want: 1 },
  ])("p$p of $values is $want", ({ values, p, want }) => {
    expect(percentile(values, p)).toBe(want);
  });
});

describe("maxInWindow and minGap", () => {
  it.each([
    { times: [], want: 0, gap: Infinity },
    { times: [0, 500, 1000], want: 1, gap: 500 },
    { times: [1000, 0, 499], want: 2, gap: 499 },
    { times: [0, 100, 200, 900], want: 3, gap: 100 },
  ])("$times: at most $want in 500 ms, closest $gap apart", ({ times, want, gap }) => {
    expect(maxInWindow(times, 500)).toBe(want);
    expect(minGap(times)).toBe(gap);
  });
});
