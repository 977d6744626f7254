// Helpers for tests against the cluster from the global setup: clients, kubectl, unique names, waiting.
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  type V1ConfigMap,
  type V1DaemonSet,
} from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { inject } from "vitest";
import type { ProvidedCluster } from "./provided-context.js";
import { clusterOfThisWorker } from "./worker-cluster.js";

export { waitFor, type WaitOptions } from "../../tools/cluster/wait.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { withBearerToken } from "../../tools/cluster/kubeconfig.js";
import { replaceClientConfig, waitForDpoCrds } from "../../tools/cluster/install-dpo.js";
import { CONVERSION_SERVICE, DEVICE_PLUGIN_CONFIG_CRD_NAME } from "../../src/api/crd.js";
export {
  NODE_INDEX_LABEL,
  SIMULATED_NODE_LABEL,
  SIMULATED_NODE_SELECTOR,
  TEST_FEATURE_LABEL,
  ZONE_LABEL,
} from "../../tools/cluster/cluster.js";

export interface InjectedCluster {
  kubeconfigPath: string;
  binDir: string;
  kubernetesVersion: string;
  nodeNames: string[];
  /** Empty when the run reuses a cluster it did not start (it cannot restart that one's components). */
  stateDir: string;
}

function thisWorkersCluster(): ProvidedCluster {
  return clusterOfThisWorker(inject("clusters"), process.env.VITEST_POOL_ID);
}

export function injectedCluster(): InjectedCluster {
  const cluster = thisWorkersCluster();
  return {
    kubeconfigPath: cluster.kubeconfig,
    binDir: inject("clusterBinDir"),
    kubernetesVersion: inject("clusterKubernetesVersion"),
    nodeNames: cluster.nodeNames,
    stateDir: cluster.stateDir,
  };
}

/** An admin KubeConfig for the cluster under test. */
export function kubeConfigFromInjected(): KubeConfig {
  const kubeconfig = new KubeConfig();
  kubeconfig.loadFromFile(thisWorkersCluster().kubeconfig);
  return kubeconfig;
}

/** A KubeConfig for the same API server that authenticates with a bearer token instead. */
export function kubeConfigWithToken(token: string): KubeConfig {
  return withBearerToken(kubeConfigFromInjected(), token);
}

/** A DNS-1123 label, unique per call, so tests never collide even on a reused cluster. */
export function uniqueName(prefix: string): string {
  const suffix = randomBytes(4).toString("hex");
  return `${prefix
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .slice(0, 63 - suffix.length - 1)}-${suffix}`;
}

/** The HTTP status of a failed client-node call, or undefined for other errors. */
export function apiStatusCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

export interface KubectlResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface KubectlOptions {
  /** Written to kubectl's stdin (e.g. a manifest for `apply -f -`). */
  input?: string;
  /** Return a non-zero exit instead of throwing (e.g. `auth can-i` answers "no" with exit code 1). */
  allowFailure?: boolean;
}

/** Runs the built kubectl against the cluster under test. */
export async function kubectl(args: string[], options: KubectlOptions = {}): Promise<KubectlResult> {
  const executable = join(inject("clusterBinDir"), "kubectl");
  const fullArgs = [`--kubeconfig=${thisWorkersCluster().kubeconfig}`, ...args];
  const result = await new Promise<KubectlResult>((resolve, reject) => {
    const child = execFile(executable, fullArgs, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") {
        reject(new Error(`cannot run ${executable}: ${error.message}`, { cause: error }));
        return;
      }
      resolve({ stdout, stderr, exitCode: typeof error?.code === "number" ? error.code : 0 });
    });
    // A kubectl that reads no stdin may exit before this write lands (EPIPE); its exit code and stderr
    // already say what happened, so the pipe error must not become an uncaught exception.
    child.stdin?.on("error", () => undefined);
    child.stdin?.end(options.input ?? "");
  });
  if (result.exitCode !== 0 && !options.allowFailure) {
    throw new Error(`kubectl ${args.join(" ")} exited with ${result.exitCode}: ${result.stderr.trim()}`);
  }
  return result;
}

/**
 * Applies the generated CRDs from crds/ with server-side apply and waits until both are Established.
 * Idempotent: files of one run share the CRDs.
 */
export async function installCrds(fieldManager: string): Promise<void> {
  const crdDir = join(import.meta.dirname, "..", "..", "crds");
  // An earlier test may have pointed the conversion webhook at a URL; the files name the Service.
  await replaceClientConfig(async (args) => (await kubectl(args)).stdout, DEVICE_PLUGIN_CONFIG_CRD_NAME, {
    service: { ...CONVERSION_SERVICE },
  });
  for (const file of readdirSync(crdDir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")) {
    await kubectl([
      "apply",
      "--server-side",
      "--force-conflicts",
      `--field-manager=${fieldManager}`,
      "-f",
      join(crdDir, file),
    ]);
  }
  await waitForDpoCrds(async (args) => (await kubectl(args)).stdout);
}

/**
 * The newest of a config's plugin DaemonSets (one per plugin revision, `dpo-<config>-<revision>`;
 * two while an upgrade moves nodes), or undefined when it has none.
 */
export async function pluginDaemonSet(
  kc: KubeConfig,
  namespace: string,
  configName: string,
): Promise<V1DaemonSet | undefined> {
  const list = await kc
    .makeApiClient(AppsV1Api)
    .listNamespacedDaemonSet({ namespace, labelSelector: `dpo.dev/config=${configName}` });
  return newest(list.items);
}

/** The newest of a config's plugin ConfigMaps (one per plugin revision, named like its DaemonSet). */
export async function pluginConfigMap(
  kc: KubeConfig,
  namespace: string,
  configName: string,
): Promise<V1ConfigMap | undefined> {
  const list = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedConfigMap({ namespace, labelSelector: `dpo.dev/config=${configName}` });
  return newest(list.items);
}

function newest<T extends { metadata?: { creationTimestamp?: Date; name?: string } }>(
  items: T[],
): T | undefined {
  return [...items].sort((a, b) => {
    const ta = a.metadata?.creationTimestamp ? new Date(a.metadata.creationTimestamp).getTime() : 0;
    const tb = b.metadata?.creationTimestamp ? new Date(b.metadata.creationTimestamp).getTime() : 0;
    return tb - ta || ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1);
  })[0];
}

/**
 * Creates a namespace for workload pods and waits for its default ServiceAccount, which a controller
 * creates shortly after and without which the API server refuses pods.
 */
export async function createWorkloadNamespace(core: CoreV1Api, name: string): Promise<void> {
  await core.createNamespace({ body: { metadata: { name } } });
  await waitFor(`the default ServiceAccount of ${name}`, () =>
    core.readNamespacedServiceAccount({ name: "default", namespace: name }).then(
      () => true,
      () => false,
    ),
  );
}
