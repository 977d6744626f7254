// The OLM bundle (bundle/, tools/manifests/olm.ts) as the operator framework's own validators judge it
// (tools/olm-validate: github.com/operator-framework/api, what operator-sdk's `bundle validate` runs), what
// its CSV takes from the sources the chart and kustomize are written from, and bundles made worse on
// purpose, which the validators must refuse.
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse, parseDocument, stringify } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allCrds } from "../../../../src/api/crd.js";
import {
  BUNDLE_DIR,
  BUNDLE_MANIFESTS_DIR,
  OLM_WEBHOOK_CERT_DIR,
  permissionsOf,
  renderOlmBundleFiles,
} from "../../../../tools/manifests/olm.js";
import { buildOlmValidate, olmValidate, type OlmFinding } from "../../../../tools/olm-validate/harness.js";

const repoRoot = resolve(import.meta.dirname, "..", "..", "..", "..");
const CSV_FILE = "dpo.clusterserviceversion.yaml";
const VERSION = (JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string })
  .version;
/** The CSV's name: the package and package.json's version. */
const CSV_NAME = `dpo.v${VERSION}`;
/** The pinned Kubernetes minor (tools/cluster/versions.env): APIs it removed are errors. */
const K8S_VERSION = /^KUBERNETES_VERSION=v(\d+\.\d+)/m.exec(
  readFileSync(join(repoRoot, "tools/cluster/versions.env"), "utf8"),
)?.[1];

/**
 * The warnings the bundle is known to get, each for a reason the project accepts; any other warning fails.
 * - DevicePluginConfig v1alpha1 has no example: config/samples are v1beta1, and v1alpha1 is served only for
 *   configs written before it (conversion webhook, storage migration).
 * - DeviceNodeState has no example: the plugins write them (listed as internal-objects).
 * - The operator patches its own CRD, by name: the storage-version migration and, without OLM, the
 *   conversion webhook's caBundle (config/rbac/operator_cluster_role.yaml).
 */
const KNOWN_WARNINGS = [
  "ClusterServiceVersion dpo.dev/v1alpha1, Kind=DevicePluginConfig: provided API should have an example annotation",
  "ClusterServiceVersion dpo.dev/v1beta1, Kind=DeviceNodeState: provided API should have an example annotation",
  `GoodPractices ${CSV_NAME}: CSV contains permissions to create CRD.`,
];

function summary(f: OlmFinding): string {
  const detail = f.detail.startsWith("CSV contains permissions to create CRD.")
    ? "CSV contains permissions to create CRD."
    : f.detail;
  return `${f.validator} ${f.value ?? f.object}: ${detail}`;
}

type Csv = {
  metadata: { name: string; annotations: Record<string, string> };
  spec: Record<string, unknown> & {
    version: string;
    minKubeVersion: string;
    installModes: { type: string; supported: boolean }[];
    customresourcedefinitions: { owned: { name: string; version: string; kind: string }[] };
    install: {
      spec: {
        permissions: {
          serviceAccountName: string;
          rules: { resources?: string[]; resourceNames?: string[]; verbs: string[] }[];
        }[];
        clusterPermissions: {
          serviceAccountName: string;
          rules: { resources?: string[]; resourceNames?: string[]; verbs: string[] }[];
        }[];
        deployments: {
          name: string;
          spec: {
            template: {
              spec: {
                serviceAccountName: string;
                containers: { name: string; image: string; args: string[] }[];
              };
            };
          };
        }[];
      };
    };
    webhookdefinitions: { type: string; conversionCRDs: string[]; targetPort: number }[];
    relatedImages: { name: string; image: string }[];
  };
};

function readCsv(dir: string): Csv {
  return parse(readFileSync(join(dir, "manifests", CSV_FILE), "utf8")) as Csv;
}

let binary: string;
const scratch: string[] = [];
beforeAll(async () => {
  binary = await buildOlmValidate();
}, 600_000);
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A copy of bundle/ in a temporary directory, changed by `change`, and the validators' verdict on it. */
async function validateCopy(change: (dir: string) => void) {
  const dir = mkdtempSync(join(tmpdir(), "dpo-olm-"));
  scratch.push(dir);
  cpSync(join(repoRoot, BUNDLE_DIR), dir, { recursive: true });
  change(dir);
  return olmValidate(binary, dir, K8S_VERSION!);
}

