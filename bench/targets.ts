// What every benchmark's verdict is made of: a target as a bound on a measured figure, the targets a run
// missed (each with its figure and bound), the lines that end a run and the exit status they give. Pure,
// so each benchmark's judge is unit-tested without a cluster.

/** A bound on one figure: at most, or at least, `limit` in `unit`. */
export interface Bound {
  readonly op: "≤" | "≥";
  readonly limit: number;
  /** How the figure and the limit are printed: `ms`, `MiB`, or "" for a count. */
  readonly unit: string;
}

export const atMost = (limit: number, unit = ""): Bound => ({ op: "≤", limit, unit });
export const atLeast = (limit: number, unit = ""): Bound => ({ op: "≥", limit, unit });

/** A target a run missed: which figure, its bound, and what was measured. */
export interface Miss {
  readonly metric: string;
  readonly target: string;
  readonly measured: string;
}

function withUnit(value: number, unit: string): string {
  const text = Number.isInteger(value) ? String(value) : value.toFixed(2);
  return unit === "" ? text : `${text} ${unit}`;
}

/** `≤ 1000 ms`, as the tables print a target. */
export function describeBound(bound: Bound): string {
  return `${bound.op} ${withUnit(bound.limit, bound.unit)}`;
}

/**
 * Whether `value` holds `bound`. A figure that was not measured (NaN: a percentile of no samples) holds
 * no bound, so a run that measured nothing cannot pass.
 */
export function holds(value: number, bound: Bound): boolean {
  return bound.op === "≤" ? value <= bound.limit : value >= bound.limit;
}

/** The miss of `metric` when `value` does not hold `bound`; none when it does. */
export function check(metric: string, value: number, bound: Bound): Miss[] {
  if (holds(value, bound)) return [];
  const measured = Number.isNaN(value) ? "not measured (no samples)" : withUnit(value, bound.unit);
  return [{ metric, target: describeBound(bound), measured }];
}

/** The lines that end a run: "every target met", or "missed targets:" and one line a miss. */
export function verdictLines(misses: readonly Miss[]): string[] {
  if (misses.length === 0) return ["every target met"];
  return ["missed targets:", ...misses.map((m) => `  ${m.metric}: ${m.measured}, target ${m.target}`)];
}

/** The exit status a run ends with: 1 on a missed target or a step that failed, else 0. */
export function exitStatus(misses: readonly Miss[], failed: boolean): 0 | 1 {
  return misses.length > 0 || failed ? 1 : 0;
}

/**
 * Prints the verdict after `bench`'s report and returns the exit status for it; `failed` says a step of
 * the run failed (its report then holds what was measured before), which exits non-zero whatever the
 * figures.
 */
export function printVerdict(bench: string, misses: readonly Miss[], failed = false): 0 | 1 {
  const lines = verdictLines(misses);
  if (failed) lines.push("(the run failed before it measured everything: see the error above)");
  console.log(`\n${bench}: ${lines.join("\n")}`);
  return exitStatus(misses, failed);
}
