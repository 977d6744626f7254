// The chart's monitoring values (the PodMonitor's scrape, the PrometheusRule's alerts, their toggles,
// thresholds, labels and runbook links, and the NOTES of an install with alerts), each rendered with
// `helm template`; the rules as rendered pass `promtool check rules`.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { KubeObject } from "../../tools/manifests/compare.js";
import { buildPromtool, promtool } from "../../tools/promtool/harness.js";
import { chartDir, find, helm, renderChart, useHelmHome } from "./helm-support.js";

useHelmHome();

const NAMESPACE = "gpu-operators";

async function render(values: string[] = []): Promise<KubeObject[]> {
  return (await renderChart(values, NAMESPACE)).objects;
}

interface Relabeling {
  sourceLabels?: string[];
  targetLabel?: string;
  action?: string;
  regex?: string;
}
type PodMonitor = KubeObject & {
  spec: {
    podMetricsEndpoints: { interval?: string; relabelings: Relabeling[]; metricRelabelings?: Relabeling[] }[];
  };
};
interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
type PrometheusRule = KubeObject & { spec: { groups: { name: string; rules: AlertRule[] }[] } };

const ALL_ALERTS = [
  "DpoCapacityMismatch",
  "DpoConfigNotReady",
  "DpoConfigStalled",
  "DpoDevicesUnhealthy",
  "DpoOperatorDown",
  "DpoOperatorNoLeader",
  "DpoPluginNotRegistered",
  "DpoReconcileErrors",
  "DpoRolloutRolledBack",
  "DpoRolloutStalled",
  "DpoStorageMigrationFailed",
  "DpoWebhookCertificateExpiring",
];

async function podMonitorEndpoint(values: string[]) {
  const monitor = find<PodMonitor>(
    await render(["metrics.podMonitor.enabled=true", ...values]),
    "PodMonitor",
    "dpo-plugin",
  );
  expect(monitor.spec.podMetricsEndpoints).toHaveLength(1);
  return monitor.spec.podMetricsEndpoints[0]!;
}

async function alertRules(values: string[]): Promise<Map<string, AlertRule>> {
  const rule = find<PrometheusRule>(
    await render(["metrics.prometheusRule.enabled=true", ...values]),
    "PrometheusRule",
    "dpo",
  );
  return new Map(rule.spec.groups.flatMap((g) => g.rules).map((r) => [r.alert, r]));
}

describe("metrics.podMonitor", () => {
  const OWN_RELABELINGS = [
    { sourceLabels: ["__meta_kubernetes_pod_label_dpo_dev_config"], targetLabel: "config" },
    { sourceLabels: ["__meta_kubernetes_pod_node_name"], targetLabel: "node" },
  ];

  it("interval, relabelings and metricRelabelings: set on the plugins' endpoint, the extra relabelings after the chart's own", async () => {
    const endpoint = await podMonitorEndpoint([
      "metrics.podMonitor.interval=15s",
      "metrics.podMonitor.relabelings[0].sourceLabels[0]=__meta_kubernetes_pod_label_team",
      "metrics.podMonitor.relabelings[0].targetLabel=team",
      "metrics.podMonitor.metricRelabelings[0].sourceLabels[0]=__name__",
      "metrics.podMonitor.metricRelabelings[0].regex=dpo_plugin_device_.*",
      "metrics.podMonitor.metricRelabelings[0].action=drop",
    ]);
    expect(endpoint.interval).toBe("15s");
    expect(endpoint.relabelings).toEqual([
      ...OWN_RELABELINGS,
      { sourceLabels: ["__meta_kubernetes_pod_label_team"], targetLabel: "team" },
    ]);
    expect(endpoint.metricRelabelings).toEqual([
      { sourceLabels: ["__name__"], regex: "dpo_plugin_device_.*", action: "drop" },
    ]);
  });

  it("by default: Prometheus' interval, the chart's relabelings only, no metricRelabelings", async () => {
    const endpoint = await podMonitorEndpoint([]);
    expect(endpoint.interval).toBeUndefined();
    expect(endpoint.relabelings).toEqual(OWN_RELABELINGS);
    expect(endpoint.metricRelabelings).toBeUndefined();
  });
});