function editCsv(dir: string, edit: (csv: Csv) => void): void {
  const file = join(dir, "manifests", CSV_FILE);
  const csv = parse(readFileSync(file, "utf8")) as Csv;
  edit(csv);
  writeFileSync(file, stringify(csv));
}

describe("the committed bundle", () => {
  it("is what tools/manifests/olm.ts writes from the sources, and nothing else", () => {
    const files = renderOlmBundleFiles(repoRoot);
    for (const [path, text] of files) expect(readFileSync(join(repoRoot, path), "utf8"), path).toBe(text);
    const onDisk = readdirSync(join(repoRoot, BUNDLE_MANIFESTS_DIR)).map(
      (f) => `${BUNDLE_MANIFESTS_DIR}/${f}`,
    );
    expect(onDisk.filter((f) => !files.has(f))).toEqual([]);
  });

  it("passes the operator framework's validators with no error, and only the known warnings", async () => {
    expect(K8S_VERSION).toMatch(/^1\.\d+$/);
    const result = await olmValidate(binary, join(repoRoot, BUNDLE_DIR), K8S_VERSION!);
    expect(result.stderr).toBe("");
    expect(result.report?.errors).toEqual([]);
    expect(result.code).toBe(0);
    expect(result.report?.warnings.map(summary).sort()).toEqual([...KNOWN_WARNINGS].sort());
    // Every validator ran over the whole bundle: its package and channel from metadata/, every manifest.
    expect(result.report?.validators).toEqual(
      expect.arrayContaining([
        "ClusterServiceVersion",
        "CustomResourceDefinition",
        "Bundle",
        "OperatorHubV2",
        "GoodPractices",
        "Object",
      ]),
    );
    expect(result.report).toMatchObject({
      bundle: CSV_NAME,
      package: "dpo",
      channels: ["candidate"],
      objects: 5,
    });
  });
});

describe("the CSV takes what the chart and kustomize are written from", () => {
  const csv = readCsv(join(repoRoot, BUNDLE_DIR));
  const chart = parseDocument(readFileSync(join(repoRoot, "charts/dpo/Chart.yaml"), "utf8")).toJS() as {
    kubeVersion: string;
    maintainers: { name: string; email: string }[];
  };

  it("package.json's version, the chart's Kubernetes floor and maintainers", () => {
    expect(csv.metadata.name).toBe(`dpo.v${VERSION}`);
    expect(csv.spec.version).toBe(VERSION);
    expect(chart.kubeVersion).toContain(csv.spec.minKubeVersion);
    expect(csv.spec.maintainers).toEqual(chart.maintainers.map((m) => ({ name: m.name, email: m.email })));
  });

  it("owns every served version of every CRD, and installs in AllNamespaces mode only", () => {
    const served = allCrds().flatMap((crd) =>
      crd.spec.versions
        .filter((v) => v.served)
        .map((v) => `${crd.metadata.name} ${v.name} ${crd.spec.names.kind}`),
    );
    expect(served).toContain("devicepluginconfigs.dpo.dev v1alpha1 DevicePluginConfig");
    expect(served).toContain("devicepluginconfigs.dpo.dev v1beta1 DevicePluginConfig");
    expect(
      csv.spec.customresourcedefinitions.owned.map((o) => `${o.name} ${o.version} ${o.kind}`).sort(),
    ).toEqual(served.sort());
    expect(csv.spec.installModes.filter((m) => m.supported).map((m) => m.type)).toEqual(["AllNamespaces"]);
  });

  it("alm-examples are config/samples, each a v1beta1 DevicePluginConfig", () => {
    const examples = JSON.parse(csv.metadata.annotations["alm-examples"]!) as {
      kind: string;
      apiVersion: string;
      metadata: { name: string };
    }[];
    const sampleFiles = (
      parse(readFileSync(join(repoRoot, "config/samples/kustomization.yaml"), "utf8")) as {
        resources: string[];
      }
    ).resources;
    expect(examples.map((e) => e.metadata.name)).toHaveLength(sampleFiles.length);
    expect(new Set(examples.map((e) => `${e.apiVersion} ${e.kind}`))).toEqual(
      new Set(["dpo.dev/v1beta1 DevicePluginConfig"]),
    );
  });

  it("the operator Deployment runs the related image and serves the conversion webhook with OLM's certificate", () => {
    const [deployment] = csv.spec.install.spec.deployments;
    const manager = deployment!.spec.template.spec.containers.find((c) => c.name === "manager")!;
    expect(csv.spec.relatedImages.map((i) => i.image)).toEqual([manager.image]);
    expect(manager.image).toBe(`ghcr.io/dpo-dev/dpo:${VERSION}`);
    expect(manager.args).toContain(`--webhook-cert-dir=${OLM_WEBHOOK_CERT_DIR}`);
    expect(csv.spec.webhookdefinitions).toMatchObject([
      { type: "ConversionWebhook", conversionCRDs: ["devicepluginconfigs.dpo.dev"], targetPort: 9443 },
    ]);
  });

  it("RBAC: the operator's and the plugin's rules of config/rbac, and `use` of their SCCs", () => {
    const accounts = (list: { serviceAccountName: string }[]) => list.map((p) => p.serviceAccountName).sort();
    expect(accounts(csv.spec.install.spec.permissions)).toEqual(["dpo-operator", "dpo-plugin"]);
    expect(accounts(csv.spec.install.spec.clusterPermissions)).toEqual(["dpo-operator", "dpo-plugin"]);
    const sccUse = (account: string) =>
      csv.spec.install.spec.clusterPermissions
        .find((p) => p.serviceAccountName === account)!
        .rules.filter((r) => r.resources?.includes("securitycontextconstraints"));
    expect(sccUse("dpo-plugin")).toEqual([
      {
        apiGroups: ["security.openshift.io"],
        resources: ["securitycontextconstraints"],
        resourceNames: ["dpo-plugin"],
        verbs: ["use"],
      },
    ]);
    expect(sccUse("dpo-operator")).toMatchObject([{ resourceNames: ["nonroot-v2"], verbs: ["use"] }]);
  });

  it("a binding whose role is not among the sources is an error naming both", () => {
    expect(() =>
      permissionsOf([
        {
          kind: "RoleBinding",
          metadata: { name: "b" },
          roleRef: { kind: "Role", name: "missing" },
          subjects: [{ kind: "ServiceAccount", name: "sa" }],
        },
      ]),
    ).toThrow(/RoleBinding b: its Role missing is not in/);
  });
});

