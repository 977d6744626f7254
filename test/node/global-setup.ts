// Vitest global setup for the node tier: a real control plane with one simulated node and one real node (the
// kubelet and containerd built from the module proxy, the dpo image from `make image`), started once per run.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import type { TestProject } from "vitest/node";
import { buildOrReuseBinaries, readPinnedVersions, startCluster } from "../../tools/cluster/cluster.js";
import {
  buildOrReuseContainerd,
  buildOrReuseOldestKubelet,
  oldestKubernetesVersion,
  realNodeImages,
} from "../../tools/real-node/artifacts.js";
import { realNodeUnsupportedReason } from "../../tools/real-node/host.js";
import { startRealNode } from "../../tools/real-node/real-node.js";
import { providedCluster } from "../cluster/provided-context.js";

const KEEP_STATE_ENV = "DPO_TEST_KEEP_CLUSTER_STATE";

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const unsupported = await realNodeUnsupportedReason();
  if (unsupported !== undefined) {
    // CI runs as root on a machine that can host the node; elsewhere the tier says why it cannot run.
    throw new Error(`the node tier cannot run here: ${unsupported}`);
  }
  const log = pino({ level: process.env.DPO_CLUSTER_LOG_LEVEL ?? "warn" }, pino.destination(2));
  const binDir = process.env.DPO_CLUSTER_BIN_DIR ?? (await buildOrReuseBinaries());
  const images = realNodeImages();
  const containerdBinDir = await buildOrReuseContainerd();
  const oldestKubelet = await buildOrReuseOldestKubelet();
  const versions = await readPinnedVersions();

  const stateDir = await mkdtemp(join(tmpdir(), "dpo-test-node-"));
  const cluster = await startCluster({
    nodes: 1,
    stateDir,
    binDir,
    log,
    kubeletSimulator: true,
    realNode: true,
  });
  let node;
  try {
    node = await startRealNode({
      stateDir,
      kubeconfigPath: cluster.kubeconfigPath,
      apiServerPort: cluster.ports.apiServer,
      pki: cluster.pki,
      k8sBinDir: binDir,
      containerdBinDir,
      images: images.archives,
      labels: { "feature.example/foo": "true" },
      log,
    });
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  log.info({ ms: cluster.startupMs, stateDir, node: node.name }, "test cluster with a real node started");
  // One real node per machine: the node project runs one file at a time, on this one cluster.
  project.provide("clusters", [providedCluster(cluster, stateDir)]);
  project.provide("clusterBinDir", binDir);
  project.provide("clusterKubernetesVersion", versions.kubernetes);
  project.provide("realNodeName", node.name);
  project.provide("realNodeContainerdSocket", node.containerdSocket);
  project.provide("realNodeCtr", join(containerdBinDir, "ctr"));
  project.provide("realNodeDpoImage", images.dpo);
  project.provide("realNodeWorkloadImage", images.workload);
  project.provide("oldestKubeletBinary", oldestKubelet);
  project.provide("oldestKubeletVersion", await oldestKubernetesVersion());
  return async () => {
    await node.stop();
    await cluster.stop();
    if (process.env[KEEP_STATE_ENV]) {
      log.warn({ stateDir }, "cluster state kept");
    } else {
      await rm(stateDir, { recursive: true, force: true });
    }
  };
}
