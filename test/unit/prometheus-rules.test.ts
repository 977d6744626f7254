// dpo's alerting rules (config/components/prometheus-rules, the one source the chart's template is generated
// from): `promtool check rules`, `promtool test rules` with test/prometheus/alerts.promtool.yaml, a test and
// a runbook (docs/runbooks/<alert>.md) for every alert.
import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { buildPromtool, promtool } from "../../tools/promtool/harness.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");
const RULES_FILE = join(repoRoot, "config/components/prometheus-rules/prometheus-rule.yaml");
const RULE_TESTS = join(repoRoot, "test/prometheus/alerts.promtool.yaml");
const RUNBOOK_BASE = "https://github.com/dpo-dev/dpo/blob/main/docs/runbooks/";

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
}
interface RuleGroups {
  groups: { name: string; rules: Rule[] }[];
}

const prometheusRule = parse(readFileSync(RULES_FILE, "utf8")) as { kind: string; spec: RuleGroups };
const alerts = prometheusRule.spec.groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);

let binary = "";
let dir = "";
beforeAll(async () => {
  binary = await buildPromtool();
  dir = await mkdtemp(join(tmpdir(), "dpo-promtool-"));
  await writeFile(join(dir, "rules.yaml"), stringify(prometheusRule.spec));
  await copyFile(RULE_TESTS, join(dir, "alerts.promtool.yaml"));
}, 1_800_000);
afterAll(async () => {
  if (dir !== "") await rm(dir, { recursive: true, force: true });
});

describe("dpo's Prometheus rules", () => {
  it("are a PrometheusRule with the alerts of issues 24 and 35", () => {
    expect(prometheusRule.kind).toBe("PrometheusRule");
    expect(alerts.map((a) => a.alert).sort()).toEqual([
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
    ]);
  });

  it("pass promtool check rules", async () => {
    const result = await promtool(binary, ["check", "rules", "rules.yaml"], dir);
    expect(result.output).toContain(`SUCCESS: ${alerts.length} rules found`);
    expect(result.code, result.output).toBe(0);
  });

  it("pass their unit tests (promtool test rules)", async () => {
    const result = await promtool(binary, ["test", "rules", "alerts.promtool.yaml"], dir);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain("SUCCESS");
  });

  it("each have a unit test that expects it to fire", () => {
    const tests = parse(readFileSync(RULE_TESTS, "utf8")) as {
      tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const firing = new Set(
      tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0)),
    );
    const tested = new Set([...firing].map((a) => a.alertname));
    expect(alerts.filter((a) => !tested.has(a.alert!)).map((a) => a.alert)).toEqual([]);
  });

  it("each have a severity, a summary, a description and a runbook that says what it means, how to confirm and what to do", () => {
    for (const alert of alerts) {
      const name = alert.alert!;
      expect(["warning", "critical"], name).toContain(alert.labels?.severity);
      expect(alert.annotations?.summary, name).toBeTruthy();
      expect(alert.annotations?.description, name).toBeTruthy();
      expect(alert.annotations?.runbook_url, name).toBe(`${RUNBOOK_BASE}${name}.md`);
      const runbook = join(repoRoot, "docs/runbooks", `${name}.md`);
      expect(existsSync(runbook), `${runbook} is missing`).toBe(true);
      const text = readFileSync(runbook, "utf8");
      expect(text, runbook).toMatch(new RegExp(`^# ${name}$`, "m"));
      for (const heading of ["## What it means", "## How to confirm", "## What to do"]) {
        expect(text, `${runbook}: ${heading}`).toContain(heading);
      }
      expect(text, `${runbook}: no kubectl command to confirm with`).toMatch(/kubectl /);
    }
  });

  it("have runbooks that work in any namespace: none names dpo-system in a command, each sets NS once before using it", () => {
    for (const alert of alerts) {
      const runbook = join(repoRoot, "docs/runbooks", `${alert.alert}.md`);
      const text = readFileSync(runbook, "utf8");
      expect(text, runbook).not.toMatch(/(-n|--namespace)[ =]dpo-system|serviceaccount:dpo-system/);
      const uses = text.indexOf('"$NS"');
      if (uses === -1) continue;
      const sets = text.indexOf("NS=$(kubectl get deployments -A -l app.kubernetes.io/name=dpo-operator");
      expect(sets, `${runbook}: uses $NS without setting it`).toBeGreaterThan(-1);
      expect(sets, `${runbook}: sets $NS after using it`).toBeLessThan(uses);
    }
  });

  it("are each listed, with their severity and for:, in the runbooks' index", () => {
    const index = readFileSync(join(repoRoot, "docs/runbooks/README.md"), "utf8");
    const rows = new Map(
      [...index.matchAll(/^\| \[(\w+)\]\(\1\.md\) *\| *(\w+) *\| *(\w*) *\|/gm)].map((m) => [
        m[1],
        { severity: m[2], for: m[3] },
      ]),
    );
    expect([...rows.keys()].sort()).toEqual(alerts.map((a) => a.alert).sort());
    for (const alert of alerts) {
      expect(rows.get(alert.alert), alert.alert).toEqual({
        severity: alert.labels?.severity,
        for: alert.for ?? "",
      });
    }
  });

  it("promtool is live: it rejects a rule that does not parse, and a unit test that expects the wrong alert", async () => {
    await writeFile(
      join(dir, "bad.yaml"),
      stringify({
        groups: [{ name: "bad", rules: [{ alert: "Bad", expr: "max by (config (dpo_config_ready)" }] }],
      }),
    );
    const bad = await promtool(binary, ["check", "rules", "bad.yaml"], dir);
    expect(bad.code).not.toBe(0);
    expect(bad.output).toMatch(/parse error|unexpected/);

    const wrong = (await readFile(RULE_TESTS, "utf8")).replace(
      "exp_labels: { severity: warning, config: gpu }",
      "exp_labels: { severity: warning, config: not-gpu }",
    );
    await writeFile(join(dir, "wrong.promtool.yaml"), wrong);
    const failed = await promtool(binary, ["test", "rules", "wrong.promtool.yaml"], dir);
    expect(failed.code).not.toBe(0);
    expect(failed.output).toContain("not-gpu");
  });
});
