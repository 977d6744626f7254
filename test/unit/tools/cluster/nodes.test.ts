// The simulated nodes the local control plane creates: what tests and the operator rely on.
import { describe, expect, it } from "vitest";
import {
  NODE_CAPACITY,
  SIMULATED_NODE_LABEL,
  TEST_FEATURE_LABEL,
  goArchitecture,
  renderSimulatedNode,
} from "../../../../tools/cluster/nodes.js";

const facts = { kubernetesVersion: "v1.34.4", kwokVersion: "v0.8.0", architecture: "amd64" };

describe("renderSimulatedNode", () => {
  it("carries the marker KWOK manages, the label tests select on, and a kubelet's status", () => {
    const node = renderSimulatedNode(4, facts);
    expect(node.metadata?.name).toBe("dpo-node-4");
    expect(node.metadata?.labels).toMatchObject({
      [SIMULATED_NODE_LABEL]: "true",
      [TEST_FEATURE_LABEL]: "true",
      "dpo.dev/node-index": "4",
      "kubernetes.io/hostname": "dpo-node-4",
    });
    expect(node.status?.capacity).toEqual({ ...NODE_CAPACITY });
    expect(node.status?.allocatable).toEqual({ ...NODE_CAPACITY });
    expect(node.status?.nodeInfo).toMatchObject({
      kubeletVersion: "v1.34.4",
      architecture: "amd64",
      operatingSystem: "linux",
    });
  });

  it("gives every node of a 1000-node cluster a distinct loopback address and machine id", () => {
    const nodes = Array.from({ length: 1000 }, (_, i) => renderSimulatedNode(i, facts));
    const addresses = nodes.map((n) => n.status!.addresses!.find((a) => a.type === "InternalIP")!.address);
    expect(new Set(addresses).size).toBe(1000);
    for (const address of addresses) {
      const octets = address.split(".").map(Number);
      expect(octets[0]).toBe(127);
      expect(octets.every((o) => Number.isInteger(o) && o >= 0 && o <= 255)).toBe(true);
    }
    expect(new Set(nodes.map((n) => n.status!.nodeInfo!.machineID)).size).toBe(1000);
  });

  it.each([
    ["x64", "amd64"],
    ["arm64", "arm64"],
    ["ppc64", "ppc64le"],
    ["riscv64", "riscv64"],
  ])("maps Node's architecture %s to GOARCH %s", (nodeArch, goArch) => {
    expect(goArchitecture(nodeArch)).toBe(goArch);
  });
});
