// The operator's own figures: its /metrics scraped and summed, and where its RSS is.
import { readFileSync } from "node:fs";

/**
 * Where the operator's RSS is: its V8 heap as its /metrics show it (used and total), and from the kernel
 * (/proc/<pid>/smaps_rollup) the anonymous memory against the file-backed pages (the node binary, ICU).
 */
export async function heapFigures(port: number, pid: number): Promise<string> {
  const text = await scrapeMetrics(port);
  const mib = (name: string): string => (sumOfSeries(seriesIn(text, name)) / 2 ** 20).toFixed(1);
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)?.[1] ?? NaN);
  const anonymous = kib("Anonymous") / 1024;
  return (
    `heap ${mib("nodejs_heap_size_used_bytes")} MiB used of ${mib("nodejs_heap_size_total_bytes")} MiB, ` +
    `external ${mib("nodejs_external_memory_bytes")} MiB; anonymous ${anonymous.toFixed(1)} MiB, ` +
    `file-backed ${(kib("Rss") / 1024 - anonymous).toFixed(1)} MiB`
  );
}

/** The series of a counter whose value changed between two scrapes, as `labels +delta`. */
export function seriesDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after]
    .map(([labels, value]) => [labels, value - (before.get(labels) ?? 0)] as const)
    .filter(([, delta]) => delta > 0)
    .map(([labels, delta]) => `${labels} +${delta}`)
    .join(", ");
}

/** The operator's /metrics, as text. */
async function scrapeMetrics(port: number): Promise<string> {
  const { get } = await import("node:http");
  return new Promise<string>((resolve, reject) =>
    get(`http://127.0.0.1:${port}/metrics`, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve(body));
    }).on("error", reject),
  );
}

/** Every series of `name` in a /metrics text, by its label set. */
function seriesIn(text: string, name: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      const space = line.lastIndexOf(" ");
      series.set(line.slice(name.length, space) || "{}", Number(line.slice(space + 1)));
    }
  }
  return series;
}

/** The sum of a metric's series. */
export function sumOfSeries(series: Map<string, number>): number {
  let sum = 0;
  for (const value of series.values()) sum += value;
  return sum;
}

/** Every series of `name` on the operator's /metrics, by its label set. */
export async function metricSeries(port: number, name: string): Promise<Map<string, number>> {
  return seriesIn(await scrapeMetrics(port), name);
}

/** The sum of every series of `name` on the operator's /metrics. */
export async function metric(port: number, name: string): Promise<number> {
  return sumOfSeries(await metricSeries(port, name));
}
