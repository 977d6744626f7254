// The OLM bundle (bundle/): a ClusterServiceVersion, the CRDs and the objects OLM installs beside them, and
// the bundle's metadata, written from the same sources as config/default and the chart: the CRDs of
// src/api, the RBAC, Deployment and Service of config/, the samples of config/samples, the chart's
// Chart.yaml metadata and package.json's version. tools/olm-validate judges it with the operator
// framework's own validators (test/unit/tools/manifests/olm-bundle.test.ts).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parseDocument, stringify } from "yaml";
import { allCrds, crdFileName, renderCrdYaml, type CustomResourceDefinition } from "../../src/api/crd.js";
import type { StructuralSchema } from "../../src/api/crd/structural-schema.js";

export const BUNDLE_DIR = "bundle";
export const BUNDLE_MANIFESTS_DIR = `${BUNDLE_DIR}/manifests`;
export const BUNDLE_METADATA_DIR = `${BUNDLE_DIR}/metadata`;
/** The OLM package, and the one channel a release is published to: `candidate` while dpo is 0.x (OLM's channel naming). */
export const OLM_PACKAGE = "dpo";
export const OLM_CHANNEL = "candidate";
/** Where OLM mounts the serving certificate it issues for a CSV's webhook (tls.crt and tls.key). */
export const OLM_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs";

const HEADER =
  "# Generated from src/api, config/, charts/dpo/Chart.yaml and package.json by `make manifests`; do not edit.\n";
const OPERATOR_DEPLOYMENT = "dpo-operator";
/** config/default's labels, which kustomize gives every object it renders. */
const PART_OF = { "app.kubernetes.io/part-of": "dpo" };
/** Where the RBAC of the bundle comes from: config/rbac, and the SCC `use` rules of the OpenShift component. */
const RBAC_DIRS = ["config/rbac", "config/components/openshift"];
/**
 * What OLM installs beside the CSV and CRDs (its supported kinds): the operator's metrics Service and
 * PodDisruptionBudget. Not the Namespace (OLM's), not config/webhook (OLM issues the webhook's certificate
 * and serves its Service), not config/policy nor the SCC (kinds OLM does not install: docs/openshift.md).
 */
const EXTRA_OBJECTS = [
  { file: "config/manager/metrics_service.yaml", kind: "Service" },
  { file: "config/manager/pod_disruption_budget.yaml", kind: "PodDisruptionBudget" },
];

type Obj = Record<string, unknown> & { kind?: string; metadata?: Record<string, unknown> };
interface Rule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
interface Permission {
  serviceAccountName: string;
  rules: Rule[];
}

interface ChartMetadata {
  description: string;
  home: string;
  icon: string;
  sources?: string[];
  keywords?: string[];
  kubeVersion: string;
  maintainers?: { name: string; email?: string; url?: string }[];
}

function readObjects(repoRoot: string, file: string): Obj[] {
  return parseAllDocuments(readFileSync(join(repoRoot, file), "utf8")).flatMap((doc) => {
    if (!("contents" in doc) || doc.errors.length > 0) throw new Error(`${file}: not valid YAML`);
    const value = doc.toJS() as Obj | null;
    return value === null ? [] : [value];
  });
}

/** The YAML files of a kustomization's `resources` (plain files only, as tools/manifests/chart.ts reads them). */
function kustomizationFiles(repoRoot: string, dir: string): string[] {
  const k = parseDocument(readFileSync(join(repoRoot, dir, "kustomization.yaml"), "utf8")).toJS() as {
    resources?: string[];
  };
  return (k.resources ?? []).map((file) => {
    if (!/\.ya?ml$/.test(file)) throw new Error(`${dir}/kustomization.yaml: ${file} is not a YAML file`);
    return join(dir, file);
  });
}

function objectsOf(repoRoot: string, dirs: readonly string[]): Obj[] {
  return dirs.flatMap((dir) => kustomizationFiles(repoRoot, dir).flatMap((f) => readObjects(repoRoot, f)));
}

function nameOf(o: Obj): string {
  const name = o.metadata?.name;
  return typeof name === "string" ? name : "";
}

/**
 * The rules each ServiceAccount is bound to, from the Roles and ClusterRoles and their bindings: the CSV's
 * permissions (namespaced, in the install namespace) and clusterPermissions, which OLM binds itself.
 */
