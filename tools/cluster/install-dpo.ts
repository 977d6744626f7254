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
    if (webhook?.clientConfig && doc.metadata?.name) {
      await replaceClientConfig(kubectl, doc.metadata.name, webhook.clientConfig);
    }
  }
  await kubectl(
    ["apply", "--server-side", "--force-conflicts", "--field-manager=dpo-install", "-f", "-"],
    docs.map((d) => JSON.stringify(d)).join("\n---\n"),
  );
  await waitForDpoCrds(kubectl);
}

/**
 * Sets a CRD's conversion webhook clientConfig as a whole, before an apply: `url` and `service` exclude
 * each other, and a server-side apply that sets one leaves the other in place when another field
 * manager set it (a test, or `make install` then `make deploy`), which the API server refuses. Does
 * nothing when the CRD does not exist yet or converts without a webhook.
 */
export async function replaceClientConfig(
  kubectl: KubectlRunner,
  crd: string,
  clientConfig: unknown,
): Promise<void> {
  let current: {
    spec?: { conversion?: { webhook?: { clientConfig?: { url?: unknown; service?: unknown } } } };
  };
  try {
    current = JSON.parse(await kubectl(["get", `crd/${crd}`, "-o", "json"])) as typeof current;
  } catch (err) {
    if (/NotFound|not found/i.test((err as Error).message)) return;
    throw err;
  }
  const existing = current.spec?.conversion?.webhook?.clientConfig;
  if (existing === undefined) return;
  const { url, service } = existing;
  if (JSON.stringify({ url, service }) === JSON.stringify({ ...(clientConfig as object) })) return;
  const patch = JSON.stringify([
    { op: "replace", path: "/spec/conversion/webhook/clientConfig", value: clientConfig },
  ]);
  await kubectl(["patch", `crd/${crd}`, "--type=json", "-p", patch]);
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
