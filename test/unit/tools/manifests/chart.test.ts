// The chart generator (tools/manifests/chart.ts) on a small config/ tree: what it writes, and what it refuses.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CHART_GENERATED_TEMPLATE_DIR, renderChartFiles } from "../../../../tools/manifests/chart.js";

let root = "";

function tree(files: Record<string, string>): string {
  root = mkdtempSync(join(tmpdir(), "dpo-chart-generator-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterEach(() => {
  if (root !== "") rmSync(root, { recursive: true, force: true });
  root = "";
});

const KUSTOMIZATION = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n";

const CONFIG: Record<string, string> = {
  "config/default/kustomization.yaml": `${KUSTOMIZATION}namespace: dpo-system
labels:
  - pairs:
      app.kubernetes.io/part-of: dpo
resources: [../crd, ../manager]
images: [{ name: dpo, newName: ghcr.io/dpo-dev/dpo, newTag: 0.1.0 }]
`,
  "config/manager/kustomization.yaml": `${KUSTOMIZATION}resources: [deployment.yaml, service.yaml]\n`,
  "config/manager/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: dpo-operator
  namespace: dpo-system
`,
  "config/manager/service.yaml": `# Why this Service exists.
apiVersion: v1
kind: Service
metadata:
  name: dpo-webhook
  namespace: dpo-system
  annotations:
    note: "{{ not a template }}"
spec:
  ports: [{ port: 443 }]
`,
  "config/components/cert-manager/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [certificate.yaml]
patches: []
`,
  "config/components/cert-manager/certificate.yaml": `apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: dpo-selfsigned
  namespace: dpo-system
`,
  "config/components/plugin-pod-monitor/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [pod-monitor.yaml]
`,
  "config/components/plugin-pod-monitor/pod-monitor.yaml": `apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: dpo-plugin
  namespace: dpo-system
spec:
  namespaceSelector: { matchNames: [dpo-system] }
`,
  "config/components/prometheus-rules/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [prometheus-rule.yaml]
`,
  "config/components/prometheus-rules/prometheus-rule.yaml": `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: dpo
  namespace: dpo-system
spec:
  groups:
    - name: g
      rules:
        - alert: A
          expr: up == 0
          annotations:
            summary: "{{ $labels.pod }} is down"
`,
  "config/components/network-policy/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [network-policy.yaml]
`,
  "config/components/network-policy/network-policy.yaml": `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: dpo-operator
  namespace: dpo-system
`,
  "config/components/takeover/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [cluster-role.yaml]
`,
  "config/components/takeover/cluster-role.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: dpo-operator-takeover
`,
  "config/samples/kustomization.yaml": `${KUSTOMIZATION}resources: [sample.yaml]\n`,
  "config/samples/sample.yaml": `apiVersion: dpo.dev/v1beta1
kind: DevicePluginConfig
metadata:
  name: example
  labels: { team: a }
`,
};

describe("renderChartFiles", () => {
  it("writes config/default's objects with its labels and Helm's, comments kept, the Deployment left to its template", () => {
    const files = renderChartFiles(tree(CONFIG));
    expect(files.get(`${CHART_GENERATED_TEMPLATE_DIR}/manager.yaml`))
      .toBe(`# Generated from config/manager by \`make manifests\`; do not edit.
# Why this Service exists.
apiVersion: v1
kind: Service
metadata:
  name: {{ include "dpo.fullname" . }}-webhook
  namespace: {{ .Release.Namespace }}
  annotations:
    note: "{{ "{{" }} not a template }}"
  labels:
    app.kubernetes.io/part-of: dpo
    {{- include "dpo.helmLabels" . | nindent 4 }}
spec:
  ports: [{port: 443}]
`);
  });

  it("leaves config/'s Namespace out, puts the release's wherever config/ names it, and templates the operator's ServiceAccount", () => {
    const files = renderChartFiles(
      tree({
        ...CONFIG,
        "config/manager/kustomization.yaml": `${KUSTOMIZATION}resources: [namespace.yaml, rbac.yaml]\n`,
        "config/manager/namespace.yaml": `# Lives in dpo-system.
apiVersion: v1
kind: Namespace
metadata:
  name: dpo-system
`,
        "config/manager/rbac.yaml": `apiVersion: v1
kind: ServiceAccount
metadata:
  name: dpo-operator
  namespace: dpo-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: dpo-operator
subjects:
  - kind: ServiceAccount
    name: dpo-operator
    namespace: dpo-system
  - kind: ServiceAccount
    name: dpo-plugin
    namespace: dpo-system
  - kind: User
    name: dpo-operator
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: dpo-operator
  namespace: dpo-system
spec:
  dnsNames: [dpo-webhook.dpo-system.svc, dpo-system-docs.example]
`,
      }),
    );
    expect(files.get(`${CHART_GENERATED_TEMPLATE_DIR}/manager.yaml`))
      .toBe(`# Generated from config/manager by \`make manifests\`; do not edit.
{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "dpo.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/part-of: dpo
    {{- include "dpo.helmLabels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "dpo.fullname" . }}-operator
  labels:
    app.kubernetes.io/part-of: dpo
    {{- include "dpo.helmLabels" . | nindent 4 }}
subjects:
  - kind: ServiceAccount
    name: {{ include "dpo.serviceAccountName" . }}
    namespace: {{ .Release.Namespace }}
  - kind: ServiceAccount
    name: {{ include "dpo.fullname" . }}-plugin
    namespace: {{ .Release.Namespace }}
  - kind: User
    name: dpo-operator
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {{ include "dpo.fullname" . }}-operator
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/part-of: dpo
    {{- include "dpo.helmLabels" . | nindent 4 }}
spec:
  dnsNames: [{{ include "dpo.fullname" . }}-webhook.{{ .Release.Namespace }}.svc, dpo-system-docs.example]
`);
  });

  it("names the operator's ServiceAccount of serviceAccount.name where a CEL expression matches its username", () => {
    const files = renderChartFiles(
      tree({
        ...CONFIG,
        "config/manager/kustomization.yaml": `${KUSTOMIZATION}resources: [policy.yaml]\n`,
        "config/manager/policy.yaml": `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: dpo-operator-node-labels
spec:
  matchConditions:
    - name: dpo-operator-account
      expression: >-
        request.userInfo.username.startsWith('system:serviceaccount:') &&
        request.userInfo.username.endsWith(':dpo-operator')
  validations:
    - expression: "true"
      message: dpo-operator may change only its own labels
`,
      }),
    );
    const policy = files.get(`${CHART_GENERATED_TEMPLATE_DIR}/manager.yaml`) ?? "";
    expect(policy).toContain(
      `request.userInfo.username.endsWith(':{{ include "dpo.serviceAccountName" . }}')`,
    );
    expect(policy).not.toContain(":dpo-operator'");
    // Prose naming the operator is not a username: it stays as config/ wrote it.
    expect(policy).toContain("message: dpo-operator may change only its own labels");
  });

  it("names every object and every reference to one with the chart's prefix, but leaves labels, selectors, prose, CEL entry names and Users as config/ has them", () => {
    const files = renderChartFiles(
      tree({
        ...CONFIG,
        "config/manager/kustomization.yaml": `${KUSTOMIZATION}resources: [objects.yaml]\n`,
        "config/manager/objects.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: dpo-plugin
  labels: { app.kubernetes.io/name: dpo-plugin }
roleRef: { kind: Role, name: dpo-plugin }
subjects:
  - { kind: ServiceAccount, name: dpo-plugin, namespace: dpo-system }
  - { kind: User, name: dpo-plugin }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: dpo-operator
rules:
  - { apiGroups: [""], resources: [secrets], resourceNames: [dpo-webhook-cert], verbs: [get] }
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: dpo-plugin-own-node
spec:
  matchConditions:
    - name: dpo-plugin-account
      expression: "request.userInfo.username.endsWith(':dpo-plugin')"
  validations:
    - expression: "true"
      message: dpo-plugin may write only its own node's report
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: dpo
spec:
  selector: { matchLabels: { app.kubernetes.io/managed-by: dpo-operator } }
`,
      }),
    );
    const text = files.get(`${CHART_GENERATED_TEMPLATE_DIR}/manager.yaml`) ?? "";
    const FN = '{{ include "dpo.fullname" . }}';
    for (const renamed of [
      `  name: ${FN}-plugin\n`,
      `roleRef: {kind: Role, name: ${FN}-plugin}`,
      `      kind: ServiceAccount,\n      name: ${FN}-plugin,\n`,
      `resourceNames: [${FN}-webhook-cert]`,
      `  name: ${FN}-plugin-own-node\n`,
      `endsWith(':${FN}-plugin')`,
      `  name: ${FN}\n`,
    ]) {
      expect(text).toContain(renamed);
    }
    for (const kept of [
      "app.kubernetes.io/name: dpo-plugin",
      "{kind: User, name: dpo-plugin}",
      "- name: dpo-plugin-account",
      "message: dpo-plugin may write only its own node's report",
      "app.kubernetes.io/managed-by: dpo-operator",
    ]) {
      expect(text).toContain(kept);
    }
  });

  it("renders the cert-manager component's and the samples' objects only when their value is on, without config/default's labels", () => {
    const files = renderChartFiles(tree(CONFIG));
    const certManager = files.get(`${CHART_GENERATED_TEMPLATE_DIR}/components-cert-manager.yaml`) ?? "";
    expect(certManager.startsWith("{{- if .Values.webhook.certManager.enabled }}\n")).toBe(true);
    expect(certManager.endsWith("{{- end }}\n")).toBe(true);
    expect(certManager).not.toContain("part-of");
    const samples = files.get(`${CHART_GENERATED_TEMPLATE_DIR}/samples.yaml`) ?? "";
    expect(samples.startsWith("{{- if .Values.samples.enabled }}\n")).toBe(true);
    // A flow mapping of labels is written as a block, so the include can go on a line of its own.
    expect(samples).toContain(`  labels:
    team: a
    {{- include "dpo.helmLabels" . | nindent 4 }}
`);
  });

  it("renders the PodMonitor and the PrometheusRule only when their value is on, with their extra labels, and the alerts' templates literal", () => {
    const files = renderChartFiles(tree(CONFIG));
    expect(files.get(`${CHART_GENERATED_TEMPLATE_DIR}/components-plugin-pod-monitor.yaml`))
      .toBe(`{{- if .Values.metrics.podMonitor.enabled }}
# Generated from config/components/plugin-pod-monitor by \`make manifests\`; do not edit.
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ include "dpo.fullname" . }}-plugin
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "dpo.helmLabels" . | nindent 4 }}
    {{- with .Values.metrics.podMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector: {matchNames: [{{ .Release.Namespace }}]}
{{- end }}
`);
    const rules = files.get(`${CHART_GENERATED_TEMPLATE_DIR}/components-prometheus-rules.yaml`) ?? "";
    expect(rules.startsWith("{{- if .Values.metrics.prometheusRule.enabled }}\n")).toBe(true);
    expect(rules).toContain("    {{- with .Values.metrics.prometheusRule.labels }}\n");
    expect(rules).toContain(`summary: "{{ "{{" }} $labels.pod }} is down"`);
  });

  it("writes no CRDs of its own: the chart's crds/ is the repository's", () => {
    const files = renderChartFiles(tree(CONFIG));
    expect([...files.keys()].filter((path) => !path.startsWith(`${CHART_GENERATED_TEMPLATE_DIR}/`))).toEqual(
      [],
    );
  });

  it("refuses config/default labels that the CRDs do not carry (Helm installs crds/ without them)", () => {
    const labelled = {
      ...CONFIG,
      "config/default/kustomization.yaml": CONFIG["config/default/kustomization.yaml"]!.replace(
        "      app.kubernetes.io/part-of: dpo\n",
        "      app.kubernetes.io/part-of: dpo\n      team: gpu\n",
      ),
    };
    expect(() => renderChartFiles(tree(labelled))).toThrow(
      "devicepluginconfigs.dpo.dev lacks the label team=gpu that config/default gives every object",
    );
  });

  it.each([
    [
      "config/default/kustomization.yaml",
      `${KUSTOMIZATION}resources: [../manager]\npatches: []\n`,
      "patches",
    ],
    [
      "config/manager/kustomization.yaml",
      `${KUSTOMIZATION}resources: [service.yaml]\nnamePrefix: x-\n`,
      "namePrefix",
    ],
    [
      "config/default/kustomization.yaml",
      `${KUSTOMIZATION}resources: [../manager]\nlabels: [{ pairs: { a: b }, includeSelectors: true }]\n`,
      "includeSelectors",
    ],
    ["config/manager/kustomization.yaml", `${KUSTOMIZATION}resources: [../rbac]\n`, "not a YAML file"],
  ])("refuses what it would not apply: %s with %j", (path, text, named) => {
    expect(() => renderChartFiles(tree({ ...CONFIG, [path]: text }))).toThrow(named);
  });
});