export function permissionsOf(objects: readonly Obj[]): {
  permissions: Permission[];
  clusterPermissions: Permission[];
} {
  const roles = new Map(objects.filter((o) => o.kind === "Role").map((o) => [nameOf(o), o]));
  const clusterRoles = new Map(objects.filter((o) => o.kind === "ClusterRole").map((o) => [nameOf(o), o]));
  const permissions = new Map<string, Rule[]>();
  const clusterPermissions = new Map<string, Rule[]>();
  for (const binding of objects.filter((o) => o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding")) {
    const roleRef = binding.roleRef as { kind: string; name: string };
    const role = (roleRef.kind === "Role" ? roles : clusterRoles).get(roleRef.name);
    if (!role)
      throw new Error(
        `${binding.kind} ${nameOf(binding)}: its ${roleRef.kind} ${roleRef.name} is not in ${RBAC_DIRS.join(", ")}`,
      );
    const into = roleRef.kind === "Role" ? permissions : clusterPermissions;
    for (const subject of binding.subjects as { kind: string; name: string }[]) {
      if (subject.kind !== "ServiceAccount") {
        throw new Error(
          `${binding.kind} ${nameOf(binding)}: subject ${subject.kind} ${subject.name} is no ServiceAccount, which a CSV cannot bind`,
        );
      }
      into.set(subject.name, [...(into.get(subject.name) ?? []), ...(role.rules as Rule[])]);
    }
  }
  const list = (m: Map<string, Rule[]>) =>
    [...m].map(([serviceAccountName, rules]) => ({ serviceAccountName, rules }));
  return { permissions: list(permissions), clusterPermissions: list(clusterPermissions) };
}

/** The operator image config/default sets (its `images:` entry), which must carry package.json's version. */
function operatorImage(repoRoot: string, version: string): string {
  const k = parseDocument(
    readFileSync(join(repoRoot, "config/default/kustomization.yaml"), "utf8"),
  ).toJS() as {
    images?: { name: string; newName: string; newTag: string }[];
  };
  const entry = k.images?.find((i) => i.name === "dpo");
  if (!entry) throw new Error("config/default/kustomization.yaml: no images entry named dpo");
  if (entry.newTag !== version) {
    throw new Error(
      `config/default/kustomization.yaml: images[dpo].newTag is ${entry.newTag}, package.json's version ${version} (make version)`,
    );
  }
  return `${entry.newName}:${entry.newTag}`;
}

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string }[];
  ports?: { name: string; containerPort: number }[];
}

/**
 * config/manager's Deployment as the CSV's install strategy: config/default's image in the container and in
 * DPO_PLUGIN_IMAGE (its `images:` and `replacements:`), and the webhook served from the certificate OLM
 * mounts (as the cert-manager component does with its own), which leaves the CRD's caBundle to OLM.
 */
function operatorDeployment(
  repoRoot: string,
  image: string,
): { spec: Obj; labels: Record<string, string>; webhookPort: number } {
  const deployment = readObjects(repoRoot, "config/manager/deployment.yaml").find(
    (o) => o.kind === "Deployment" && nameOf(o) === OPERATOR_DEPLOYMENT,
  );
  if (!deployment) throw new Error(`config/manager/deployment.yaml: no Deployment ${OPERATOR_DEPLOYMENT}`);
  const spec = deployment.spec as { template: { spec: { containers: Container[] } } };
  const manager = spec.template.spec.containers.find((c) => c.name === "manager");
  if (!manager) throw new Error("config/manager/deployment.yaml: no container named manager");
  manager.image = image;
  const pluginImage = manager.env?.find((e) => e.name === "DPO_PLUGIN_IMAGE");
  if (!pluginImage)
    throw new Error("config/manager/deployment.yaml: the manager container has no DPO_PLUGIN_IMAGE");
  pluginImage.value = image;
  manager.args = [...(manager.args ?? []), `--webhook-cert-dir=${OLM_WEBHOOK_CERT_DIR}`];
  const webhookPort = manager.ports?.find((p) => p.name === "webhook")?.containerPort;
  if (webhookPort === undefined)
    throw new Error("config/manager/deployment.yaml: the manager container has no port named webhook");
  const labels = { ...(deployment.metadata?.labels as Record<string, string>), ...PART_OF };
  return { spec: deployment.spec as Obj, labels, webhookPort };
}

