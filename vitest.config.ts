// Test tiers: unit (pure functions), protocol (the runtime over real unix sockets), cluster (integration,
// kubelet-sim and end-to-end tests against one real local control plane per run), and node (the same control
// plane with a real kubelet and containerd running the dpo image).
import { defineConfig } from "vitest/config";

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
          // One control plane serves every file; files run one at a time so they do not race for it.
          fileParallelism: false,
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
