// What the chart's tests share: the helm built next to kubectl, `helm template` of charts/dpo parsed into
// objects, `kubectl kustomize` of config/, and finding an object or the operator's container among them.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { V1Deployment } from "@kubernetes/client-node";
import { afterAll, beforeAll } from "vitest";
import { parseAllDocuments } from "yaml";
import { objectKey, withoutLabels, type KubeObject } from "../../tools/manifests/compare.js";
import { injectedCluster, kubectl, type KubectlResult } from "../cluster/helpers.js";

export const repoRoot = join(import.meta.dirname, "..", "..");
export const chartDir = join(repoRoot, "charts", "dpo");
export const configDir = join(repoRoot, "config");
/** The namespace config/ installs into; the chart renders into the release's, this one in the comparisons. */
export const CONFIG_NAMESPACE = "dpo-system";
/** The release the rendering tests template. */
export const RELEASE = "dpo-chart-test";

/**
 * The labels Helm adds and kustomize does not: which chart rendered an object, and that Helm manages it.
 * The comparison with config/ ignores these and nothing else.
 */
export const HELM_OWN_LABELS = ["helm.sh/chart", "app.kubernetes.io/managed-by"] as const;

let helmHome = "";

/** Gives the calling test file a helm home of its own (config, cache, data), removed after it. */
export function useHelmHome(): void {
  beforeAll(async () => {
    helmHome = await mkdtemp(join(tmpdir(), "dpo-helm-home-"));
  });
  afterAll(async () => {
    if (helmHome !== "") await rm(helmHome, { recursive: true, force: true });
    helmHome = "";
  });
}

/** Runs the helm built next to kubectl, with its config, cache and data in a directory of this run. */
export async function helm(args: string[], options: { allowFailure?: boolean } = {}): Promise<KubectlResult> {
  if (helmHome === "") throw new Error("helm() outside a file that called useHelmHome()");
  const executable = join(injectedCluster().binDir, "helm");
  const env = {
    ...process.env,
    HELM_CONFIG_HOME: join(helmHome, "config"),
    HELM_CACHE_HOME: join(helmHome, "cache"),
    HELM_DATA_HOME: join(helmHome, "data"),
  };
  const result = await new Promise<KubectlResult>((resolve, reject) => {
    execFile(executable, args, { env, timeout: 180_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") {
        reject(new Error(`cannot run ${executable}: ${error.message}`, { cause: error }));
        return;
      }
      resolve({ stdout, stderr, exitCode: typeof error?.code === "number" ? error.code : 0 });
    });
  });
  if (result.exitCode !== 0 && !options.allowFailure) {
    throw new Error(`helm ${args.join(" ")} exited with ${result.exitCode}: ${result.stderr.trim()}`);
  }
  return result;
}

/** Cluster flags for helm: the test cluster's admin kubeconfig, never $KUBECONFIG. */
export function onCluster(): string[] {
  return ["--kubeconfig", injectedCluster().kubeconfigPath];
}

export function parseObjects(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

/**
 * `helm template` of the chart, CRDs and hooks included, with `--set` values, into `namespace` (by default
 * config/'s, for the comparisons with kustomize).
 */
export async function renderChart(
  values: string[] = [],
  namespace = CONFIG_NAMESPACE,
): Promise<{ text: string; objects: KubeObject[] }> {
  const sets = values.flatMap((value) => ["--set", value]);
  const { stdout } = await helm([
    "template",
    RELEASE,
    chartDir,
    "--namespace",
    namespace,
    "--include-crds",
    ...sets,
  ]);
  return { text: stdout, objects: parseObjects(stdout) };
}

export async function renderKustomize(dir: string): Promise<KubeObject[]> {
  return parseObjects((await kubectl(["kustomize", dir])).stdout);
}

export function withoutHelmLabels(objects: KubeObject[]): KubeObject[] {
  return objects.map((object) => withoutLabels(object, HELM_OWN_LABELS));
}

export function find<T>(objects: KubeObject[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} among ${objects.map(objectKey).join(", ")}`);
  return found as T;
}

export function managerContainer(objects: KubeObject[]) {
  const deployment = find<V1Deployment>(objects, "Deployment", "dpo-operator");
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === "manager");
  if (!container) throw new Error("the operator Deployment has no 'manager' container");
  return { deployment, container };
}
