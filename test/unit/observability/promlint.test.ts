// Prometheus' own linter (promlint, tools/promlint) on every metric of the plugin and the operator, each
// with a sample, next to the process metrics both serve: dpo's own metrics have no problem at all.
import { beforeAll, describe, expect, it } from "vitest";
import { collectProcessMetrics, Counter, Gauge, Histogram } from "../../../src/observability/metrics.js";
import { OperatorMetrics } from "../../../src/operator/metrics.js";
import { DeviceSeriesGauge, PluginMetrics } from "../../../src/plugin-runtime/metrics.js";
import {
  buildPromlint,
  PROM_CLIENT_DEFAULT_PROBLEMS,
  promlint,
  type PromlintProblem,
} from "../../../tools/promlint/harness.js";

let binary: string;
beforeAll(async () => {
  binary = await buildPromlint();
}, 600_000);

/**
 * Gives every metric of a component one series, whatever its labels (so a metric added later is linted
 * without touching this test), and returns how many it found.
 */
function sampleEvery(component: object): number {
  let count = 0;
  for (const metric of Object.values(component)) {
    if (metric instanceof DeviceSeriesGauge) {
      count++;
      const row = {
        device: "x",
        namespace: "x",
        pod: "x",
        container: "x",
        allocated: 1,
        healthy: 1,
      } as const;
      metric.set("x", [row]);
      continue;
    }
    if (!(metric instanceof Counter || metric instanceof Gauge || metric instanceof Histogram)) continue;
    count++;
    const names = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
    const labels = Object.fromEntries(names.map((n) => [n, "x"]));
    if (metric instanceof Counter) metric.inc(labels);
    else if (metric instanceof Gauge) metric.set(labels, 1);
    else metric.observe(labels, 0.01);
  }
  return count;
}

const byName = (a: PromlintProblem, b: PromlintProblem): number =>
  `${a.metric} ${a.text}` < `${b.metric} ${b.text}` ? -1 : 1;

describe("promlint on dpo's metrics", () => {
  it.each([
    { component: "plugin", make: () => new PluginMetrics(), metrics: 17 },
    { component: "operator", make: () => new OperatorMetrics(), metrics: 29 },
  ])("$component: no problem in any dpo metric, only prom-client's known ones", async ({ make, metrics }) => {
    const m = make();
    expect(sampleEvery(m)).toBe(metrics);
    await collectProcessMetrics(m.registry);
    const result = await promlint(binary, "registry", await m.render());
    expect(result.error).toBeUndefined();
    expect(result.families).toBeGreaterThan(metrics);
    expect(result.problems.filter((p) => p.metric.startsWith("dpo_"))).toEqual([]);
    expect([...result.problems].sort(byName)).toEqual([...PROM_CLIENT_DEFAULT_PROBLEMS].sort(byName));
  });

  it("finds what it should (the harness is live, not silent)", async () => {
    const bad = [
      "# HELP dpo_things_total Things.",
      "# TYPE dpo_things_total gauge",
      "dpo_things_total 1",
      "# HELP dpo_requests Requests.",
      "# TYPE dpo_requests counter",
      'dpo_requests{podName="a"} 1',
      "# TYPE dpo_latency_milliseconds gauge",
      "dpo_latency_milliseconds 3",
      "",
    ].join("\n");
    const result = await promlint(binary, "bad", bad);
    expect(result.families).toBe(3);
    expect(result.problems.map((p) => `${p.metric}: ${p.text}`).sort()).toEqual([
      "dpo_latency_milliseconds: no help text",
      'dpo_latency_milliseconds: use base unit "seconds" instead of "milliseconds"',
      'dpo_requests: counter metrics should have "_total" suffix',
      "dpo_requests: label names should be written in 'snake_case' not 'camelCase'",
      'dpo_things_total: non-counter metrics should not have "_total" suffix',
    ]);
    expect((await promlint(binary, "garbage", "dpo_x{ 1\n")).error).toMatch(/parsing the exposition/);
  });
});
