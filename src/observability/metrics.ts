// Prometheus metrics on prom-client: one private registry per component, the process's default metrics.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry };

/**
 * Adds the process's default metrics (process_*, nodejs_*: CPU, RSS, heap, GC, event-loop lag) to
 * `registry`. They describe the whole process and start observers that run for its lifetime, so the
 * process entry point calls this once, for the one registry it serves; components and tests do not.
 */
export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
}

type Labels = Readonly<Record<string, string>>;

/**
 * The current value of the series of a counter or gauge whose labels are exactly `labels` (0 when it has
 * none yet), for tests and status that read a metric back.
 */
export async function metricValue(
  metric: Counter<string> | Gauge<string>,
  labels: Labels = {},
): Promise<number> {
  const wanted = Object.entries(labels);
  const { values } = await metric.get();
  const series = values.find(
    (v) =>
      Object.keys(v.labels).length === wanted.length &&
      wanted.every(([k, value]) => String(v.labels[k]) === value),
  );
  return series?.value ?? 0;
}
