// make test's closing summary: each tier's tests and time from the vitest JSON reports, in the order they ran.
import { mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  formatDuration,
  readTierReports,
  summaryLines,
  tierReport,
} from "../../../../tools/test-report/summary.js";

const T0 = Date.parse("2026-11-29T08:00:00Z");

/** A vitest JSON report of `files` files, the last ending `ms` after it started at `start`. */
function report(start: number, ms: number, counts: { passed: number; failed?: number; files?: number }) {
  const files = counts.files ?? 2;
  return {
    numPassedTests: counts.passed,
    numFailedTests: counts.failed ?? 0,
    numPendingTests: 1,
    numTodoTests: 0,
    startTime: start,
    testResults: Array.from({ length: files }, (_, i) => ({ endTime: start + (ms * (i + 1)) / files })),
  };
}

describe("formatDuration", () => {
  it.each([
    [0, "0s"],
    [59_400, "59s"],
    [60_000, "1m00s"],
    [35 * 60_000 + 7_000, "35m07s"],
  ])("%d ms reads %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("summaryLines", () => {
  it("lists the tiers in the order they started, each with its tests, its own time and when it ran in the run", () => {
    const unit = tierReport("unit", report(T0 + 60_000, 150_000, { passed: 3000 }), T0 + 210_000);
    const cluster = tierReport("cluster", report(T0 + 400_000, 900_000, { passed: 500, failed: 2 }), 0);
    const lines = summaryLines([cluster, unit], T0);
    expect(lines[0]).toMatch(
      /^unit\s+3000 passed, 0 failed, 1 skipped\s+2 files\s+tests 2m30s\s+ran 1m00s to 3m30s$/,
    );
    // The cluster tier ended at its last file's end: 1,300 s after the start.
    expect(lines[1]).toMatch(
      /^cluster\s+500 passed, 2 failed, 1 skipped\s+2 files\s+tests 15m00s\s+ran 6m40s to 21m40s$/,
    );
    expect(lines.slice(2)).toEqual(["all tiers: 21m40s", "3500 passed, 2 failed, 2 skipped"]);
  });

  it("ends the run at the tier that ended last, not the one that started last, when lanes overlap", () => {
    const cluster = tierReport("cluster", report(T0 + 60_000, 1_200_000, { passed: 500 }), 0);
    const node = tierReport("node", report(T0 + 30_000, 600_000, { passed: 30 }), 0);
    const lines = summaryLines([cluster, node], T0);
    expect(lines.map((l) => l.split(/\s{2,}/)[0])).toEqual([
      "node",
      "cluster",
      "all tiers: 21m00s",
      "530 passed, 0 failed, 2 skipped",
    ]);
    expect(lines[0]).toMatch(/ran 30s to 10m30s$/);
  });

  it("leaves the run column and the total out without a start stamp", () => {
    const unit = tierReport("unit", report(T0, 1_000, { passed: 1 }), T0 + 1_000);
    expect(summaryLines([unit])).toEqual([
      "unit  1 passed, 0 failed, 1 skipped  2 files  tests 1s",
      "1 passed, 0 failed, 1 skipped",
    ]);
  });
});

describe("readTierReports", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("reads each JSON report with its file time and the run's start stamp, and skips the logs beside them", async () => {
    dir = await mkdtemp(join(tmpdir(), "dpo-test-report-"));
    await writeFile(join(dir, "unit.json"), JSON.stringify(report(T0, 5_000, { passed: 7 })));
    await utimes(join(dir, "unit.json"), new Date(T0 + 9_000), new Date(T0 + 9_000));
    await writeFile(join(dir, "fuzz-seed-42.log"), "a failing fuzz run's log\n");
    await writeFile(join(dir, "started-at"), `${T0 - 1_000}\n`);
    const { tiers, startedAt } = readTierReports(dir);
    expect(startedAt).toBe(T0 - 1_000);
    expect(tiers).toEqual([
      { tier: "unit", passed: 7, failed: 0, skipped: 1, files: 2, startedAt: T0, endedAt: T0 + 9_000 },
    ]);
  });

  it("reads nothing from a folder that does not exist", () => {
    expect(readTierReports(join(tmpdir(), "dpo-no-such-folder"))).toEqual({ tiers: [] });
  });
});
