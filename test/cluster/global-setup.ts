// Vitest global setup for the cluster project: one real control plane per worker of the run (DPO_TEST_CLUSTERS
// in vitest.config.ts), or the one named by DPO_TEST_KUBECONFIG.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pino } from "pino";
import type { TestProject } from "vitest/node";
import {
  buildOrReuseBinaries,
  readPinnedVersions,
  SIMULATED_NODE_SELECTOR,
  startCluster,
} from "../../tools/cluster/cluster.js";
import { AUDIT_CLUSTER_TIER } from "../../tools/cluster/audit.js";
import { providedCluster } from "./provided-context.js";

/** Simulated nodes; most files expect 3, full-size runs of one file (make chaos-upgrade) set more. */
const NODES = Number(process.env.DPO_TEST_NODES ?? "3");

/**
 * A dedicated variable, not KUBECONFIG, so tests never run against a developer's real cluster by
 * accident. Point it at `.local/cluster/kubeconfig` to reuse a cluster from `make cluster-up`.
 */
const REUSE_KUBECONFIG_ENV = "DPO_TEST_KUBECONFIG";
/** Set to keep the state directory (logs, etcd data) of the cluster this setup started. */
const KEEP_STATE_ENV = "DPO_TEST_KEEP_CLUSTER_STATE";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = pino({ level: process.env.DPO_CLUSTER_LOG_LEVEL ?? "warn" }, pino.destination(2));
  const binDir = process.env.DPO_CLUSTER_BIN_DIR ?? (await buildOrReuseBinaries());
  const versions = await readPinnedVersions();
  project.provide("clusterBinDir", binDir);
  project.provide("clusterKubernetesVersion", versions.kubernetes);
  // One cluster per worker (vitest.config.ts: DPO_TEST_CLUSTERS): files run at once never share one.
  const count = project.config.maxWorkers;

  const reused = process.env[REUSE_KUBECONFIG_ENV];
  if (reused) {
    if (count !== 1) {
      throw new Error(
        `${REUSE_KUBECONFIG_ENV} names one cluster, but the project runs ${count} files at once`,
      );
    }
    const kubeconfigPath = resolve(reused);
    project.provide("clusters", [
      { kubeconfig: kubeconfigPath, stateDir: "", nodeNames: await simulatedNodeNames(kubeconfigPath) },
    ]);
    log.info({ kubeconfig: kubeconfigPath }, "reusing a running cluster");
    return () => Promise.resolve();
  }

  const started = await Promise.allSettled(
    Array.from({ length: count }, async () => {
      const stateDir = await mkdtemp(join(tmpdir(), "dpo-test-cluster-"));
      try {
        const cluster = await startCluster({
          nodes: NODES,
          stateDir,
          binDir,
          log,
          kubeletSimulator: true,
          // Status writes timed as the API server received them (test/e2e/operator-scale.test.ts), and every
          // write of the operator by replica (test/e2e/leader-fence.test.ts).
          auditPolicy: AUDIT_CLUSTER_TIER,
        });
        log.info({ ms: cluster.startupMs, stateDir }, "test cluster started");
        return { cluster, stateDir };
      } catch (error) {
        await rm(stateDir, { recursive: true, force: true });
        throw error;
      }
    }),
  );
  const clusters = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const stopAll = async (): Promise<void> => {
    for (const { cluster, stateDir } of clusters) {
      await cluster.stop();
      if (process.env[KEEP_STATE_ENV]) {
        log.warn({ stateDir }, "cluster state kept");
      } else {
        await rm(stateDir, { recursive: true, force: true });
      }
    }
  };
  const failed = started.find((result) => result.status === "rejected");
  if (failed !== undefined) {
    await stopAll();
    throw failed.reason;
  }
  project.provide(
    "clusters",
    clusters.map(({ cluster, stateDir }) => providedCluster(cluster, stateDir)),
  );
  return stopAll;
}

async function simulatedNodeNames(kubeconfigPath: string): Promise<string[]> {
  const kubeconfig = new KubeConfig();
  kubeconfig.loadFromFile(kubeconfigPath);
  const nodes = await kubeconfig
    .makeApiClient(CoreV1Api)
    .listNode({ labelSelector: SIMULATED_NODE_SELECTOR });
  const names = nodes.items.map((node) => node.metadata?.name ?? "").filter((name) => name !== "");
  if (names.length === 0) {
    throw new Error(
      `${REUSE_KUBECONFIG_ENV}=${kubeconfigPath}: the cluster has no nodes labelled ${SIMULATED_NODE_SELECTOR}`,
    );
  }
  return names.sort();
}
