// Installs dpo's CRDs, namespace and RBAC from config/default into a cluster, as `kubectl apply -k` would,
// minus the operator Deployment: tests, the demo and benchmarks run the operator as a local process.
import { join } from "node:path";
import { parseAllDocuments } from "yaml";

/** Runs the real kubectl against the target cluster; `input` goes to its standard input. */
export type KubectlRunner = (args: string[], input?: string) => Promise<string>;

const repo = join(import.meta.dirname, "..", "..");

export async function installDpo(kubectl: KubectlRunner): Promise<void> {
  const rendered = await kubectl(["kustomize", join(repo, "config", "default")]);
  const docs = parseAllDocuments(rendered)
    .map((d) => d.toJS() as { kind?: string } | null)
    .filter((d): d is { kind: string } => !!d && d.kind !== "Deployment");
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
