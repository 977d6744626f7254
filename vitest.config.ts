// Test tiers: unit (pure functions), protocol (the runtime over real unix sockets), and cluster
// (integration, kubelet-sim and end-to-end tests against one real local control plane per run).
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
    ],
  },
});
