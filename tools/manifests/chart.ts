// The generated parts of the Helm chart (charts/dpo): its CRDs, and a template for every object of config/
// but the operator Deployment and the Namespace, read from the same files kustomize reads, so the two
// packagings share one source; only the release's namespace, the operator's ServiceAccount and the prefix of
// the objects' names (fullnameOverride, nameOverride) are values.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { isMap, isPair, isScalar, parseAllDocuments, parseDocument, visit, type Document } from "yaml";
import { allCrds } from "../../src/api/crd.js";
import {
  markPodMonitor,
  markPrometheusRule,
  podMonitorActions,
  prometheusRuleActions,
} from "./chart-monitoring.js";

export const CHART_DIR = "charts/dpo";
/**
 * Helm installs these before the templates and never upgrades or deletes them: a symlink to the repository's
 * crds/, with its kustomization.yaml left out by the chart's .helmignore.
 */
export const CHART_CRD_DIR = `${CHART_DIR}/crds`;
/** Templates written from config/; the chart's own templates (the Deployment, ...) sit one level up. */
export const CHART_GENERATED_TEMPLATE_DIR = `${CHART_DIR}/templates/generated`;

/** The kustomization that config/default is, and the only fields of it the generator knows how to apply. */
const DEFAULT_KUSTOMIZATION = "config/default";
const APPLIED_DEFAULT_FIELDS = ["apiVersion", "kind", "namespace", "labels", "resources"];
/**
 * config/default fields that change only the operator Deployment (image, plugin image) or only the
 * admission policies' namespace, which their files do not set: the hand-written Deployment template
 * does their work, and the equivalence test (test/integration/helm-chart-render.test.ts) checks it.
 */
const DEPLOYMENT_ONLY_DEFAULT_FIELDS = ["images", "replacements", "transformers"];

/**
 * The namespace config/ installs into; in the chart every mention of it (metadata.namespace, binding subjects,
 * the webhook's DNS names) is the release's namespace, and the Namespace object itself is the user's
 * (`helm install --namespace X --create-namespace`), so `helm uninstall` never deletes it.
 */
const CONFIG_NAMESPACE = "dpo-system";
const RELEASE_NAMESPACE_PLACEHOLDER = "dpo-chart-generator-release-namespace";
const RELEASE_NAMESPACE = "{{ .Release.Namespace }}";
/** The operator's ServiceAccount, whose creation, name and annotations are values (serviceAccount.*). */
const OPERATOR_SERVICE_ACCOUNT = "dpo-operator";
const OPERATOR_SA_PLACEHOLDER = "dpo-chart-generator-operator-service-account";
const OPERATOR_SA_NAME = '{{ include "dpo.serviceAccountName" . }}';
const OPERATOR_SA_ANNOTATIONS_PLACEHOLDER = "dpo-chart-generator/service-account-annotations";
/**
 * How a CEL expression names the operator's account: the end of a request's username
 * (`system:serviceaccount:<namespace>:<name>`), as the operator's Node admission policy matches it. A
 * literal there would leave a renamed account (serviceAccount.name) outside the policy, free to patch any
 * label, taint or field of every Node that its ClusterRole lets it patch.
 */
const OPERATOR_SA_CEL_SUFFIX = `':${OPERATOR_SERVICE_ACCOUNT}'`;

/**
 * The prefix of every object name config/ gives (dpo-operator, dpo-plugin, dpo-webhook, dpo-webhook-cert,
 * dpo-plugin-own-node, ...), which the chart's fullnameOverride and nameOverride change: wherever a name is
 * given or referred to (metadata.name, roleRef, subjects, resourceNames, a Certificate's DNS names, the
 * admission policies' CEL naming the plugin's ServiceAccount), but never in labels or label selectors,
 * which stay what the operator and the Services select on.
 */
const NAME_PREFIX = /(?<![A-Za-z0-9_./-])dpo-(?=(?:operator|plugin|webhook|selfsigned)\b)/g;
const FULLNAME_PLACEHOLDER = "dpo-chart-generator-fullname";
const FULLNAME = '{{ include "dpo.fullname" . }}';
/** The fields that give or refer to an object's name, and the CEL expressions that match an account's. */
const NAME_KEYS = new Set(["name", "policyName", "secretName", "resourceNames", "dnsNames", "expression"]);
/** Keys whose maps hold labels: their values are left as config/ has them. */
const LABEL_MAP_KEYS = new Set(["labels", "matchLabels", "selector", "podSelector", "namespaceSelector"]);
/** Lists whose items' `name` is no object's: an admission policy's conditions, validations and variables. */
const CEL_NAME_LISTS = new Set(["matchConditions", "validations", "variables"]);

