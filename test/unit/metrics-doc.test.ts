// docs/metrics.md lists every dpo_ metric the operator and the plugin register, with its type and label
// names, and no metric that neither registers: read from the two registries, so a new metric without a row
// (or a row left behind by a removed one) fails here.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { Registry } from "../../src/observability/metrics.js";
import { OperatorMetrics } from "../../src/operator/metrics.js";
import { PluginMetrics } from "../../src/plugin-runtime/metrics.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");

interface Row {
  type: string;
  labels: string[];
}

/** The rows of the metrics table: name → type and label names, as the doc writes them. */
function documented(markdown: string): Map<string, Row> {
  const rows = new Map<string, Row>();
  for (const match of markdown.matchAll(/^\| `(dpo_\w+)`\s*\|\s*(\w+)\s*\|([^|]*)\|/gm)) {
    const labels = [...(match[3] ?? "").matchAll(/`(\w+)`/g)].map((m) => m[1] ?? "").sort();
    rows.set(match[1] ?? "", { type: match[2] ?? "", labels });
  }
  return rows;
}

/** The dpo_ metrics of a registry, with type and label names (histogram buckets' `le` aside). */
function registered(registry: Registry): Map<string, Row> {
  const rows = new Map<string, Row>();
  for (const metric of registry.getMetricsAsArray()) {
    const { name, type, labelNames } = metric as unknown as {
      name: string;
      type: string;
      labelNames: string[];
    };
    if (name.startsWith("dpo_")) rows.set(name, { type, labels: [...labelNames].sort() });
  }
  return rows;
}

describe("docs/metrics.md", () => {
  const doc = documented(readFileSync(join(repoRoot, "docs/metrics.md"), "utf8"));

  it("has a row for every metric the operator and the plugin register, with its type and labels", () => {
    const all = new Map([
      ...registered(new OperatorMetrics().registry),
      ...registered(new PluginMetrics().registry),
    ]);
    expect(all.size).toBeGreaterThan(30);
    expect(Object.fromEntries(doc)).toEqual(Object.fromEntries(all));
  });
});
