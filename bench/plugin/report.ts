// bench-plugin's table: one row a figure, dpo's beside the Go sample plugin's, with the targets.
import { readFileSync } from "node:fs";
import { formatRatio } from "../../tools/stats.js";
import type { Rss } from "../proc.js";
import type { Miss } from "../targets.js";
import { DEVICES, GO_DEVICES, GO_RESOURCE, NODE_FLAGS, REPLICAS } from "./knobs.js";

export function formatRss(rss: Rss): string {
  return `${rss.total.toFixed(1)} MiB (anonymous ${rss.anonymous.toFixed(1)}, file-backed ${rss.file.toFixed(1)})`;
}

export function rssRatio(a: Rss, b: Rss): string {
  return `${formatRatio(a.total, b.total)} (anonymous ${formatRatio(a.anonymous, b.anonymous)})`;
}

/** One row of the table: dpo's figure, the Go sample plugin's where it has one, and their ratio. */
export interface Result {
  metric: string;
  value: string;
  go?: string;
  ratio?: string;
  target: string;
  /** Targets missed, by name; empty when every target holds. */
  missed: string[];
}

/** The targets `results` missed, each with the row's figure; none when every row held its own. */
export function judgePlugin(results: readonly Result[]): Miss[] {
  return results.flatMap((r) => r.missed.map((target) => ({ metric: r.metric, target, measured: r.value })));
}

/** The table, after a line that says what ran, and a line with Node, its flags, the time and the load. */
export function printReport(results: readonly Result[]): void {
  console.log(
    `\nbench-plugin: ${DEVICES} mock devices x ${REPLICAS} replicas (${DEVICES * REPLICAS} advertised); ` +
      `Go: the upstream sample device plugin (${GO_RESOURCE}, ${GO_DEVICES} devices)\n`,
  );
  console.log("| metric | dpo | Go sample plugin | dpo / Go | target | |");
  console.log("|---|---|---|---|---|---|");
  for (const r of results) {
    const status = r.missed.length === 0 ? "ok" : `MISSED (${r.missed.join(", ")})`;
    console.log(
      `| ${r.metric} | ${r.value} | ${r.go ?? "—"} | ${r.ratio ?? "—"} | ${r.target} | ${status} |`,
    );
  }
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(
    `\nnode ${process.version} ${NODE_FLAGS.join(" ")}, ${new Date().toISOString()}, load average ${load}`,
  );
}