/**
 * Whether a scalar at this path (its ancestors) names one of the chart's objects: the value, or an item of
 * the list, of a NAME_KEYS field; not in labels or selectors, not a CEL entry's own name, not a binding
 * subject that is a User or a Group. Prose (messages, descriptions) keeps config/'s words.
 */
function namesAnObject(path: readonly unknown[]): boolean {
  const keys = path.filter(isPair).map((p) => (isScalar(p.key) ? String(p.key.value) : ""));
  const key = keys.at(-1) ?? "";
  if (!NAME_KEYS.has(key) || keys.some((k) => LABEL_MAP_KEYS.has(k))) return false;
  if (key === "name" && keys.some((k) => CEL_NAME_LISTS.has(k))) return false;
  const owner = path.findLast(isMap);
  const kind = owner?.get("kind");
  return kind !== "User" && kind !== "Group";
}
/** The same suffix once the name's prefix is marked (the Scalar visitor marks it first). */
const OPERATOR_SA_CEL_SUFFIX_MARKED = OPERATOR_SA_CEL_SUFFIX.replace(":dpo-", `:${FULLNAME_PLACEHOLDER}-`);

/** Placeholder label key replaced by the include of Helm's labels once the document is text. */
const HELM_LABELS_PLACEHOLDER = "dpo-chart-generator/helm-labels";
const HELM_LABELS_INCLUDE = '{{- include "dpo.helmLabels" . | nindent INDENT }}';

/** A config/ directory whose objects become one generated template, rendered when `condition` holds. */
interface TemplateSource {
  dir: string;
  /** A Helm value path; the template renders nothing unless it is true. */
  condition?: string;
  /** Whether config/default's labels apply (they do to what config/default includes). */
  defaultLabels: boolean;
  /** A Helm value path holding more labels for the objects' metadata (a Prometheus' selector wants some). */
  labelsValue?: string;
}

type KustomizationFields = Record<string, unknown> & {
  resources?: string[];
  labels?: { pairs?: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
};

function readKustomization(repoRoot: string, dir: string): KustomizationFields {
  const path = join(repoRoot, dir, "kustomization.yaml");
  return parseDocument(readFileSync(path, "utf8")).toJS() as KustomizationFields;
}

/** config/default's `labels` pairs, which kustomize adds to every object's metadata.labels only. */
function defaultLabelPairs(kustomization: KustomizationFields): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const entry of kustomization.labels ?? []) {
    if (entry.includeSelectors || entry.includeTemplates) {
      throw new Error(
        `${DEFAULT_KUSTOMIZATION}: labels with includeSelectors/includeTemplates are not applied by tools/manifests/chart.ts`,
      );
    }
    Object.assign(pairs, entry.pairs);
  }
  return pairs;
}

