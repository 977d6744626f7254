// The Grafana dashboard (charts/dpo/dashboards/dpo.json) as a user reads it: the colour Grafana paints a
// stat with, from its thresholds as Grafana applies them (a panel without any gets Grafana's defaults,
// green below 80 and red from 80), and a node variable that every plugin panel filters by.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const DASHBOARD = join(repoRoot, "charts/dpo/dashboards/dpo.json");

interface ThresholdStep {
  color: string;
  value: number | null;
}
interface Panel {
  id: number;
  title: string;
  type: string;
  targets?: { expr: string }[];
  panels?: Panel[];
  fieldConfig?: { defaults?: { thresholds?: { mode?: string; steps: ThresholdStep[] } } };
}
interface Variable {
  name: string;
  type: string;
  definition?: string;
  query?: { query?: string } | string;
  includeAll?: boolean;
  multi?: boolean;
  allValue?: string;
}
interface Dashboard {
  panels: Panel[];
  templating: { list: Variable[] };
}

function load(text = readFileSync(DASHBOARD, "utf8")): Dashboard {
  return JSON.parse(text) as Dashboard;
}

/** Grafana's thresholds when a panel sets none (the field config's defaults). */
const GRAFANA_DEFAULT_STEPS: ThresholdStep[] = [
  { color: "green", value: null },
  { color: "red", value: 80 },
];

/** The colour Grafana gives `value` on `panel`: that of the last step at or below it (absolute mode). */
function colourOf(panel: Panel, value: number): string {
  const thresholds = panel.fieldConfig?.defaults?.thresholds;
  expect(thresholds?.mode ?? "absolute", panel.title).toBe("absolute");
  const steps = thresholds?.steps ?? GRAFANA_DEFAULT_STEPS;
  let colour = steps[0]?.color ?? "";
  for (const step of steps) if (step.value === null || value >= step.value) colour = step.color;
  return colour;
}

function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

function panelQuerying(dashboard: Dashboard, metric: string, type: string): Panel {
  const found = allPanels(dashboard.panels).filter(
    (p) => p.type === type && (p.targets ?? []).some((t) => t.expr.includes(metric)),
  );
  expect(
    found.map((p) => p.title),
    `one ${type} panel of ${metric}`,
  ).toHaveLength(1);
  return found[0]!;
}

/** The problems a user would see in these two respects; empty for a good dashboard. */
function problems(dashboard: Dashboard): string[] {
  const out: string[] = [];
  const ready = panelQuerying(dashboard, "dpo_config_ready", "stat");
  for (const [value, want] of [
    [0, "red"],
    [1, "green"],
  ] as const) {
    const got = colourOf(ready, value);
    if (got !== want) out.push(`Ready=${value} shows ${got}, not ${want}`);
  }
  const certificate = panelQuerying(dashboard, "dpo_webhook_certificate_expiry_timestamp_seconds", "stat");
  for (const [days, want] of [
    [365, "green"],
    [90, "green"],
    [20, "yellow"],
    [3, "red"],
    [-1, "red"],
  ] as const) {
    const got = colourOf(certificate, days);
    if (got !== want) out.push(`${days} days of certificate left show ${got}, not ${want}`);
  }

  const node = dashboard.templating.list.find((v) => v.name === "node");
  if (node === undefined) {
    out.push("no node variable");
  } else {
    const query = typeof node.query === "string" ? node.query : node.query?.query;
    if (!/^label_values\(dpo_plugin_\w+\{[^}]*\}, node\)$/.test(query ?? "")) {
      out.push(`the node variable's query is ${query}, not the node label of a plugin series`);
    }
    if (node.definition !== query) out.push("the node variable's definition is not its query");
    if (!(node.includeAll && node.multi && node.allValue === ".*")) {
      out.push("the node variable cannot select all nodes, or several");
    }
  }
  for (const panel of allPanels(dashboard.panels)) {
    for (const target of panel.targets ?? []) {
      for (const selector of target.expr.matchAll(/dpo_plugin_\w+(\{[^}]*\})?/g)) {
        if (!(selector[1] ?? "").includes('node=~"$node"')) {
          out.push(`panel "${panel.title}": ${selector[0]} is not filtered by $node`);
        }
      }
    }
  }
  return out;
}

describe("the Grafana dashboard", () => {
  it("shows Ready=0 red and Ready=1 green, long certificate validity green and a week or less red, and filters every plugin panel by a node variable", () => {
    expect(problems(load())).toEqual([]);
  });

  it("tells the dashboard before its thresholds and node variable apart (the checks are live)", () => {
    const dashboard = load();
    const old = allPanels(dashboard.panels);
    for (const panel of old) delete panel.fieldConfig?.defaults?.thresholds;
    dashboard.templating.list = dashboard.templating.list.filter((v) => v.name !== "node");
    for (const panel of old) {
      for (const target of panel.targets ?? []) target.expr = target.expr.replaceAll(', node=~"$node"', "");
    }
    expect(problems(dashboard)).toEqual(
      expect.arrayContaining([
        "Ready=0 shows green, not red",
        "365 days of certificate left show red, not green",
        "no node variable",
        'panel "Unhealthy devices by node": dpo_plugin_devices{health="Unhealthy", config=~"$config"} is not filtered by $node',
      ]),
    );
  });
});
