// Every PromQL expression of the Grafana dashboard (charts/dpo/dashboards/dpo.json) and of the alerting
// rules (config/components/prometheus-rules) parses (promtool) and names only metrics the operator and the
// plugin register: the registries themselves are asked, not a list kept here.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import {
  collectProcessMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
} from "../../../src/observability/metrics.js";
import { OperatorMetrics } from "../../../src/operator/metrics.js";
import { PluginMetrics } from "../../../src/plugin-runtime/metrics.js";
import { buildPromtool, promtool } from "../../../tools/promtool/harness.js";

const repoRoot = resolve(import.meta.dirname, "..", "..", "..");
const DASHBOARD = join(repoRoot, "charts/dpo/dashboards/dpo.json");
const RULES = join(repoRoot, "config/components/prometheus-rules/prometheus-rule.yaml");

const KEYWORDS = new Set([
  "and",
  "or",
  "unless",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "offset",
  "inf",
  "nan",
]);

/**
 * The metric names a PromQL expression selects. A lexer, not a full parser (promtool checks the syntax
 * below): strings, label matchers, ranges, grouping label lists and function names are not metric names.
 */
function metricNamesOf(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ");
  const names = new Set<string>();
  for (const m of stripped.matchAll(/(?<![\w$.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name = "", call] = m;
    if (call !== undefined || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names].sort();
}

/** Grafana's variables replaced by values Prometheus accepts, so promtool can parse the query. */
function withoutGrafanaVariables(expr: string): string {
  return expr.replaceAll("$__rate_interval", "5m").replaceAll("$__interval", "1m").replace(/\$\w+/g, ".*");
}

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}
const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
  panels: Panel[];
  templating: { list: { name: string; definition?: string }[] };
};

function dashboardQueries(): { source: string; expr: string }[] {
  const queries: { source: string; expr: string }[] = [];
  const visit = (panels: Panel[]): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) queries.push({ source: `dashboard panel "${p.title}"`, expr: t.expr });
      visit(p.panels ?? []);
    }
  };
  visit(dashboard.panels);
  for (const v of dashboard.templating.list) {
    // label_values(<selector>, <label>): the selector is a PromQL series selector.
    const selector = /^label_values\((.*),\s*\w+\)$/.exec(v.definition ?? "")?.[1];
    if (selector !== undefined) queries.push({ source: `dashboard variable ${v.name}`, expr: selector });
  }
  return queries;
}

function ruleQueries(): { source: string; expr: string }[] {
  const rule = parse(readFileSync(RULES, "utf8")) as {
    spec: { groups: { rules: { alert?: string; record?: string; expr: string }[] }[] };
  };
  return rule.spec.groups.flatMap((g) =>
    g.rules.map((r) => ({ source: `rule ${r.alert ?? r.record}`, expr: r.expr })),
  );
}

/** Every series name the operator's and the plugin's registries can serve, process metrics included. */
async function registeredNames(): Promise<Set<string>> {
  const names = new Set<string>();
  const registries: Registry[] = [];
  for (const component of [new OperatorMetrics(), new PluginMetrics()]) {
    registries.push(component.registry);
    for (const metric of Object.values(component)) {
      if (!(metric instanceof Counter || metric instanceof Gauge || metric instanceof Histogram)) continue;
      const labelNames = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
      const labels = Object.fromEntries(labelNames.map((n) => [n, "x"]));
      if (metric instanceof Histogram) metric.observe(labels, 1);
      else if (metric instanceof Counter) metric.inc(labels);
      else metric.set(labels, 1);
    }
  }
  const processRegistry = new Registry();
  await collectProcessMetrics(processRegistry);
  registries.push(processRegistry);
  for (const registry of registries) {
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      if (String(metric.type) === "histogram")
        for (const s of ["_bucket", "_sum", "_count"]) names.add(metric.name + s);
    }
  }
  return names;
}

describe("metricNamesOf", () => {
  it.each([
    { expr: "dpo_config_ready", want: ["dpo_config_ready"] },
    { expr: 'max by (config) (dpo_config_ready{config=~"$config"}) > 0', want: ["dpo_config_ready"] },
    {
      expr: "histogram_quantile(0.99, sum by (le) (rate(dpo_plugin_allocate_duration_seconds_bucket[5m])))",
      want: ["dpo_plugin_allocate_duration_seconds_bucket"],
    },
    {
      expr: 'a_total unless on (config) changes(b[30m]) > 0 or c{x="and or"} - time() < 7 * 86400',
      want: ["a_total", "b", "c"],
    },
    { expr: "count by (config) (up{job='x'} == bool 0) offset 5m", want: ["up"] },
    { expr: "sum without (instance, pod) (rate(x:y:rate5m[$__rate_interval]))", want: ["x:y:rate5m"] },
  ])("$expr", ({ expr, want }) => {
    expect(metricNamesOf(expr)).toEqual(want);
  });
});

describe("PromQL of the dashboard and the rules", () => {
  const queries = [...dashboardQueries(), ...ruleQueries()];

  it("finds the dashboard's and the rules' queries", () => {
    expect(queries.filter((q) => q.source.startsWith("dashboard panel")).length).toBeGreaterThan(15);
    expect(queries.filter((q) => q.source.startsWith("rule ")).length).toBe(12);
  });

  it("name only metrics the operator or the plugin registers", async () => {
    const registered = await registeredNames();
    expect(registered.has("dpo_config_ready")).toBe(true);
    expect(registered.has("dpo_plugin_allocate_duration_seconds_bucket")).toBe(true);
    const unknown = queries.flatMap((q) =>
      metricNamesOf(q.expr)
        .filter((name) => !registered.has(name))
        .map((name) => `${q.source}: ${name}`),
    );
    expect(unknown).toEqual([]);
    // Every query names some metric: an expression the lexer reads as none is a lexer bug.
    expect(queries.filter((q) => metricNamesOf(q.expr).length === 0).map((q) => q.source)).toEqual([]);
  });

  describe("with promtool", () => {
    let binary = "";
    let dir = "";
    beforeAll(async () => {
      binary = await buildPromtool();
      dir = await mkdtemp(join(tmpdir(), "dpo-promql-"));
    }, 1_800_000);
    afterAll(async () => {
      if (dir !== "") await rm(dir, { recursive: true, force: true });
    });

    it("parse, each as a recording rule checked by promtool", async () => {
      const rules = {
        groups: [
          {
            name: "dashboard-and-rules",
            rules: queries.map((q, i) => ({
              record: `dpo:query_${i}`,
              expr: withoutGrafanaVariables(q.expr),
            })),
          },
        ],
      };
      await writeFile(join(dir, "queries.yaml"), stringify(rules));
      const result = await promtool(binary, ["check", "rules", "queries.yaml"], dir);
      expect(result.code, result.output).toBe(0);
      expect(result.output).toContain(`SUCCESS: ${queries.length} rules found`);
    });
  });
});
