// The generated manifests of the repository (the CRDs, the kustomizations that point at them, the Helm chart's
// generated templates, the OLM bundle), as repo-relative path → content.
import { resolve } from "node:path";
import { allCrds, crdFileName, renderCrdYaml } from "../../src/api/crd.js";
import { CHART_GENERATED_TEMPLATE_DIR, renderChartFiles } from "./chart.js";
import { BUNDLE_MANIFESTS_DIR, BUNDLE_METADATA_DIR, renderOlmBundleFiles } from "./olm.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");

export const GENERATED_HEADER =
  "# Generated from the zod schemas in src/api by `make manifests`; do not edit.\n";

/**
 * The one committed copy of the CRDs. kustomize reads it through config/crd (a kustomization may name another
 * kustomization's directory anywhere, but no file outside its own), the chart through its crds/ symlink.
 */
export const CRD_DIR = "crds";
export const KUSTOMIZE_CRD_DIR = "config/crd";

/** Directories whose YAML files are all generated: anything else found there is stale. */
export const GENERATED_DIRS = [
  CRD_DIR,
  CHART_GENERATED_TEMPLATE_DIR,
  BUNDLE_MANIFESTS_DIR,
  BUNDLE_METADATA_DIR,
] as const;

function kustomization(resources: string[]): string {
  return [
    GENERATED_HEADER.trimEnd(),
    "apiVersion: kustomize.config.k8s.io/v1beta1",
    "kind: Kustomization",
    "resources:",
    ...resources.map((resource) => `  - ${resource}`),
    "",
  ].join("\n");
}

export function renderManifestFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const names: string[] = [];
  for (const crd of allCrds()) {
    const name = crdFileName(crd);
    files.set(`${CRD_DIR}/${name}`, GENERATED_HEADER + renderCrdYaml(crd));
    names.push(name);
  }
  files.set(`${CRD_DIR}/kustomization.yaml`, kustomization(names));
  files.set(`${KUSTOMIZE_CRD_DIR}/kustomization.yaml`, kustomization([`../../${CRD_DIR}`]));
  for (const [path, text] of renderChartFiles(repoRoot)) files.set(path, text);
  // The OLM bundle (tools/manifests/olm.ts), from the same CRDs and config/ files.
  for (const [path, text] of renderOlmBundleFiles(repoRoot)) files.set(path, text);
  return files;
}
