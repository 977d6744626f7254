// The generated manifests of the repository (CRDs, their kustomization, the Helm chart's generated parts), as
// repo-relative path → content.
import { resolve } from "node:path";
import { allCrds, crdFileName, renderCrdYaml } from "../../src/api/crd.js";
import { CHART_CRD_DIR, CHART_GENERATED_TEMPLATE_DIR, renderChartFiles } from "./chart.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");

export const GENERATED_HEADER =
  "# Generated from the zod schemas in src/api by `make manifests`; do not edit.\n";

/** The one committed copy of the CRDs, where kubebuilder projects keep them and config/default reads them. */
export const KUSTOMIZE_CRD_DIR = "config/crd";
export const CRD_DIR = `${KUSTOMIZE_CRD_DIR}/bases`;

/** Directories whose YAML files are all generated: anything else found there is stale. */
export const GENERATED_DIRS = [CRD_DIR, CHART_CRD_DIR, CHART_GENERATED_TEMPLATE_DIR] as const;

export function renderManifestFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const names: string[] = [];
  for (const crd of allCrds()) {
    const name = crdFileName(crd);
    const text = GENERATED_HEADER + renderCrdYaml(crd);
    files.set(`${CRD_DIR}/${name}`, text);
    names.push(name);
  }
  const kustomization = [
    GENERATED_HEADER.trimEnd(),
    "apiVersion: kustomize.config.k8s.io/v1beta1",
    "kind: Kustomization",
    "resources:",
    ...names.map((name) => `  - bases/${name}`),
    "",
  ].join("\n");
  files.set(`${KUSTOMIZE_CRD_DIR}/kustomization.yaml`, kustomization);
  for (const [path, text] of renderChartFiles(repoRoot, GENERATED_HEADER)) files.set(path, text);
  return files;
}
