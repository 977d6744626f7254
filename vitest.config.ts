// Test tiers: unit (pure functions), protocol (the runtime over real unix sockets), cluster (integration,
// kubelet-sim and end-to-end tests against real local control planes, one per worker), and node (one control
// plane with a real kubelet and containerd running the dpo image).
import { defineConfig } from "vitest/config";

/**
 * Clusters of the cluster project, each its own control plane with simulated nodes, and as many test files at
 * once (DPO_TEST_CLUSTERS; `make test`'s CLUSTER_WORKERS). One by default, and always one on a cluster the run
 * did not start (DPO_TEST_KUBECONFIG).
 */
function clusterWorkers(env: NodeJS.ProcessEnv): number {
  if (env.DPO_TEST_KUBECONFIG) return 1;
  const wanted = Number(env.DPO_TEST_CLUSTERS ?? "1");
  if (!Number.isInteger(wanted) || wanted < 1) {
    throw new Error(`DPO_TEST_CLUSTERS=${env.DPO_TEST_CLUSTERS}: want a whole number of clusters, 1 or more`);
  }
  return wanted;
}
const clusters = clusterWorkers(process.env);

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: "protocol",
          include: ["test/protocol/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "cluster",
          include: [
            "test/integration/**/*.test.ts",
            "test/kubelet-sim/**/*.test.ts",
            "test/e2e/**/*.test.ts",
          ],
          globalSetup: ["test/cluster/global-setup.ts"],
          testTimeout: 180_000,
          hookTimeout: 300_000,
          // One control plane per worker (test/cluster/global-setup.ts): files at once never share one.
          fileParallelism: clusters > 1,
          maxWorkers: clusters,
        },
      },
      {
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          globalSetup: ["test/node/global-setup.ts"],
          testTimeout: 300_000,
          hookTimeout: 300_000,
          // One real node per machine (the kubelet's device-plugin directory is fixed): one file at a time.
          fileParallelism: false,
        },
      },
    ],
  },
});
