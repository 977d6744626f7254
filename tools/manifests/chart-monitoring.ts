// The values the chart's monitoring objects take beyond config/'s (metrics.podMonitor.*, metrics.prometheusRule.*):
// the PodMonitor's scrape interval and extra relabelings, and for the PrometheusRule each alert's toggle,
// `for:` and thresholds, labels for every alert and the runbooks' base URL. config/ holds the defaults; the
// generator marks the places with placeholders in the document and turns them into template actions in
// its text, so values.yaml's defaults render exactly what kustomize renders.
import { isMap, isScalar, isSeq, type Document, type YAMLMap } from "yaml";

const VALUES = "$.Values.metrics";
/** The runbook URLs config/ writes, each this base and `<alert>.md`: metrics.prometheusRule.runbookBaseUrl's default. */
export const DEFAULT_RUNBOOK_BASE_URL = "https://github.com/dpo-dev/dpo/blob/main/docs/runbooks";

/**
 * A number or duration of an alert's expression that metrics.prometheusRule.alerts.<alert>.<value> sets:
 * `literal` is the text config/ has (exactly once in the expression), `template` the same text with `%s`
 * where the value goes, so `template` with the default in values.yaml is `literal` again.
 */
export interface AlertThreshold {
  value: string;
  literal: string;
  template: string;
}

export const ALERT_THRESHOLDS: Readonly<Record<string, readonly AlertThreshold[]>> = {
  DpoDevicesUnhealthy: [
    {
      value: "threshold",
      literal: "(dpo_config_devices_unhealthy) > 0",
      template: "(dpo_config_devices_unhealthy) > %s",
    },
  ],
  DpoReconcileErrors: [
    { value: "threshold", literal: '{result="error"}[10m])) > 0', template: '{result="error"}[10m])) > %s' },
  ],
  DpoRolloutStalled: [
    {
      value: "noProgressFor",
      literal: "changes(dpo_config_nodes_updated[30m])",
      template: "changes(dpo_config_nodes_updated[%s])",
    },
  ],
  DpoWebhookCertificateExpiring: [{ value: "daysLeft", literal: "< 7 * 86400", template: "< %s * 86400" }],
};

const PLACEHOLDER = "dpo-chart-generator-monitoring";
const placeholder = (what: string): string => `${PLACEHOLDER}-${what}`;

/** The Go template action printing a value, for the text of the generated template. */
const action = (path: string, pipe = ""): string => `{{ ${VALUES}.${path}${pipe} }}`;

/** Replaces every line `<indent>key: ""` with `replacement(indent)`; throws when there is none. */
function replaceKeyLines(text: string, key: string, replacement: (indent: string) => string[]): string {
  const line = new RegExp(`^( *)${key}: ""$`, "gm");
  if (!line.test(text)) throw new Error(`no ${key} placeholder in the generated template`);
  return text.replace(line, (_match, indent: string) => replacement(indent).join("\n"));
}

/** Replaces every list item line `<indent>- key` with `replacement(indent)`. */
function replaceItemLines(text: string, key: string, replacement: (indent: string) => string[]): string {
  return text.replace(new RegExp(`^( *)- ${key}$`, "gm"), (_match, indent: string) =>
    replacement(indent).join("\n"),
  );
}

// ---- PodMonitor ----

/** Marks each scrape endpoint of a PodMonitor for metrics.podMonitor.interval, relabelings and metricRelabelings. */
export function markPodMonitor(doc: Document): void {
  if (doc.get("kind") !== "PodMonitor") return;
  const endpoints = doc.getIn(["spec", "podMetricsEndpoints"], true);
  if (!isSeq(endpoints)) return;
  for (const endpoint of endpoints.items) {
    if (!isMap(endpoint)) continue;
    endpoint.set(placeholder("interval"), "");
    let relabelings = endpoint.get("relabelings", true);
    if (!isSeq(relabelings)) {
      endpoint.set("relabelings", doc.createNode([]));
      relabelings = endpoint.get("relabelings", true);
    }
    if (isSeq(relabelings)) {
      relabelings.flow = false;
      relabelings.items.push(doc.createNode(placeholder("relabelings")));
    }
    endpoint.set(placeholder("metric-relabelings"), "");
  }
}

/** The template actions of markPodMonitor's placeholders. */
export function podMonitorActions(text: string): string {
  if (!text.includes(placeholder("interval"))) return text;
  let out = replaceKeyLines(text, placeholder("interval"), (indent) => [
    `${indent}{{- with ${VALUES}.podMonitor.interval }}`,
    `${indent}interval: {{ . }}`,
    `${indent}{{- end }}`,
  ]);
  // After the chart's own relabelings (the config and node labels the alerts join on), never instead.
  out = replaceItemLines(out, placeholder("relabelings"), (indent) => [
    `${indent}{{- with ${VALUES}.podMonitor.relabelings }}`,
    `${indent}{{- toYaml . | nindent ${indent.length} }}`,
    `${indent}{{- end }}`,
  ]);
  return replaceKeyLines(out, placeholder("metric-relabelings"), (indent) => [
    `${indent}{{- with ${VALUES}.podMonitor.metricRelabelings }}`,
    `${indent}metricRelabelings:`,
    `${indent}  {{- toYaml . | nindent ${indent.length + 2} }}`,
    `${indent}{{- end }}`,
  ]);
}

// ---- PrometheusRule ----

const alertValue = (alert: string, value: string): string => `prometheusRule.alerts.${alert}.${value}`;

