// bench-plugin's judge: each row's missed targets become the run's misses, with the row's figure, so the
// run ends with the same verdict and exit status as the other benchmarks.
import { describe, expect, it } from "vitest";
import { judgePlugin, type Result } from "../../../../bench/plugin/report.js";
import { exitStatus } from "../../../../bench/targets.js";

const held: Result = {
  metric: "health change → ListAndWatch",
  value: "p99 66.4 ms",
  target: "p99 ≤ 100 ms",
  missed: [],
};

describe("judgePlugin", () => {
  it("is empty, and the run exits 0, when every row held its targets", () => {
    expect(judgePlugin([held])).toEqual([]);
    expect(exitStatus(judgePlugin([held]), false)).toBe(0);
  });

  it("names each missed target of a row with the row's figure, and the run exits 1", () => {
    const allocate: Result = {
      metric: "Allocate, 1 in flight",
      value: "p50 0.591 ms, p99 4.997 ms",
      target: "p99 ≤ 2 ms, p99 ratio ≤ 3",
      missed: ["p99 ≤ 2 ms", "p99 ratio ≤ 3"],
    };
    const misses = judgePlugin([held, allocate]);
    expect(misses).toEqual([
      { metric: "Allocate, 1 in flight", target: "p99 ≤ 2 ms", measured: "p50 0.591 ms, p99 4.997 ms" },
      { metric: "Allocate, 1 in flight", target: "p99 ratio ≤ 3", measured: "p50 0.591 ms, p99 4.997 ms" },
    ]);
    expect(exitStatus(misses, false)).toBe(1);
  });
});
