import { describe, expect, it } from "vitest";
import type { ProvidedCluster } from "../cluster/provided-context.js";
import { clusterOfThisWorker } from "../cluster/worker-cluster.js";

const cluster = (name: string): ProvidedCluster => ({
  kubeconfig: `${name}/kubeconfig`,
  stateDir: name,
  nodeNames: [],
});
const two = [cluster("a"), cluster("b")];

describe("clusterOfThisWorker", () => {
  it.each([
    { what: "worker 1 takes the first cluster", clusters: two, poolId: "1", want: "a" },
    { what: "worker 2 the second", clusters: two, poolId: "2", want: "b" },
    {
      what: "no pool id (a file run outside a pool) the first",
      clusters: [cluster("a")],
      poolId: undefined,
      want: "a",
    },
  ])("$what", ({ clusters, poolId, want }) => {
    expect(clusterOfThisWorker(clusters, poolId).stateDir).toBe(want);
  });

  it.each([
    { what: "more workers than clusters", clusters: [cluster("a")], poolId: "2" },
    { what: "a pool id that is no number", clusters: two, poolId: "x" },
    { what: "pool id 0", clusters: two, poolId: "0" },
  ])("refuses $what, naming both counts", ({ clusters, poolId }) => {
    expect(() => clusterOfThisWorker(clusters, poolId)).toThrow(
      new RegExp(`VITEST_POOL_ID=${poolId}: the global setup started ${clusters.length} cluster`),
    );
  });
});
