// Types of the values the cluster global setup hands to test files through vitest's provide/inject.
export {};

declare module "vitest" {
  export interface ProvidedContext {
    /** Admin kubeconfig of the cluster under test (client certificate in system:masters). */
    clusterKubeconfig: string;
    /** Directory with kubectl and the control-plane binaries. */
    clusterBinDir: string;
    /** The Kubernetes release the binaries were built from; simulated nodes report it as kubelet version. */
    clusterKubernetesVersion: string;
    /** State directory of the cluster this run started; empty when reusing one (DPO_TEST_KUBECONFIG). */
    clusterStateDir: string;
    /** Simulated (KWOK) nodes, sorted by name. */
    clusterNodeNames: string[];
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
