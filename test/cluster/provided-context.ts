// Types of the values the cluster global setup hands to test files through vitest's provide/inject.
/** One control plane of a run, as a test file reaches it. */
export interface ProvidedCluster {
  /** Admin kubeconfig (client certificate in system:masters). */
  kubeconfig: string;
  /** State directory of a cluster this run started; empty when reusing one (DPO_TEST_KUBECONFIG). */
  stateDir: string;
  /** Simulated (KWOK) nodes, sorted by name. */
  nodeNames: string[];
}

/** A cluster the run started, as test files reach it (both global setups hand theirs over this way). */
export function providedCluster(
  cluster: { readonly kubeconfigPath: string; readonly nodeNames: readonly string[] },
  stateDir: string,
): ProvidedCluster {
  return { kubeconfig: cluster.kubeconfigPath, stateDir, nodeNames: [...cluster.nodeNames].sort() };
}

declare module "vitest" {
  export interface ProvidedContext {
    /**
     * The clusters under test, one per worker of the project (`maxWorkers`): test files run at once only on
     * different clusters. Each worker's files use `clusters[VITEST_POOL_ID - 1]` (test/cluster/helpers.ts).
     */
    clusters: ProvidedCluster[];
    /** Directory with kubectl and the control-plane binaries. */
    clusterBinDir: string;
    /** The Kubernetes release the binaries were built from; simulated nodes report it as kubelet version. */
    clusterKubernetesVersion: string;
    /** The real node's name (the node tier only; test/node/global-setup.ts). */
    realNodeName: string;
    /** The real node's containerd socket and ctr, for what tests check below the API. */
    realNodeContainerdSocket: string;
    realNodeCtr: string;
    /** The dpo image the real node runs (imported from `make image`'s archive). */
    realNodeDpoImage: string;
    /** A test workload image with a shell (busybox), imported too. */
    realNodeWorkloadImage: string;
    /** The oldest supported kubelet's binary and version, for tests that restart the real node on it. */
    oldestKubeletBinary: string;
    oldestKubeletVersion: string;
  }
}
