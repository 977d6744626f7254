// Which of a run's clusters a test file uses: the one of the vitest worker running it.
import type { ProvidedCluster } from "./provided-context.js";

/**
 * The cluster of the worker running this file: `clusters[VITEST_POOL_ID - 1]`. Vitest gives the files running
 * at once different pool ids, from 1 to the project's maxWorkers, and the global setup starts one cluster
 * for each, so no two files ever share one at the same time.
 */
export function clusterOfThisWorker(
  clusters: readonly ProvidedCluster[],
  poolId: string | undefined,
): ProvidedCluster {
  const id = Number(poolId ?? "1");
  const cluster = clusters[id - 1];
  if (!Number.isInteger(id) || cluster === undefined) {
    throw new Error(
      `VITEST_POOL_ID=${poolId ?? "(unset)"}: the global setup started ${clusters.length} cluster(s), one per worker; ` +
        "the project's maxWorkers and its clusters disagree",
    );
  }
  return cluster;
}
