// The generated manifests of the repository (CRDs and their kustomization), as repo-relative path → content.
import { allCrds, crdFileName, renderCrdYaml } from "../../src/api/crd.js";

export const GENERATED_HEADER =
  "# Generated from the zod schemas in src/api by `make manifests`; do not edit.\n";

/** The one committed copy of the CRDs, where kubebuilder projects keep them and config/default reads them. */
export const KUSTOMIZE_CRD_DIR = "config/crd";
export const CRD_DIR = `${KUSTOMIZE_CRD_DIR}/bases`;

/** Directories whose YAML files are all generated: anything else found there is stale. */
export const GENERATED_DIRS = [CRD_DIR] as const;

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
  return files;
}