/** `fooBarBaz` → `Foo Bar Baz`. */
function displayName(key: string): string {
  const words = key.replace(/([a-z0-9])([A-Z])/g, "$1 $2");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The first sentence of a schema description, for a descriptor. */
function firstSentence(text: string | undefined): string {
  const t = (text ?? "").trim();
  const end = t.search(/\.(\s|$)/);
  return end === -1 ? t : t.slice(0, end + 1);
}

/** The descriptors of a CRD version: each top-level spec field, and the status's conditions. */
function descriptors(schema: StructuralSchema) {
  const spec = schema.properties?.spec?.properties ?? {};
  const status = schema.properties?.status?.properties ?? {};
  return {
    specDescriptors: Object.entries(spec).map(([path, s]) => ({
      path,
      displayName: displayName(path),
      ...(s.description ? { description: firstSentence(s.description) } : {}),
    })),
    statusDescriptors: status.conditions
      ? [
          {
            path: "conditions",
            displayName: "Conditions",
            description: firstSentence(status.conditions.description),
            "x-descriptors": ["urn:alm:descriptor:io.kubernetes.conditions"],
          },
        ]
      : [],
  };
}

/** Every served version of every CRD, the newest first as the CRDs list them. */
function ownedCrds(crds: readonly CustomResourceDefinition[]) {
  return crds.flatMap((crd) =>
    crd.spec.versions
      .filter((v) => v.served)
      .map((v) => ({
        name: crd.metadata.name,
        version: v.name,
        kind: crd.spec.names.kind,
        displayName: displayName(crd.spec.names.kind),
        description: firstSentence(v.schema.openAPIV3Schema.description),
        ...descriptors(v.schema.openAPIV3Schema),
      })),
  );
}

/** `>=1.30.0-0` → `1.30.0`: the chart's kubeVersion lower bound. */
function minKubeVersion(kubeVersion: string): string {
  const match = /^>=\s*v?(\d+\.\d+\.\d+)/.exec(kubeVersion);
  if (!match?.[1])
    throw new Error(`charts/dpo/Chart.yaml: kubeVersion '${kubeVersion}' has no '>=X.Y.Z' lower bound`);
  return match[1];
}

/** The chart's icon URL names a file of this repository (…/main/<path>): that file, embedded. */
function icon(repoRoot: string, url: string): { base64data: string; mediatype: string } {
  const match = /\/main\/(.+\.svg)$/.exec(url);
  if (!match?.[1])
    throw new Error(`charts/dpo/Chart.yaml: icon '${url}' does not name an SVG file of this repository`);
  return {
    base64data: readFileSync(join(repoRoot, match[1])).toString("base64"),
    mediatype: "image/svg+xml",
  };
}

function maintainersOf(chart: ChartMetadata) {
  const maintainers = chart.maintainers ?? [];
  if (maintainers.length === 0)
    throw new Error("charts/dpo/Chart.yaml: maintainers is empty; the CSV needs one");
  return maintainers.map((m, i) => {
    if (!m.email)
      throw new Error(
        `charts/dpo/Chart.yaml: maintainers[${i}].email is missing; a CSV's maintainers need one`,
      );
    return { name: m.name, email: m.email };
  });
}

const LONG_DESCRIPTION = `dpo rolls out kubelet device plugins from one DevicePluginConfig per device type, and watches them:
each config renders a plugin DaemonSet per revision, moves nodes between revisions under a surge budget,
and reports per-node registration and device health in its status and in DeviceNodeStates.

On OpenShift the plugin pods need the SecurityContextConstraints dpo-plugin, which OLM does not install:
apply config/components/openshift/security_context_constraints.yaml once (docs/openshift.md). The
bundle grants the plugin's ServiceAccount \`use\` of it.`;

/** The bundle's metadata/annotations.yaml keys, which the bundle image also carries as labels. */
function bundleAnnotations(): Record<string, string> {
  return {
    "operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
    "operators.operatorframework.io.bundle.manifests.v1": "manifests/",
    "operators.operatorframework.io.bundle.metadata.v1": "metadata/",
    "operators.operatorframework.io.bundle.package.v1": OLM_PACKAGE,
    "operators.operatorframework.io.bundle.channels.v1": OLM_CHANNEL,
    "operators.operatorframework.io.bundle.channel.default.v1": OLM_CHANNEL,
  };
}

function yamlText(value: unknown): string {
  return HEADER + stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** The extra object as the bundle holds it: no namespace (OLM's install namespace), config/default's labels. */
function bundleObject(o: Obj): Obj {
  const { namespace: _namespace, ...metadata } = o.metadata ?? {};
  return { ...o, metadata: { ...metadata, labels: { ...(metadata.labels as object), ...PART_OF } } };
}

function fileNameOf(o: Obj): string {
  const [group, version] = String(o.apiVersion).includes("/")
    ? String(o.apiVersion).split("/")
    : ["", String(o.apiVersion)];
  return `${nameOf(o)}_${group ? `${group}_` : ""}${version}_${String(o.kind).toLowerCase()}.yaml`;
}

/** Repo-relative path → content of every file of the bundle. */
export function renderOlmBundleFiles(repoRoot: string): Map<string, string> {
  const version = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string })
    .version;
  const chart = parseDocument(
    readFileSync(join(repoRoot, "charts/dpo/Chart.yaml"), "utf8"),
  ).toJS() as ChartMetadata;
  const image = operatorImage(repoRoot, version);
  const crds = allCrds();
  const deployment = operatorDeployment(repoRoot, image);
  const rbac = permissionsOf(objectsOf(repoRoot, RBAC_DIRS));
  const samples = objectsOf(repoRoot, ["config/samples"]);
  const maintainers = maintainersOf(chart);
  const conversionCrds = crds.filter((c) => c.spec.conversion?.strategy === "Webhook");
  const webhook = conversionCrds[0]?.spec.conversion?.webhook;
  if (!webhook || !("service" in webhook.clientConfig))
    throw new Error("no CRD converts through a webhook Service");

  const csvName = `${OLM_PACKAGE}.v${version}`;
  const csv = {
    apiVersion: "operators.coreos.com/v1alpha1",
    kind: "ClusterServiceVersion",
    metadata: {
      name: csvName,
      annotations: {
        "alm-examples": JSON.stringify(samples, null, 2),
        capabilities: "Seamless Upgrades",
        categories: "AI/Machine Learning",
        containerImage: image,
        description: chart.description,
        repository: chart.sources?.[0] ?? chart.home,
        support: maintainers[0]?.name ?? "",
        "operators.operatorframework.io/suggested-namespace": "dpo-system",
        // Written by the plugins, read by the operator and kubectl dpo: the console lists no form for them.
        "operators.operatorframework.io/internal-objects": JSON.stringify(
          crds.filter((c) => c.spec.names.kind === "DeviceNodeState").map((c) => c.metadata.name),
        ),
      },
      labels: { ...PART_OF },
    },
    spec: {
      displayName: "dpo device-plugin operator",
      description: LONG_DESCRIPTION,
      version,
      minKubeVersion: minKubeVersion(chart.kubeVersion),
      maturity: "alpha",
      keywords: chart.keywords ?? [],
      links: [
        { name: "Home", url: chart.home },
        ...(chart.sources ?? []).map((url) => ({ name: "Source", url })),
      ],
      maintainers,
      provider: {
        name: chart.maintainers?.[0]?.name,
        ...(chart.maintainers?.[0]?.url ? { url: chart.maintainers[0].url } : {}),
      },
      icon: [icon(repoRoot, chart.icon)],
      installModes: [
        { type: "OwnNamespace", supported: false },
        { type: "SingleNamespace", supported: false },
        { type: "MultiNamespace", supported: false },
        // The configs are cluster-scoped and the plugins run on every targeted node: one operator per cluster.
        { type: "AllNamespaces", supported: true },
      ],
      customresourcedefinitions: { owned: ownedCrds(crds) },
      install: {
        strategy: "deployment",
        spec: {
          ...rbac,
          deployments: [{ name: OPERATOR_DEPLOYMENT, label: deployment.labels, spec: deployment.spec }],
        },
      },
      webhookdefinitions: [
        {
          type: "ConversionWebhook",
          generateName: `c${conversionCrds.map((c) => c.metadata.name).join("-")}`.slice(0, 63),
          deploymentName: OPERATOR_DEPLOYMENT,
          containerPort: webhook.clientConfig.service.port,
          targetPort: deployment.webhookPort,
          webhookPath: webhook.clientConfig.service.path,
          admissionReviewVersions: webhook.conversionReviewVersions,
          sideEffects: "None",
          conversionCRDs: conversionCrds.map((c) => c.metadata.name),
        },
      ],
      relatedImages: [{ name: "dpo", image }],
    },
  };

  const files = new Map<string, string>();
  files.set(`${BUNDLE_MANIFESTS_DIR}/${OLM_PACKAGE}.clusterserviceversion.yaml`, yamlText(csv));
  for (const crd of crds)
    files.set(`${BUNDLE_MANIFESTS_DIR}/${crdFileName(crd)}`, HEADER + renderCrdYaml(crd));
  for (const { file, kind } of EXTRA_OBJECTS) {
    for (const o of readObjects(repoRoot, file).filter((x) => x.kind === kind)) {
      files.set(`${BUNDLE_MANIFESTS_DIR}/${fileNameOf(o)}`, yamlText(bundleObject(o)));
    }
  }
  const annotations = bundleAnnotations();
  files.set(`${BUNDLE_METADATA_DIR}/annotations.yaml`, yamlText({ annotations }));
  files.set(
    `${BUNDLE_DIR}/bundle.Dockerfile`,
    [
      HEADER.trimEnd(),
      "# The bundle image: `docker build -f bundle/bundle.Dockerfile bundle/`; its labels are metadata/annotations.yaml's.",
      "FROM scratch",
      ...Object.entries(annotations).map(([k, v]) => `LABEL ${k}=${v}`),
      "COPY manifests /manifests/",
      "COPY metadata /metadata/",
      "",
    ].join("\n"),
  );
  return files;
}
