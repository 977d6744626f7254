// Who owns a node's device labels, and the one apply that gives a node a config's labels: nothing when the
// node already says it, never a key another manager owns or the node has from elsewhere, and every key the
// config's manager owns and no longer wants dropped from the applied set (which removes it).
import type { V1ManagedFieldsEntry, V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  configsLabellingNode,
  labelApply,
  slimLabelOwnership,
} from "../../../../src/operator/node-labels/ownership.js";

const OURS = "dpo-node-labels/gpus";

function owns(manager: string, keys: string[], operation = "Apply"): V1ManagedFieldsEntry {
  return {
    manager,
    operation,
    apiVersion: "v1",
    fieldsType: "FieldsV1",
    time: "2026-01-01T00:00:00Z" as never,
    fieldsV1: {
      "f:metadata": { "f:labels": Object.fromEntries(keys.map((k) => [`f:${k}`, {}])) },
    },
  };
}

function node(labels: Record<string, string>, managedFields: V1ManagedFieldsEntry[] = []): V1Node {
  return { metadata: { name: "n1", resourceVersion: "5", labels, managedFields } };
}

describe("labelApply", () => {
  const wanted = { "nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" };

  it("writes every wanted label on a node that has none, under the config's manager", () => {
    expect(labelApply(node({ "kubernetes.io/hostname": "n1" }), "gpus", wanted)).toEqual({
      node: "n1",
      fieldManager: OURS,
      labels: wanted,
      yielded: [],
    });
  });

  it("writes nothing when the node has them, owned by the config's manager alone", () => {
    const n = node(wanted, [owns(OURS, Object.keys(wanted))]);
    expect(labelApply(n, "gpus", wanted)).toBeUndefined();
  });

  it("writes the whole set again when one value changed, and drops a key no longer wanted", () => {
    const n = node({ ...wanted, "nvidia.com/gpu.memory": "81559" }, [
      owns(OURS, [...Object.keys(wanted), "nvidia.com/gpu.memory"]),
    ]);
    const changed = { ...wanted, "nvidia.com/gpu.count": "7" };
    expect(labelApply(n, "gpus", changed)?.labels).toEqual(changed);
    // The memory label is left out of the applied set: server-side apply removes it.
    expect(labelApply(n, "gpus", wanted)?.labels).toEqual(wanted);
  });

  it("leaves a key another manager owns alone, whatever its value, and never owns it too", () => {
    const gfd = owns("nfd-master", ["nvidia.com/gpu.product"], "Update");
    const n = node({ "nvidia.com/gpu.product": "Something-Else" }, [gfd]);
    expect(labelApply(n, "gpus", wanted)).toEqual({
      node: "n1",
      fieldManager: OURS,
      labels: { "nvidia.com/gpu.count": "8" },
      yielded: ["nvidia.com/gpu.product"],
    });
    // Once the config's apply shows, the node needs nothing more.
    const after = node({ ...n.metadata!.labels!, "nvidia.com/gpu.count": "8" }, [
      gfd,
      owns(OURS, ["nvidia.com/gpu.count"]),
    ]);
    expect(labelApply(after, "gpus", wanted)).toBeUndefined();
  });

  it("gives up a key another manager came to own too, leaving it to them", () => {
    const n = node(wanted, [
      owns(OURS, Object.keys(wanted)),
      owns("kubectl-label", ["nvidia.com/gpu.count"]),
    ]);
    expect(labelApply(n, "gpus", wanted)?.labels).toEqual({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    });
  });

  it("leaves a label the node has from nobody it can name (no managedFields) alone", () => {
    expect(labelApply(node({ "nvidia.com/gpu.count": "2" }), "gpus", wanted)?.labels).toEqual({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    });
  });

  it("applies an empty set to take every label the config's manager owns off, and nothing after", () => {
    const n = node(wanted, [owns(OURS, Object.keys(wanted))]);
    expect(labelApply(n, "gpus", {})).toEqual({ node: "n1", fieldManager: OURS, labels: {}, yielded: [] });
    expect(labelApply(node(wanted), "gpus", {})).toBeUndefined();
  });
});

describe("what the Node cache keeps of managedFields", () => {
  it("keeps each manager's device label keys only, and no entry without one", () => {
    const kubelet: V1ManagedFieldsEntry = {
      manager: "kubelet",
      operation: "Update",
      fieldsV1: { "f:metadata": { "f:labels": { "f:kubernetes.io/hostname": {} } }, "f:status": {} },
    };
    const slim = slimLabelOwnership([
      kubelet,
      owns(OURS, ["nvidia.com/gpu.count", "count.device.dpo.dev/gpus", "example.com/other"]),
    ]);
    expect(slim).toEqual([
      {
        manager: OURS,
        operation: "Apply",
        fieldsV1: {
          "f:metadata": { "f:labels": { "f:nvidia.com/gpu.count": {}, "f:count.device.dpo.dev/gpus": {} } },
        },
      },
    ]);
    expect(slimLabelOwnership([kubelet])).toBeUndefined();
  });

  it("names the configs a node carries labels of, by key and by field manager", () => {
    const n = node({ "count.device.dpo.dev/fpgas": "2", "nvidia.com/gpu.count": "8" }, [
      owns(OURS, ["nvidia.com/gpu.count"]),
    ]);
    expect(configsLabellingNode(n).sort()).toEqual(["fpgas", "gpus"]);
  });
});
