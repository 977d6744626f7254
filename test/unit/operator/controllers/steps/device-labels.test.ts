// The device-label step: one apply per node per change, under the config's own field manager; none while
// the node's labels already say what the report does or the cache has yet to show the last apply; the
// labels taken off nodes the config stops serving, when turned off, and when the config is gone.
import type { V1ManagedFieldsEntry, V1Node } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { validateDevicePluginConfig } from "../../../../../src/api/validate.js";
import type { DevicePluginConfig } from "../../../../../src/api/v1beta1/config.js";
import type {
  DeviceNodeState,
  DeviceNodeStateStatus,
} from "../../../../../src/api/v1beta1/devicenodestate.js";
import { ConflictError } from "../../../../../src/kube/index.js";
import type { StepDeps } from "../../../../../src/operator/controllers/reconciler-deps.js";
import {
  labelServedNodes,
  unlabelConfig,
} from "../../../../../src/operator/controllers/steps/device-labels.js";
import type { LabelApply } from "../../../../../src/operator/node-labels/ownership.js";
import { NVIDIA_FIXTURES } from "../../../../fixtures/nvidia/fake-node.js";

const H100 = JSON.parse(
  readFileSync(join(NVIDIA_FIXTURES, "reports", "eight-h100.json"), "utf8"),
) as DeviceNodeStateStatus;

function gpuConfig(spec: Record<string, unknown> = {}): DevicePluginConfig {
  const parsed = validateDevicePluginConfig({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "gpus", uid: "u1" },
    spec: { resourceName: "nvidia.com/gpu", backend: { type: "NVIDIA", nvidia: {} }, ...spec },
  });
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return parsed.value;
}

function report(node: string, status: DeviceNodeStateStatus = H100): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `gpus-${node}` },
    spec: { configName: "gpus", nodeName: node, resourceName: "nvidia.com/gpu" },
    status,
  };
}

/**
 * A Node cache, a report cache and an API server that applies as server-side apply does for one manager:
 * the manager's keys become exactly the applied set, each apply a new resourceVersion. The cache shows
 * the server's Nodes only when the test says so (`sync`).
 */
function world(nodeNames: string[]) {
  const server = new Map<string, V1Node>(
    nodeNames.map((name) => [name, { metadata: { name, resourceVersion: "1", labels: {} } }]),
  );
  const cache = new Map(server);
  const reports: DeviceNodeState[] = [];
  const applies: LabelApply[] = [];
  let rv = 1;
  let fail: Error | undefined;
  const apply = (a: LabelApply): Promise<unknown> => {
    if (fail !== undefined) return Promise.reject(fail);
    applies.push(a);
    const node = server.get(a.node)!;
    const entries = node.metadata!.managedFields ?? [];
    const mine = entries.find((e) => e.manager === a.fieldManager);
    const owned = Object.keys((mine?.fieldsV1 as never)?.["f:metadata"]?.["f:labels"] ?? {}).map((k) =>
      k.slice(2),
    );
    const labels = { ...node.metadata!.labels };
    for (const key of owned) if (!(key in a.labels)) delete labels[key];
    Object.assign(labels, a.labels);
    const entry: V1ManagedFieldsEntry = {
      manager: a.fieldManager,
      operation: "Apply",
      fieldsV1: {
        "f:metadata": { "f:labels": Object.fromEntries(Object.keys(a.labels).map((k) => [`f:${k}`, {}])) },
      },
    };
    const others = entries.filter((e) => e.manager !== a.fieldManager);
    server.set(a.node, {
      metadata: {
        name: a.node,
        resourceVersion: String(++rv),
        labels,
        managedFields: Object.keys(a.labels).length > 0 ? [...others, entry] : others,
      },
    });
    return Promise.resolve({});
  };
  const deps = {
    nodes: {
      list: () => [...cache.values()],
      get: (name: string) => cache.get(name),
      byIndex: () => [...cache.values()],
    },
    reports: { byIndex: () => reports },
    nodeLabels: apply,
    metrics: { applies: { inc: () => undefined } },
    logger: { info: () => undefined, warn: () => undefined },
  } as unknown as StepDeps;
  return {
    deps,
    server,
    reports,
    applies,
    sync: () => server.forEach((n, name) => cache.set(name, n)),
    failWith: (err: Error | undefined) => (fail = err),
    labelsOf: (name: string) => server.get(name)!.metadata!.labels!,
  };
}

const all = () => true;

