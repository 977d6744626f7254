// Helpers for the manifest tests: config/ rendered by kustomize, objects found by kind and name, the operator's
// Deployment and manager container, and config/'s CRDs applied and established.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { V1Deployment } from "@kubernetes/client-node";
import { SERVICE_CLIENT_CONFIG, setClientConfig } from "../cluster/conversion-webhook.js";
import { parseAllDocuments } from "yaml";
import { kubectl, waitFor } from "../cluster/helpers.js";

export const repoRoot = join(import.meta.dirname, "..", "..");
export const configDir = join(repoRoot, "config");
export const FIELD_MANAGER = "dpo-manifests-test";
export const OPERATOR_NAMESPACE = "dpo-system";
export const packageVersion = (
  JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}

export function parseObjects(yamlText: string): KubeObject[] {
  return parseAllDocuments(yamlText)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((obj): obj is KubeObject => obj !== null);
}

export async function render(dir: string): Promise<KubeObject[]> {
  return parseObjects((await kubectl(["kustomize", dir])).stdout);
}

/** config/crd applied for real, after putting the webhook's clientConfig back to what it names. */
export async function applyConfigCrds(): Promise<void> {
  await setClientConfig(SERVICE_CLIENT_CONFIG);
  await kubectl([
    "apply",
    "--server-side",
    "--force-conflicts",
    `--field-manager=${FIELD_MANAGER}`,
    "-k",
    join(configDir, "crd"),
  ]);
}

export function find<T>(objects: KubeObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) {
    throw new Error(
      `no ${kind}/${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`,
    );
  }
  return found as T;
}

export function operatorDeployment(objects: KubeObject[]): V1Deployment {
  return find<V1Deployment>(objects, "Deployment", "dpo-operator");
}

export function managerContainer(deployment: V1Deployment) {
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === "manager");
  if (!container) throw new Error("the operator Deployment has no 'manager' container");
  return container;
}

export async function waitForCrdsEstablished(): Promise<void> {
  for (const name of ["devicepluginconfigs.dpo.dev", "devicenodestates.dpo.dev"]) {
    await waitFor(`CRD ${name} Established`, async (observe) => {
      const { stdout } = await kubectl([
        "get",
        "crd",
        name,
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Established')].status}",
      ]);
      observe(stdout);
      return stdout === "True";
    });
  }
}
