// bench-operator's judge: each stated target (docs/benchmarks.md) held by a figure just inside its bound and
// missed by one just outside, the miss naming the figure and the bound, and a miss exiting non-zero.
import { describe, expect, it } from "vitest";
import { judgeOperator, OPERATOR_TARGETS, type Row } from "../../../../bench/operator/targets.js";
import { exitStatus, type Bound } from "../../../../bench/targets.js";

const T = OPERATOR_TARGETS;

/** A row that holds one figure to one bound. */
function row(metric: string, value: number, bound: Bound): Row {
  return { metric, value: String(value), target: "", checks: [{ value, bound }] };
}

describe("judgeOperator", () => {
  it.each([
    { what: "create → DaemonSet p99 at 100 nodes", bound: T.createP99Ms(100), inside: 1_000, outside: 1_001 },
    {
      what: "create → DaemonSet p99 at 1000 nodes",
      bound: T.createP99Ms(1000),
      inside: 2_000,
      outside: 2_001,
    },
    {
      what: "create → DaemonSet p99 at 5000 nodes",
      bound: T.createP99Ms(5000),
      inside: 2_000,
      outside: 2_001,
    },
    {
      what: "capacity → status p99 at 100 nodes",
      bound: T.capacityP99Ms(100),
      inside: 1_000,
      outside: 1_001,
    },
    {
      what: "capacity → status p99 at 1000 nodes",
      bound: T.capacityP99Ms(1000),
      inside: 2_000,
      outside: 2_001,
    },
    {
      what: "capacity → status p99 at 5000 nodes",
      bound: T.capacityP99Ms(5000),
      inside: 5_000,
      outside: 5_001,
    },
    { what: "report writers' requests while idle", bound: T.writerIdleRequests, inside: 0, outside: 1 },
    { what: "operator writes while idle", bound: T.idleWrites, inside: 0, outside: 1 },
    { what: "TLS handshakes while idle", bound: T.idleHandshakes, inside: 0, outside: 1 },
    { what: "operator RSS", bound: T.rssMiB, inside: 200, outside: 200.1 },
    { what: "operator peak RSS", bound: T.peakRssMiB(256), inside: 256, outside: 256.1 },
    {
      what: "flap storm's status writes in the audit log",
      bound: T.auditedStatusWrites,
      inside: 1,
      outside: 0,
    },
    { what: "status writes in any 500 ms", bound: T.statusWritesPerInterval, inside: 1, outside: 2 },
    { what: "problem nodes listed", bound: T.problemsListed, inside: 20, outside: 21 },
  ])("$what: $inside holds, $outside is missed", ({ what, bound, inside, outside }) => {
    expect(judgeOperator([row(what, inside, bound)])).toEqual([]);
    const misses = judgeOperator([row(what, outside, bound)]);
    expect(misses).toHaveLength(1);
    expect(misses[0]).toMatchObject({ metric: what, measured: expect.stringContaining(String(outside)) });
    expect(exitStatus(misses, false)).toBe(1);
  });

  it("misses a latency with no samples (a p99 of nothing is NaN)", () => {
    const misses = judgeOperator([row("create p99", NaN, T.createP99Ms(100))]);
    expect(misses).toEqual([
      { metric: "create p99", target: "≤ 1000 ms", measured: "not measured (no samples)" },
    ]);
  });

  it("judges every check of a row, naming the figure, and skips rows that are only reported", () => {
    const storm = (writes: number, perInterval: number): Row => ({
      metric: "flap storm",
      value: `${writes} writes`,
      target: "≤ 1 per 500 ms, at least one",
      checks: [
        { figure: "writes in the audit log", value: writes, bound: T.auditedStatusWrites },
        { figure: "most arriving in any 500 ms", value: perInterval, bound: T.statusWritesPerInterval },
      ],
    });
    const reported: Row = { metric: "reconcile duration", value: "12 ms", target: "(reported)" };
    expect(judgeOperator([reported, storm(0, 0)])).toEqual([
      { metric: "flap storm: writes in the audit log", target: "≥ 1", measured: "0" },
    ]);
    expect(judgeOperator([reported, storm(51, 2)])).toEqual([
      { metric: "flap storm: most arriving in any 500 ms", target: "≤ 1", measured: "2" },
    ]);
    expect(judgeOperator([reported, storm(51, 1)])).toEqual([]);
  });

  it("exits 0 when every row held", () => {
    expect(exitStatus(judgeOperator([row("operator RSS", 150, T.rssMiB)]), false)).toBe(0);
  });
});
