// Installs dpo's CRDs, namespace and RBAC from config/default into a cluster, as `kubectl apply -k` would,
// minus the operator Deployment: tests, the demo and benchmarks run the operator as a local process.
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

/** Runs the real kubectl against the target cluster; `input` goes to its standard input. */
export type KubectlRunner = (args: string[], input?: string) => Promise<string>;

const repo = join(import.meta.dirname, "..", "..");

export interface InstallOptions {
  /**
   * Where the API server calls the conversion webhook, for an operator running on this machine (the
   * local API server cannot reach the dpo-webhook Service): e.g. `https://127.0.0.1:9443/convert`.
   */
  conversionUrl?: string;
}

interface RenderedObject {
  kind: string;
  metadata?: { name?: string };
  spec?: { conversion?: { webhook?: { clientConfig?: unknown } } };
}

export async function installDpo(kubectl: KubectlRunner, options: InstallOptions = {}): Promise<void> {
  const rendered = await kubectl(["kustomize", join(repo, "config", "default")]);
  const docs = parseAllDocuments(rendered)
    .map((d) => d.toJS() as RenderedObject | null)
    .filter((d): d is RenderedObject => !!d && d.kind !== "Deployment");
  for (const doc of docs) {
    const webhook = doc.kind === "CustomResourceDefinition" ? doc.spec?.conversion?.webhook : undefined;
    if (webhook && options.conversionUrl) webhook.clientConfig = { url: options.conversionUrl };
  }
  await kubectl(
    ["apply", "--server-side", "--force-conflicts", "--field-manager=dpo-install", "-f", "-"],
    docs.map((d) => JSON.stringify(d)).join("\n---\n"),
  );
  await waitForDpoCrds(kubectl);
}

/** Resolves once both dpo.dev CRDs are Established (the API server serves them). */
export async function waitForDpoCrds(kubectl: KubectlRunner): Promise<void> {
  await kubectl([
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    "crd/devicepluginconfigs.dpo.dev",
    "crd/devicenodestates.dpo.dev",
  ]);
}
