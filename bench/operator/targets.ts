// bench-operator's targets, each a bound on a figure a row measured, and the judge of a run's rows.
import { atLeast, atMost, check, describeBound, type Bound, type Miss } from "../targets.js";

/** The bounds docs/benchmarks.md states for bench-operator, by figure; the rows print them as their target. */
export const OPERATOR_TARGETS = {
  /** Config create → DaemonSet exists, p99: 1 s, and 2 s from 1000 nodes. */
  createP99Ms: (nodes: number): Bound => atMost(nodes >= 1000 ? 2_000 : 1_000, "ms"),
  /** Node capacity change → CR status, p99: 1 s, 2 s at 1000 nodes, 5 s beyond. */
  capacityP99Ms: (nodes: number): Bound => atMost(nodes > 1000 ? 5_000 : nodes >= 1000 ? 2_000 : 1_000, "ms"),
  /** API requests of all report writers over the idle window. */
  writerIdleRequests: atMost(0),
  /** The operator's writes (status writes and applies) over the idle window. */
  idleWrites: atMost(0),
  /** New API connections (TLS handshakes) of the operator over the idle window. */
  idleHandshakes: atMost(0),
  /** The operator's RSS, idle and after the flap storm. */
  rssMiB: atMost(200, "MiB"),
  /** The operator's peak RSS over the run (VmHWM): within its Deployment's memory limit, in MiB. */
  peakRssMiB: (deploymentLimitMiB: number): Bound => atMost(deploymentLimitMiB, "MiB"),
  /** The flap storm's status writes of the config in the audit log: some, or the spacing judges nothing. */
  auditedStatusWrites: atLeast(1),
  /** The most of those writes arriving in any status-write interval (500 ms). */
  statusWritesPerInterval: atMost(1),
  /** Problem nodes the config's status lists (the rest are counted in problemsOmitted). */
  problemsListed: atMost(20),
} as const;

/** One measured figure of a row and its bound; `figure` names it where a row holds more than one. */
export interface Check {
  readonly figure?: string;
  readonly value: number;
  readonly bound: Bound;
}

/** One row of the table: the figure as printed, what it is held to, and the checks that judge it. */
export interface Row {
  metric: string;
  value: string;
  /** The target as printed: the checks' bounds in words, or "(reported)" for a row without one. */
  target: string;
  /** None for a row that is only reported. */
  checks?: readonly Check[];
}

/** The printed target of a bound on a p99. */
export function p99Target(bound: Bound): string {
  return `p99 ${describeBound(bound)}`;
}

/** The targets `rows` missed, each with its measured figure and bound; none when every one held. */
export function judgeOperator(rows: readonly Row[]): Miss[] {
  return rows.flatMap((row) =>
    (row.checks ?? []).flatMap((c) =>
      check(c.figure === undefined ? row.metric : `${row.metric}: ${c.figure}`, c.value, c.bound),
    ),
  );
}
