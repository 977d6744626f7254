// Prometheus metrics on prom-client: one private registry per component, the process's default metrics.
//
// The classes come from prom-client's own files, not its index: the index also loads the cluster
// aggregator (node:cluster, child_process, dgram), the Pushgateway, Summary's t-digest and the default
// metrics (node:v8, perf_hooks, @opentelemetry/api), 56 ms and 1.5 MiB of heap on every plugin start for
// code the plugin never runs before it serves the kubelet. The unit test of this module checks that these
// are the very classes the index exports, so a prom-client that moves its files fails there.
import type * as promClient from "prom-client";
import CounterClass from "prom-client/lib/counter.js";
import GaugeClass from "prom-client/lib/gauge.js";
import HistogramClass from "prom-client/lib/histogram.js";
import RegistryClass from "prom-client/lib/registry.js";

export const Counter = CounterClass;
export type Counter<T extends string = string> = promClient.Counter<T>;
export const Gauge = GaugeClass;
export type Gauge<T extends string = string> = promClient.Gauge<T>;
export const Histogram = HistogramClass;
export type Histogram<T extends string = string> = promClient.Histogram<T>;
export const Registry = RegistryClass;
export type Registry = promClient.Registry;

/**
 * Adds the process's default metrics (process_*, nodejs_*: CPU, RSS, heap, GC, event-loop lag) to
 * `registry`. They describe the whole process and start observers that run for its lifetime, so the
 * process entry point calls this once, for the one registry it serves; components and tests do not.
 * Loaded on first use, so a process that serves no metrics never loads their collectors.
 */
export async function collectProcessMetrics(registry: Registry): Promise<void> {
  const { default: collectDefaultMetrics } = await import("prom-client/lib/defaultMetrics.js");
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