/** The alerts of a PrometheusRule document, by group. */
function ruleGroups(doc: Document): { name: string; alerts: { name: string; rule: YAMLMap }[] }[] {
  const groups = doc.getIn(["spec", "groups"], true);
  if (!isSeq(groups)) return [];
  return groups.items.filter(isMap).map((group) => {
    const rules = group.get("rules", true);
    const alerts = (isSeq(rules) ? rules.items : []).filter(isMap).flatMap((rule) => {
      const name = rule.get("alert");
      return typeof name === "string" ? [{ name, rule }] : [];
    });
    return { name: String(group.get("name")), alerts };
  });
}

/**
 * Marks each alert of a PrometheusRule for its values: its `for:`, the thresholds of ALERT_THRESHOLDS in its
 * expression, the extra rule labels beside its own, and its runbook URL. The toggles wrap whole items,
 * which prometheusRuleActions finds by the alert's name.
 */
export function markPrometheusRule(doc: Document): void {
  if (doc.get("kind") !== "PrometheusRule") return;
  for (const { alerts } of ruleGroups(doc)) {
    for (const { name, rule } of alerts) {
      if (rule.has("for")) rule.set("for", placeholder(`for-${name}`));
      const thresholds = ALERT_THRESHOLDS[name] ?? [];
      const expr = rule.get("expr", true);
      if (thresholds.length > 0 && isScalar(expr) && typeof expr.value === "string") {
        let text = expr.value;
        for (const t of thresholds) {
          const count = text.split(t.literal).length - 1;
          if (count !== 1) {
            throw new Error(
              `${name}: the expression has ${count} copies of "${t.literal}", which metrics.prometheusRule.alerts.${name}.${t.value} replaces; update ALERT_THRESHOLDS in tools/manifests/chart-monitoring.ts`,
            );
          }
          text = text.replace(
            t.literal,
            t.template.replace("%s", placeholder(`threshold-${name}-${t.value}`)),
          );
        }
        expr.value = text;
      }
      const labels = rule.get("labels", true);
      if (isMap(labels)) labels.set(placeholder("rule-labels"), "");
      const annotations = rule.get("annotations", true);
      if (isMap(annotations) && annotations.has("runbook_url")) {
        const runbook = annotations.get("runbook_url");
        if (runbook !== `${DEFAULT_RUNBOOK_BASE_URL}/${name}.md`) {
          throw new Error(
            `${name}: runbook_url ${String(runbook)} is not ${DEFAULT_RUNBOOK_BASE_URL}/${name}.md, which metrics.prometheusRule.runbookBaseUrl moves`,
          );
        }
        annotations.set("runbook_url", placeholder(`runbook-${name}`));
      }
    }
  }
}

/** The indentation of a line. */
const indentOf = (line: string): number => line.length - line.trimStart().length;

/**
 * Wraps the list item starting at the line `<indent>- <key>: <name>` (up to the next line as little
 * indented) between `open` and `{{- end }}`.
 */
function wrapItem(lines: string[], key: string, name: string, open: string): string[] {
  const start = lines.findIndex((line) => line.trimStart() === `- ${key}: ${name}`);
  if (start === -1) throw new Error(`no item "- ${key}: ${name}" in the generated template`);
  const indent = indentOf(lines[start] ?? "");
  let end = start + 1;
  while (end < lines.length && ((lines[end] ?? "").trim() === "" || indentOf(lines[end] ?? "") > indent))
    end++;
  const pad = " ".repeat(indent);
  return [
    ...lines.slice(0, start),
    `${pad}${open}`,
    ...lines.slice(start, end),
    `${pad}{{- end }}`,
    ...lines.slice(end),
  ];
}

/** The template actions of markPrometheusRule's placeholders, and each alert and group wrapped in its toggles. */
export function prometheusRuleActions(text: string, doc: Document): string {
  if (doc.get("kind") !== "PrometheusRule") return text;
  let out = text;
  const groups = ruleGroups(doc);
  for (const { alerts } of groups) {
    for (const { name } of alerts) {
      out = out.replaceAll(placeholder(`for-${name}`), action(alertValue(name, "for"), " | quote"));
      for (const t of ALERT_THRESHOLDS[name] ?? []) {
        out = out.replaceAll(placeholder(`threshold-${name}-${t.value}`), action(alertValue(name, t.value)));
      }
      out = out.replaceAll(
        placeholder(`runbook-${name}`),
        `{{ printf "%s/${name}.md" (trimSuffix "/" ${VALUES}.prometheusRule.runbookBaseUrl) | quote }}`,
      );
    }
  }
  if (out.includes(placeholder("rule-labels"))) {
    out = replaceKeyLines(out, placeholder("rule-labels"), (indent) => [
      `${indent}{{- with ${VALUES}.prometheusRule.additionalRuleLabels }}`,
      `${indent}{{- toYaml . | nindent ${indent.length} }}`,
      `${indent}{{- end }}`,
    ]);
  }
  let lines = out.split("\n");
  const enabled = (alert: string): string => `${VALUES}.${alertValue(alert, "enabled")}`;
  for (const { name, alerts } of groups) {
    for (const alert of alerts)
      lines = wrapItem(lines, "alert", alert.name, `{{- if ${enabled(alert.name)} }}`);
    // A group whose alerts are all off is left out, not rendered without rules.
    if (alerts.length > 0) {
      const any =
        alerts.length === 1
          ? enabled(alerts[0]!.name)
          : `or ${alerts.map((a) => `(${enabled(a.name)})`).join(" ")}`;
      lines = wrapItem(lines, "name", name, `{{- if ${any} }}`);
    }
  }
  out = lines.join("\n");
  if (out.includes(PLACEHOLDER))
    throw new Error(`a ${PLACEHOLDER} placeholder is left in the PrometheusRule's template`);
  return out;
}
