// The closing summary of `make test` and CI: each tier's tests and time, read from the JSON reports the tiers
// write to .local/test-results/ (vitest's json reporter), in the order the tiers started.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** What one tier's report says, with the time its file was written (when the tier ended). */
export interface TierReport {
  tier: string;
  passed: number;
  failed: number;
  skipped: number;
  files: number;
  /** When vitest started and when the report was written, ms since the epoch. */
  startedAt: number;
  endedAt: number;
}

interface VitestJson {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests?: number;
  startTime: number;
  testResults: readonly { endTime?: number }[];
}

/** The tier's figures from its vitest JSON report; `writtenAt` is the report file's mtime. */
export function tierReport(tier: string, json: VitestJson, writtenAt: number): TierReport {
  const ends = json.testResults.map((r) => r.endTime ?? 0).filter((t) => t > 0);
  return {
    tier,
    passed: json.numPassedTests,
    failed: json.numFailedTests,
    skipped: json.numPendingTests + (json.numTodoTests ?? 0),
    files: json.testResults.length,
    startedAt: json.startTime,
    endedAt: Math.max(writtenAt, ...ends),
  };
}

export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const m = Math.floor(s / 60);
  return m === 0 ? `${s}s` : `${m}m${String(s % 60).padStart(2, "0")}s`;
}

/**
 * The summary's lines: per tier its tests, the time vitest ran, and when it ran within the whole run (from
 * `startedAt`, the run's start): `make test` runs two lanes of tiers at once, so a tier's place in the run,
 * not the gap since the tier before it, is what says where the time went. Tiers are listed in the order they
 * started. The last line is the totals, which CI prints as its closing line.
 */
export function summaryLines(tiers: readonly TierReport[], startedAt?: number): string[] {
  const sorted = [...tiers].sort((a, b) => a.startedAt - b.startedAt);
  const rows = sorted.map((t) => [
    t.tier,
    `${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`,
    `${t.files} files`,
    `tests ${formatDuration(t.endedAt - t.startedAt)}`,
    startedAt === undefined
      ? ""
      : `ran ${formatDuration(t.startedAt - startedAt)} to ${formatDuration(t.endedAt - startedAt)}`,
  ]);
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((r) => r[c]!.length))) ?? [];
  const lines = rows.map((r) =>
    r
      .map((cell, c) => cell.padEnd(widths[c]!))
      .join("  ")
      .trimEnd(),
  );
  const sum = (f: (t: TierReport) => number): number => tiers.reduce((n, t) => n + f(t), 0);
  const last = tiers.length === 0 ? undefined : Math.max(...tiers.map((t) => t.endedAt));
  if (startedAt !== undefined && last !== undefined)
    lines.push(`all tiers: ${formatDuration(last - startedAt)}`);
  lines.push(
    `${sum((t) => t.passed)} passed, ${sum((t) => t.failed)} failed, ${sum((t) => t.skipped)} skipped`,
  );
  return lines;
}

/** Reads every tier report in `dir` (and the run's start stamp, if `make test` wrote one). */
export function readTierReports(dir: string): { tiers: TierReport[]; startedAt?: number } {
  if (!existsSync(dir)) return { tiers: [] };
  const tiers = readdirSync(dir)
    // Only the JSON reports: failing fuzz runs leave their logs beside them.
    .filter((f) => f.endsWith(".json"))
    .map((f) => {
      const path = join(dir, f);
      const json = JSON.parse(readFileSync(path, "utf8")) as VitestJson;
      return tierReport(f.replace(/\.json$/, ""), json, statSync(path).mtimeMs);
    });
  const stamp = join(dir, "started-at");
  const startedAt = existsSync(stamp) ? Number(readFileSync(stamp, "utf8").trim()) : undefined;
  return { tiers, ...(startedAt !== undefined && Number.isFinite(startedAt) ? { startedAt } : {}) };
}
