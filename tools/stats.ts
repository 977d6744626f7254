// Figures the benchmarks and chaos tests report.

/** The nearest-rank percentile `p` (0–100) of `values`; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/** `a / b` with two decimals, for the benchmarks' "dpo / Go" columns; "n/a" where the ratio means nothing. */
export function formatRatio(a: number, b: number): string {
  if (!Number.isFinite(a) || !Number.isFinite(b) || b <= 0 || a < 0) return "n/a";
  return (a / b).toFixed(2);
}

/**
 * The most of the (millisecond) `times` that fall in any half-open window `[t, t + windowMs)`: with
 * events spaced at least `windowMs` apart it is 1. 0 for none.
 */
export function maxInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[end]! - sorted[start]! >= windowMs) start++;
    best = Math.max(best, end - start + 1);
  }
  return best;
}

/** The smallest gap between consecutive (millisecond) `times`; Infinity for fewer than two. */
export function minGap(times: readonly number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let gap = Number.POSITIVE_INFINITY;
  for (let i = 1; i < sorted.length; i++) gap = Math.min(gap, sorted[i]! - sorted[i - 1]!);
  return gap;
}
