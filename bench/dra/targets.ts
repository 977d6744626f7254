// bench-dra's targets, each a bound on a figure of the run, and the judge of a run.
import { percentile } from "../../tools/stats.js";
import { atMost, check, type Miss } from "../targets.js";
import type { SwitchFigures } from "./switch.js";

/** The bounds docs/benchmarks.md states for bench-dra. */
export const DRA_TARGETS = {
  /** A device's health change → its taint on (or off) in its node's ResourceSlice, p99 over the nodes. */
  sliceTaintP99Ms: atMost(1_000, "ms"),
  /** The switch, each direction: pods rejected at admission with UnexpectedAdmissionError. */
  switchUnexpectedAdmissions: atMost(0),
  /** The switch, each direction: observations of a node advertising the name through both paths at once. */
  switchBothPaths: atMost(0),
} as const;

/** What a run measured; a step the run did not reach is left out (the run failed, and exits 1 for that). */
export interface DraFigures {
  /** Per node, the health file's write → the device tainted in the node's slice, in ms. */
  taintedMs?: readonly number[];
  /** Per node, the write that makes it healthy → the taint gone, in ms. */
  untaintedMs?: readonly number[];
  switches?: readonly Pick<SwitchFigures, "target" | "unexpectedAdmission" | "bothPaths">[];
}

/** The targets the run missed, each with its measured figure and bound; none when every one held. */
export function judgeDra(figures: DraFigures): Miss[] {
  const t = DRA_TARGETS;
  const misses: Miss[] = [];
  if (figures.taintedMs !== undefined)
    misses.push(
      ...check(
        "device unhealthy → tainted in its node's ResourceSlice, p99",
        percentile(figures.taintedMs, 99),
        t.sliceTaintP99Ms,
      ),
    );
  if (figures.untaintedMs !== undefined)
    misses.push(
      ...check(
        "device healthy again → taint gone, p99",
        percentile(figures.untaintedMs, 99),
        t.sliceTaintP99Ms,
      ),
    );
  for (const s of figures.switches ?? []) {
    misses.push(
      ...check(
        `switch to ${s.target}: pods rejected with UnexpectedAdmissionError`,
        s.unexpectedAdmission,
        t.switchUnexpectedAdmissions,
      ),
      ...check(
        `switch to ${s.target}: a node seen advertising through both paths`,
        s.bothPaths,
        t.switchBothPaths,
      ),
    );
  }
  return misses;
}