describe("labelServedNodes", () => {
  it("labels each served node once, and writes nothing more once the cache shows it", async () => {
    const w = world(["n1", "n2"]);
    w.reports.push(report("n1"), report("n2"));
    expect(await labelServedNodes(w.deps, gpuConfig(), all)).toBeUndefined();
    expect(w.applies.map((a) => [a.node, a.fieldManager])).toEqual([
      ["n1", "dpo-node-labels/gpus"],
      ["n2", "dpo-node-labels/gpus"],
    ]);
    expect(w.labelsOf("n1")).toMatchObject({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
      "nvidia.com/gpu.count": "8",
      "count.device.dpo.dev/gpus": "8",
    });
    // Before the cache catches up: no second write, and a pass to come back.
    expect(await labelServedNodes(w.deps, gpuConfig(), all)).toBeGreaterThan(0);
    w.sync();
    expect(await labelServedNodes(w.deps, gpuConfig(), all)).toBeUndefined();
    expect(w.applies).toHaveLength(2);
  });

  it("writes a node again, in one apply, when its report changes, and only that node", async () => {
    const w = world(["n1", "n2"]);
    w.reports.push(report("n1"), report("n2"));
    await labelServedNodes(w.deps, gpuConfig(), all);
    w.sync();
    w.reports[0] = report("n1", { ...H100, devices: H100.devices.slice(0, 7) });
    await labelServedNodes(w.deps, gpuConfig(), all);
    expect(w.applies.map((a) => a.node)).toEqual(["n1", "n2", "n1"]);
    expect(w.labelsOf("n1")["nvidia.com/gpu.count"]).toBe("7");
  });

  it("writes the nodes again when the config's sharing changes, their reports the same objects", async () => {
    const w = world(["n1"]);
    w.reports.push(report("n1"));
    await labelServedNodes(w.deps, gpuConfig(), all);
    w.sync();
    const shared = { sharing: { strategy: "TimeSlicing", replicas: 4 } };
    await labelServedNodes(w.deps, gpuConfig(shared), all);
    expect(w.applies).toHaveLength(2);
    expect(w.labelsOf("n1")).toMatchObject({
      "nvidia.com/gpu.replicas": "4",
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
    });
    w.sync();
    await labelServedNodes(w.deps, gpuConfig(shared), all);
    expect(w.applies).toHaveLength(2);
  });

  it("takes the labels off a node the config no longer serves, and all of them when turned off", async () => {
    const w = world(["n1", "n2"]);
    w.reports.push(report("n1"), report("n2"));
    await labelServedNodes(w.deps, gpuConfig(), all);
    w.sync();
    await labelServedNodes(w.deps, gpuConfig(), (n) => n.metadata?.name === "n2");
    expect(Object.keys(w.labelsOf("n1"))).toEqual([]);
    expect(w.labelsOf("n2")["nvidia.com/gpu.count"]).toBe("8");
    w.sync();
    await labelServedNodes(w.deps, gpuConfig({ nodeLabels: { enabled: false } }), all);
    expect(Object.keys(w.labelsOf("n2"))).toEqual([]);
    w.sync();
    const before = w.applies.length;
    await labelServedNodes(w.deps, gpuConfig({ nodeLabels: { enabled: false } }), all);
    expect(w.applies).toHaveLength(before);
  });

  it("leaves a key another manager owns and keeps labelling the rest", async () => {
    const w = world(["n1"]);
    w.server.set("n1", {
      metadata: {
        name: "n1",
        resourceVersion: "1",
        labels: { "nvidia.com/gpu.product": "Tesla-T4" },
        managedFields: [
          {
            manager: "nfd-master",
            operation: "Update",
            fieldsV1: { "f:metadata": { "f:labels": { "f:nvidia.com/gpu.product": {} } } },
          },
        ],
      },
    });
    w.sync();
    w.reports.push(report("n1"));
    await labelServedNodes(w.deps, gpuConfig(), all);
    expect(w.applies[0]!.labels).not.toHaveProperty("nvidia.com/gpu.product");
    expect(w.labelsOf("n1")).toMatchObject({
      "nvidia.com/gpu.product": "Tesla-T4",
      "nvidia.com/gpu.count": "8",
    });
    w.sync();
    await labelServedNodes(w.deps, gpuConfig(), all);
    expect(w.applies).toHaveLength(1);
  });

  it("comes back soon after a conflict and later after another error, without throwing", async () => {
    const w = world(["n1"]);
    w.reports.push(report("n1"));
    w.failWith(new ConflictError("conflict", { code: 409, reason: "Conflict" }));
    expect(await labelServedNodes(w.deps, gpuConfig(), all)).toBe(500);
    w.failWith(new Error("forbidden by policy"));
    w.server.set("n1", { metadata: { name: "n1", resourceVersion: "9", labels: {} } });
    w.sync();
    expect(await labelServedNodes(w.deps, gpuConfig(), all)).toBe(10_000);
  });
});

describe("unlabelConfig", () => {
  it("takes a gone config's labels off, with one apply of none per node", async () => {
    const w = world(["n1", "n2"]);
    w.reports.push(report("n1"));
    await labelServedNodes(w.deps, gpuConfig(), all);
    w.sync();
    await unlabelConfig(w.deps, "gpus");
    expect(w.applies.slice(1)).toEqual([
      { node: "n1", fieldManager: "dpo-node-labels/gpus", labels: {}, yielded: [] },
    ]);
    expect(Object.keys(w.labelsOf("n1"))).toEqual([]);
  });
});
