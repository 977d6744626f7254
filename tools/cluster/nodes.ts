// Node objects for the simulated (KWOK) nodes: names, labels and a status like a real kubelet reports.
import type { V1Node } from "@kubernetes/client-node";
import { createHash } from "node:crypto";

/** KWOK manages exactly the nodes that carry this label (value "true"); nothing else touches them. */
export const SIMULATED_NODE_LABEL = "dpo.dev/simulated";
export const SIMULATED_NODE_SELECTOR = `${SIMULATED_NODE_LABEL}=true`;
/** A label every simulated node carries, for tests of node selectors (the sample config selects it). */
export const TEST_FEATURE_LABEL = "feature.example/foo";
/** The node's position, 0..N-1, for tests that want one particular node. */
export const NODE_INDEX_LABEL = "dpo.dev/node-index";
export const ZONE_LABEL = "topology.kubernetes.io/zone";
export const NODE_NAME_PREFIX = "dpo-node-";
const ZONES = ["zone-a", "zone-b", "zone-c"] as const;

export const NODE_CAPACITY = {
  cpu: "32",
  memory: "256Gi",
  pods: "110",
  "ephemeral-storage": "500Gi",
} as const;

export interface SimulatedNodeFacts {
  kubernetesVersion: string;
  kwokVersion: string;
  /** GOARCH spelling, e.g. amd64. */
  architecture: string;
}

export function simulatedNodeName(index: number): string {
  return `${NODE_NAME_PREFIX}${index}`;
}

export function goArchitecture(nodeArch: string): string {
  const byNodeArch: Record<string, string> = {
    x64: "amd64",
    arm64: "arm64",
    arm: "arm",
    ppc64: "ppc64le",
    s390x: "s390x",
  };
  return byNodeArch[nodeArch] ?? nodeArch;
}

/**
 * The status is set at creation, as a kubelet does when it registers; KWOK then only adds conditions,
 * so capacity and allocatable stay what is written here (and what tests patch later).
 */
export function renderSimulatedNode(index: number, facts: SimulatedNodeFacts): V1Node {
  const name = simulatedNodeName(index);
  const id = createHash("sha256").update(name).digest("hex").slice(0, 32);
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: {
        [SIMULATED_NODE_LABEL]: "true",
        [TEST_FEATURE_LABEL]: "true",
        [NODE_INDEX_LABEL]: String(index),
        [ZONE_LABEL]: ZONES[index % ZONES.length]!,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": facts.architecture,
      },
    },
    spec: {},
    status: {
      capacity: { ...NODE_CAPACITY },
      allocatable: { ...NODE_CAPACITY },
      addresses: [
        // A loopback address: should anything (kubectl logs → API server → "kubelet") dial a simulated
        // node, the connection stays on this machine and is refused, instead of leaving it.
        { type: "InternalIP", address: `127.1.${Math.floor(index / 250)}.${(index % 250) + 2}` },
        { type: "Hostname", address: name },
      ],
      nodeInfo: {
        kubeletVersion: facts.kubernetesVersion,
        kubeProxyVersion: "",
        architecture: facts.architecture,
        operatingSystem: "linux",
        osImage: "KWOK simulated node",
        kernelVersion: "simulated",
        containerRuntimeVersion: `kwok://${facts.kwokVersion}`,
        machineID: id,
        systemUUID: id,
        bootID: id,
      },
    },
  };
}