describe("metrics.prometheusRule", () => {
  it("alerts.<alert>.enabled: every alert by default, one turned off leaves the others, a group whose alerts are all off is left out", async () => {
    expect([...(await alertRules([])).keys()].sort()).toEqual(ALL_ALERTS);
    const withoutOne = await alertRules(["metrics.prometheusRule.alerts.DpoOperatorDown.enabled=false"]);
    expect([...withoutOne.keys()].sort()).toEqual(ALL_ALERTS.filter((a) => a !== "DpoOperatorDown"));
    const rule = find<PrometheusRule>(
      await render([
        "metrics.prometheusRule.enabled=true",
        "metrics.prometheusRule.alerts.DpoConfigStalled.enabled=false",
        "metrics.prometheusRule.alerts.DpoConfigNotReady.enabled=false",
      ]),
      "PrometheusRule",
      "dpo",
    );
    expect(rule.spec.groups.map((g) => g.name)).toEqual(["dpo.devices", "dpo.rollouts", "dpo.operator"]);
    for (const group of rule.spec.groups) expect(group.rules.length, group.name).toBeGreaterThan(0);
  });

  it("alerts.<alert>.for and thresholds: in the rule, where config/'s defaults were", async () => {
    const defaults = await alertRules([]);
    const rules = await alertRules([
      "metrics.prometheusRule.alerts.DpoDevicesUnhealthy.for=30m",
      "metrics.prometheusRule.alerts.DpoDevicesUnhealthy.threshold=3",
      "metrics.prometheusRule.alerts.DpoReconcileErrors.threshold=5",
      "metrics.prometheusRule.alerts.DpoRolloutStalled.noProgressFor=2h",
      "metrics.prometheusRule.alerts.DpoWebhookCertificateExpiring.daysLeft=14",
      "metrics.prometheusRule.alerts.DpoConfigNotReady.for=1h",
    ]);
    expect(rules.get("DpoDevicesUnhealthy")?.for).toBe("30m");
    expect(rules.get("DpoConfigNotReady")?.for).toBe("1h");
    expect(rules.get("DpoCapacityMismatch")?.for).toBe(defaults.get("DpoCapacityMismatch")?.for);
    expect(rules.get("DpoDevicesUnhealthy")?.expr).toBe("max by (config) (dpo_config_devices_unhealthy) > 3");
    expect(rules.get("DpoReconcileErrors")?.expr).toBe(
      'sum by (namespace) (increase(dpo_operator_reconciles_total{result="error"}[10m])) > 5',
    );
    expect(rules.get("DpoRolloutStalled")?.expr).toContain("changes(dpo_config_nodes_updated[2h])");
    expect(rules.get("DpoWebhookCertificateExpiring")?.expr).toBe(
      "min by (namespace, pod) (dpo_webhook_certificate_expiry_timestamp_seconds) - time() < 14 * 86400",
    );
    // Prometheus takes the rules so set.
    const binary = await buildPromtool();
    const dir = await mkdtemp(join(tmpdir(), "dpo-helm-rules-"));
    try {
      await writeFile(
        join(dir, "rules.yaml"),
        stringify({ groups: [{ name: "set", rules: [...rules.values()] }] }),
      );
      const result = await promtool(binary, ["check", "rules", "rules.yaml"], dir);
      expect(result.code, result.output).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("additionalRuleLabels: on every alert beside its severity; none by default", async () => {
    for (const [name, rule] of await alertRules([]))
      expect(Object.keys(rule.labels), name).toEqual(["severity"]);
    const rules = await alertRules([
      "metrics.prometheusRule.additionalRuleLabels.team=gpu",
      "metrics.prometheusRule.additionalRuleLabels.route=pager",
    ]);
    expect(rules.size).toBe(ALL_ALERTS.length);
    for (const [name, rule] of rules) {
      expect(rule.labels, name).toEqual({
        severity: expect.stringMatching(/^(warning|critical)$/),
        team: "gpu",
        route: "pager",
      });
    }
  });

  it("runbookBaseUrl: every alert's runbook_url is <base>/<alert>.md, a trailing slash or not; docs/runbooks on GitHub by default", async () => {
    for (const [name, rule] of await alertRules([])) {
      expect(rule.annotations.runbook_url, name).toBe(
        `https://github.com/dpo-dev/dpo/blob/main/docs/runbooks/${name}.md`,
      );
    }
    for (const base of ["https://runbooks.example.com/dpo", "https://runbooks.example.com/dpo/"]) {
      for (const [name, rule] of await alertRules([`metrics.prometheusRule.runbookBaseUrl=${base}`])) {
        expect(rule.annotations.runbook_url, name).toBe(`https://runbooks.example.com/dpo/${name}.md`);
      }
    }
  });
});

describe("the NOTES of an install with alerts", () => {
  const notes = async (values: string) =>
    (
      await helm(["install", "dpo", chartDir, "--dry-run=client", "--namespace", NAMESPACE, "--set", values])
    ).stdout.split("NOTES:")[1] ?? "";

  it("say that DpoOperatorDown fires while nothing scrapes the operator, and not once the ServiceMonitor does", async () => {
    expect(await notes("metrics.prometheusRule.enabled=true")).toContain(
      "DpoOperatorDown fires: no operator replica is scraped",
    );
    expect(
      await notes("metrics.prometheusRule.enabled=true,metrics.serviceMonitor.enabled=true"),
    ).not.toContain("DpoOperatorDown");
  });
});