describe("bundles made worse are refused by the validators", () => {
  function errorDetails(findings: OlmFinding[] | undefined): string[] {
    return (findings ?? []).map((f) => f.detail);
  }

  it("a CSV owning a CRD the bundle lacks", async () => {
    const result = await validateCopy((dir) =>
      unlinkSync(join(dir, "manifests", "dpo.dev_devicenodestates.yaml")),
    );
    expect(result.code).toBe(1);
    expect(errorDetails(result.report?.errors)).toContainEqual(
      `owned CRD "dpo.dev/v1beta1, Kind=DeviceNodeState" not found in bundle "${CSV_NAME}"`,
    );
  });

  it("an example of a kind the CSV does not own", async () => {
    const result = await validateCopy((dir) =>
      editCsv(dir, (csv) => {
        const examples = JSON.parse(csv.metadata.annotations["alm-examples"]!) as { kind: string }[];
        examples[0]!.kind = "DevicePluginConfigz";
        csv.metadata.annotations["alm-examples"] = JSON.stringify(examples);
      }),
    );
    expect(result.code).toBe(1);
    expect(errorDetails(result.report?.errors)).toContain("example must have a provided API");
  });

  it("a conversion webhook with an install mode other than AllNamespaces", async () => {
    const result = await validateCopy((dir) =>
      editCsv(dir, (csv) => {
        csv.spec.installModes = csv.spec.installModes.map((m) => ({
          ...m,
          supported: m.type === "OwnNamespace",
        }));
      }),
    );
    expect(result.code).toBe(1);
    expect(errorDetails(result.report?.errors)).toContain(
      `(${CSV_NAME}) only AllNamespaces InstallModeType is supported when conversionCRDs is present`,
    );
  });

  it("a maintainer without an email (OperatorHub)", async () => {
    const result = await validateCopy((dir) =>
      editCsv(dir, (csv) => {
        csv.spec.maintainers = [{ name: "dpo-dev" }];
      }),
    );
    expect(result.code).toBe(1);
    expect(errorDetails(result.report?.errors)).toContainEqual(
      expect.stringContaining("csv.Spec.Maintainers elements should contain both name and email"),
    );
  });
});
