// The chart's values for its monitoring objects (tools/manifests/chart-monitoring.ts) against config/, their
// one source: values.yaml's defaults are config/'s `for:`, thresholds and runbook URLs, and values.schema.json
// takes each alert's values and no other. test/integration/helm-values.test.ts renders them with helm, and
// test/integration/helm-chart.test.ts compares the defaults' rendering with kustomize's.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseDocument } from "yaml";
import { CHART_GENERATED_TEMPLATE_DIR } from "../../tools/manifests/chart.js";
import {
  ALERT_THRESHOLDS,
  DEFAULT_RUNBOOK_BASE_URL,
  markPrometheusRule,
} from "../../tools/manifests/chart-monitoring.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const read = (path: string): string => readFileSync(join(repoRoot, path), "utf8");

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  annotations: { runbook_url: string };
}
const source = parse(read("config/components/prometheus-rules/prometheus-rule.yaml")) as {
  spec: { groups: { rules: Rule[] }[] };
};
const rules = new Map(source.spec.groups.flatMap((g) => g.rules).map((r) => [r.alert, r]));

const values = parse(read("charts/dpo/values.yaml")) as {
  metrics: {
    prometheusRule: {
      runbookBaseUrl: string;
      additionalRuleLabels: Record<string, string>;
      alerts: Record<string, Record<string, unknown>>;
    };
  };
};
const ruleValues = values.metrics.prometheusRule;

interface Schema {
  $ref?: string;
  properties?: Record<string, Schema>;
}
const schema = JSON.parse(read("charts/dpo/values.schema.json")) as Schema & {
  definitions: Record<string, Schema>;
};
const resolveRef = (s: Schema): Schema =>
  s.$ref ? (schema.definitions[s.$ref.replace("#/definitions/", "")] ?? {}) : s;

describe("metrics.prometheusRule's defaults", () => {
  it("have an entry for every alert of config/, on, with its for: (none where it has none)", () => {
    expect(Object.keys(ruleValues.alerts).sort()).toEqual([...rules.keys()].sort());
    for (const [name, rule] of rules) {
      expect(ruleValues.alerts[name]?.enabled, name).toBe(true);
      expect(ruleValues.alerts[name]?.for, name).toBe(rule.for);
    }
  });

  it("are the thresholds config/'s expressions have, each found once there", () => {
    for (const [name, thresholds] of Object.entries(ALERT_THRESHOLDS)) {
      const rule = rules.get(name);
      expect(rule, `${name} in ALERT_THRESHOLDS is no alert of config/`).toBeDefined();
      for (const t of thresholds) {
        const value = ruleValues.alerts[name]?.[t.value];
        expect(value, `${name}.${t.value}`).toBeDefined();
        expect(t.template.replace("%s", String(value)), `${name}.${t.value}`).toBe(t.literal);
        expect(rule?.expr.split(t.literal).length, `${name}: "${t.literal}" once`).toBe(2);
      }
    }
    // No value of an alert but enabled, for: and its thresholds.
    for (const [name, entry] of Object.entries(ruleValues.alerts)) {
      const known = ["enabled", "for", ...(ALERT_THRESHOLDS[name] ?? []).map((t) => t.value)];
      expect(
        Object.keys(entry).filter((key) => !known.includes(key)),
        name,
      ).toEqual([]);
    }
  });

  it("point runbook_url where config/ does, and add no labels", () => {
    expect(ruleValues.runbookBaseUrl).toBe(DEFAULT_RUNBOOK_BASE_URL);
    for (const [name, rule] of rules) {
      expect(rule.annotations.runbook_url).toBe(`${ruleValues.runbookBaseUrl}/${name}.md`);
    }
    expect(ruleValues.additionalRuleLabels).toEqual({});
  });

  it("are what values.schema.json takes: each alert's values and no other", () => {
    const metrics = schema.properties?.metrics?.properties ?? {};
    const alerts = metrics.prometheusRule?.properties?.alerts?.properties ?? {};
    expect(Object.keys(alerts).sort()).toEqual([...rules.keys()].sort());
    for (const [name, entry] of Object.entries(ruleValues.alerts)) {
      expect(Object.keys(resolveRef(alerts[name] ?? {}).properties ?? {}).sort(), name).toEqual(
        Object.keys(entry).sort(),
      );
    }
  });
});

describe("the generated PrometheusRule template", () => {
  const template = read(`${CHART_GENERATED_TEMPLATE_DIR}/components-prometheus-rules.yaml`);

  it("wraps each alert in its toggle and takes its for:, thresholds and runbook URL from values", () => {
    for (const [name, rule] of rules) {
      const values = `$.Values.metrics.prometheusRule.alerts.${name}`;
      expect(template, name).toContain(`{{- if ${values}.enabled }}\n        - alert: ${name}\n`);
      if (rule.for !== undefined) expect(template, name).toContain(`for: {{ ${values}.for | quote }}`);
      for (const t of ALERT_THRESHOLDS[name] ?? [])
        expect(template, name).toContain(`{{ ${values}.${t.value} }}`);
      expect(template, name).toContain(`{{ printf "%s/${name}.md" (trimSuffix "/" `);
    }
    // No duration of config/ is left in a for: of the chart.
    expect(template).not.toMatch(/^ *for: \d/m);
  });

  it("cannot be generated from a rule that lost a threshold or moved its runbook, naming the alert", () => {
    const withExpr = (expr: string, runbook: string) =>
      parseDocument(`apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
spec:
  groups:
    - name: g
      rules:
        - alert: DpoDevicesUnhealthy
          expr: ${expr}
          annotations:
            runbook_url: ${runbook}
`);
    const good = `${DEFAULT_RUNBOOK_BASE_URL}/DpoDevicesUnhealthy.md`;
    expect(() =>
      markPrometheusRule(withExpr("max by (config) (dpo_config_devices_unhealthy) > 0", good)),
    ).not.toThrow();
    expect(() =>
      markPrometheusRule(withExpr("max by (config) (dpo_config_devices_unhealthy) > 1", good)),
    ).toThrow(
      /DpoDevicesUnhealthy: the expression has 0 copies of "\(dpo_config_devices_unhealthy\) > 0".*threshold/,
    );
    expect(() =>
      markPrometheusRule(
        withExpr(
          "max by (config) (dpo_config_devices_unhealthy) > 0",
          "https://example.com/DpoDevicesUnhealthy.md",
        ),
      ),
    ).toThrow(/DpoDevicesUnhealthy: runbook_url https:\/\/example.com\/DpoDevicesUnhealthy.md is not/);
  });
});