/** The directories config/default takes its objects from, each checked to hold plain resources only. */
function defaultSources(kustomization: KustomizationFields): TemplateSource[] {
  const unknown = Object.keys(kustomization).filter(
    (k) => !APPLIED_DEFAULT_FIELDS.includes(k) && !DEPLOYMENT_ONLY_DEFAULT_FIELDS.includes(k),
  );
  if (unknown.length > 0) {
    throw new Error(
      `${DEFAULT_KUSTOMIZATION}: ${unknown.join(", ")} not applied by tools/manifests/chart.ts; teach it, or the chart differs`,
    );
  }
  return (kustomization.resources ?? [])
    .map((resource) => join("config", resource.replace(/^\.\.\//, "")))
    .filter((dir) => dir !== "config/crd") // the chart's crds/, a symlink to the same files
    .map((dir) => ({ dir, defaultLabels: true }));
}

/** The YAML files of a kustomization, in its order; anything but plain `resources` would be ignored, so it throws. */
function resourceFiles(repoRoot: string, dir: string, allowed: string[] = []): string[] {
  const kustomization = readKustomization(repoRoot, dir);
  const unknown = Object.keys(kustomization).filter(
    (k) => !["apiVersion", "kind", "resources", ...allowed].includes(k),
  );
  if (unknown.length > 0) {
    throw new Error(
      `${dir}/kustomization.yaml: ${unknown.join(", ")} not applied by tools/manifests/chart.ts`,
    );
  }
  return (kustomization.resources ?? []).map((file) => {
    if (!/\.ya?ml$/.test(file)) throw new Error(`${dir}/kustomization.yaml: ${file} is not a YAML file`);
    return join(dir, file);
  });
}

/** The operator Deployment is a hand-written template (charts/dpo/templates/deployment.yaml): it takes values. */
function isOperatorDeployment(doc: Document): boolean {
  return doc.get("kind") === "Deployment" && doc.getIn(["metadata", "name"]) === "dpo-operator";
}

/** config/'s Namespace: the chart installs into the release's namespace and leaves that namespace alone. */
function isConfigNamespace(doc: Document): boolean {
  return doc.get("kind") === "Namespace" && doc.getIn(["metadata", "name"]) === CONFIG_NAMESPACE;
}

function isOperatorServiceAccount(doc: Document): boolean {
  return doc.get("kind") === "ServiceAccount" && doc.getIn(["metadata", "name"]) === OPERATOR_SERVICE_ACCOUNT;
}

/**
 * Every scalar that is config/'s namespace, or names it between dots (`dpo-webhook.dpo-system.svc`), every
 * binding subject that is the operator's ServiceAccount, every CEL username suffix naming that account, and
 * the prefix of every object name outside labels (NAME_PREFIX), marked with placeholders for the template.
 */
function markReleaseValues(doc: Document): void {
  // Before names are marked, which would hide the operator's account from isOperatorServiceAccount.
  if (isOperatorServiceAccount(doc)) {
    doc.setIn(["metadata", "name"], OPERATOR_SA_PLACEHOLDER);
  }
  // An object named after the project alone (the PrometheusRule) is named after the prefix alone.
  if (doc.getIn(["metadata", "name"]) === "dpo") doc.setIn(["metadata", "name"], FULLNAME_PLACEHOLDER);
  visit(doc, {
    Scalar(_key, node, path) {
      if (typeof node.value !== "string") return;
      let text = namesAnObject(path)
        ? node.value.replace(NAME_PREFIX, `${FULLNAME_PLACEHOLDER}-`)
        : node.value;
      if (text === CONFIG_NAMESPACE) text = RELEASE_NAMESPACE_PLACEHOLDER;
      else if (text.includes(`.${CONFIG_NAMESPACE}.`)) {
        text = text.replaceAll(`.${CONFIG_NAMESPACE}.`, `.${RELEASE_NAMESPACE_PLACEHOLDER}.`);
      }
      text = text
        .replaceAll(OPERATOR_SA_CEL_SUFFIX, `':${OPERATOR_SA_PLACEHOLDER}'`)
        .replaceAll(OPERATOR_SA_CEL_SUFFIX_MARKED, `':${OPERATOR_SA_PLACEHOLDER}'`);
      if (text !== node.value) node.value = text;
    },
    Map(_key, node) {
      if (
        node.get("kind") === "ServiceAccount" &&
        node.get("name") === OPERATOR_SERVICE_ACCOUNT &&
        node.has("namespace")
      ) {
        node.set("name", OPERATOR_SA_PLACEHOLDER);
      }
    },
  });
}

/** Replaces the line `key: ""` (at any indent) with `replacement(indent)`; throws when it is not there. */
function replacePlaceholderLine(text: string, key: string, replacement: (indent: number) => string): string {
  const placeholder = new RegExp(`^( *)${key}: ""$`, "m");
  const match = placeholder.exec(text);
  if (!match) throw new Error(`no ${key} placeholder in the generated template`);
  return text.replace(placeholder, replacement(match[1]?.length ?? 0));
}

/**
 * One object as template text: its comments kept, labels added, Helm's labels included, `{{` escaped,
 * config/'s namespace the release's, and the operator's ServiceAccount the one of serviceAccount.*.
 */
function templateDocument(doc: Document, labels: Record<string, string>, labelsValue?: string): string {
  const serviceAccount = isOperatorServiceAccount(doc);
  // The monitoring objects' own values (chart-monitoring.ts): placeholders now, actions once it is text.
  markPodMonitor(doc);
  markPrometheusRule(doc);
  markReleaseValues(doc);
  for (const [key, value] of Object.entries(labels)) doc.setIn(["metadata", "labels", key], value);
  doc.setIn(["metadata", "labels", HELM_LABELS_PLACEHOLDER], "");
  if (serviceAccount) doc.setIn(["metadata", OPERATOR_SA_ANNOTATIONS_PLACEHOLDER], "");
  const labelsNode = doc.getIn(["metadata", "labels"], true);
  if (isMap(labelsNode)) labelsNode.flow = false;
  // The generator writes the separators itself.
  if (doc.directives) doc.directives.docStart = null;
  // Go templates start an action at `{{` only; print it literally wherever config/ has one.
  let text = doc
    .toString({ lineWidth: 110, flowCollectionPadding: false })
    .replaceAll("{{", '{{ "{{" }}')
    .replaceAll(RELEASE_NAMESPACE_PLACEHOLDER, RELEASE_NAMESPACE)
    .replaceAll(OPERATOR_SA_PLACEHOLDER, OPERATOR_SA_NAME)
    .replaceAll(FULLNAME_PLACEHOLDER, FULLNAME);
  text = prometheusRuleActions(podMonitorActions(text), doc);
  text = replacePlaceholderLine(text, HELM_LABELS_PLACEHOLDER, (indent) =>
    [
      `${" ".repeat(indent)}${HELM_LABELS_INCLUDE.replace("INDENT", String(indent))}`,
      ...(labelsValue
        ? [
            `${" ".repeat(indent)}{{- with ${labelsValue} }}`,
            `${" ".repeat(indent)}{{- toYaml . | nindent ${indent} }}`,
            `${" ".repeat(indent)}{{- end }}`,
          ]
        : []),
    ].join("\n"),
  );
  if (!serviceAccount) return text;
  text = replacePlaceholderLine(text, OPERATOR_SA_ANNOTATIONS_PLACEHOLDER, (indent) =>
    [
      `${" ".repeat(indent)}{{- with .Values.serviceAccount.annotations }}`,
      `${" ".repeat(indent)}annotations:`,
      `${" ".repeat(indent + 2)}{{- toYaml . | nindent ${indent + 2} }}`,
      `${" ".repeat(indent)}{{- end }}`,
    ].join("\n"),
  );
  // Not created when serviceAccount.create is false: the user's account of that name is bound instead.
  return `{{- if .Values.serviceAccount.create }}\n${text}{{- end }}\n`;
}

function renderTemplate(
  repoRoot: string,
  source: TemplateSource,
  files: string[],
  labels: Record<string, string>,
): string {
  const docs: string[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(readFileSync(join(repoRoot, file), "utf8"))) {
      if (!("contents" in doc) || doc.errors.length > 0) throw new Error(`${file}: not valid YAML`);
      if (doc.contents === null || isOperatorDeployment(doc) || isConfigNamespace(doc)) continue;
      docs.push(templateDocument(doc, source.defaultLabels ? labels : {}, source.labelsValue));
    }
  }
  const header = `# Generated from ${source.dir} by \`make manifests\`; do not edit.\n`;
  const body = docs.join("---\n");
  if (!source.condition) return header + body;
  return `{{- if ${source.condition} }}\n${header}${body}{{- end }}\n`;
}

/** Repo-relative path → content of every generated file of the chart. */
export function renderChartFiles(repoRoot: string): Map<string, string> {
  const files = new Map<string, string>();
  const kustomization = readKustomization(repoRoot, DEFAULT_KUSTOMIZATION);
  const labels = defaultLabelPairs(kustomization);
  // The chart installs crds/ as it is, without the labels kustomize adds: the CRDs must carry them already.
  for (const crd of allCrds()) {
    for (const [key, value] of Object.entries(labels)) {
      if (crd.metadata.labels?.[key] !== value) {
        throw new Error(
          `${crd.metadata.name} lacks the label ${key}=${value} that ${DEFAULT_KUSTOMIZATION} gives every object (src/api/crd/definition.ts CRD_LABELS)`,
        );
      }
    }
  }
  const sources: TemplateSource[] = [
    ...defaultSources(kustomization),
    // Only its resources: its patches (the Deployment's certificate volume, the CRD's CA injection) are
    // the Deployment template's and, for the CRD, the user's (docs/deploy.md).
    {
      dir: "config/components/cert-manager",
      condition: ".Values.webhook.certManager.enabled",
      defaultLabels: false,
    },
    { dir: "config/samples", condition: ".Values.samples.enabled", defaultLabels: false },
    // The Prometheus Operator objects: opt-in, like the chart's own ServiceMonitor.
    {
      dir: "config/components/plugin-pod-monitor",
      condition: ".Values.metrics.podMonitor.enabled",
      defaultLabels: false,
      labelsValue: ".Values.metrics.podMonitor.labels",
    },
    {
      dir: "config/components/prometheus-rules",
      condition: ".Values.metrics.prometheusRule.enabled",
      defaultLabels: false,
      labelsValue: ".Values.metrics.prometheusRule.labels",
    },
    // Inert where nothing enforces NetworkPolicy, and the webhook rule may need the control plane's addresses.
    {
      dir: "config/components/network-policy",
      condition: ".Values.networkPolicy.enabled",
      defaultLabels: false,
    },
    // The rights a takeover needs outside the operator's namespace (docs/takeover.md): opt-in.
    {
      dir: "config/components/takeover",
      condition: ".Values.takeover.enabled",
      defaultLabels: false,
    },
  ];
  for (const source of sources) {
    const allowed = source.dir === "config/components/cert-manager" ? ["patches"] : [];
    const name = source.dir.replace(/^config\//, "").replaceAll("/", "-");
    files.set(
      `${CHART_GENERATED_TEMPLATE_DIR}/${name}.yaml`,
      renderTemplate(repoRoot, source, resourceFiles(repoRoot, source.dir, allowed), labels),
    );
  }
  return files;
}
