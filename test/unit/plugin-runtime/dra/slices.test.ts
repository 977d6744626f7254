// The node's ResourceSlices, pure: names, the desired objects (128 devices a slice, healthy only,
// sorted) and the plan from what the API server holds (generation never backwards, 409-safe updates).
import { describe, expect, it } from "vitest";
import { quantityAmount } from "../../../../src/plugin-runtime/devices/attributes.js";
import {
  desiredSlices,
  planSlices,
  RESOURCE_SLICE_MAX_DEVICES,
  resourceSliceName,
  sliceDeviceChunks,
  type PoolDevice,
  type PoolInput,
  type ResourceSlice,
} from "../../../../src/plugin-runtime/dra/slices.js";

const DRIVER = "mock.example.com";
const NODE = "node-a";

function devices(count: number, unhealthy: readonly number[] = []): PoolDevice[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `dev-${String(i).padStart(4, "0")}`,
    health: unhealthy.includes(i) ? ("Unhealthy" as const) : ("Healthy" as const),
    attributes: { index: { int: i } },
  }));
}

function pool(devs: readonly PoolDevice[]): PoolInput {
  return { driver: DRIVER, node: NODE, configName: "mock", devices: devs };
}

/** What the API server would hold after the plan: existing objects with the writes applied. */
function apply(existing: readonly ResourceSlice[], plan: ReturnType<typeof planSlices>): ResourceSlice[] {
  const byName = new Map(existing.map((s) => [s.metadata.name, s]));
  let rv = 100;
  for (const op of plan.ops) {
    if (op.op === "delete") byName.delete(op.name);
    else
      byName.set(op.slice.metadata.name, {
        ...op.slice,
        metadata: { ...op.slice.metadata, resourceVersion: String(++rv) },
      });
  }
  return [...byName.values()];
}

describe("resourceSliceName", () => {
  it("is dpo- and 16 hex digits of sha256(driver/node/index), a DNS subdomain", () => {
    // printf '%s' mock.example.com/node-a/0 | sha256sum | cut -c1-16
    expect(resourceSliceName(DRIVER, NODE, 0)).toBe("dpo-70476f3790f36c4e");
    expect(resourceSliceName(DRIVER, NODE, 0)).toBe(resourceSliceName(DRIVER, NODE, 0));
    expect(new Set([0, 1, 2].map((i) => resourceSliceName(DRIVER, NODE, i))).size).toBe(3);
    expect(resourceSliceName(DRIVER, "node-b", 0)).not.toBe(resourceSliceName(DRIVER, NODE, 0));
  });
});

describe("sliceDeviceChunks", () => {
  it.each([
    { name: "no devices: one empty slice", count: 0, unhealthy: [], sizes: [0] },
    { name: "all unhealthy: one empty slice", count: 2, unhealthy: [0, 1], sizes: [0] },
    { name: "128 fit in one", count: 128, unhealthy: [], sizes: [128] },
    { name: "129 need two", count: 129, unhealthy: [], sizes: [128, 1] },
    { name: "unhealthy ones are left out before splitting", count: 129, unhealthy: [5], sizes: [128] },
    { name: "300", count: 300, unhealthy: [], sizes: [128, 128, 44] },
  ])("$name", ({ count, unhealthy, sizes }) => {
    const chunks = sliceDeviceChunks(devices(count, unhealthy));
    expect(chunks.map((c) => c.length)).toEqual(sizes);
    for (const c of chunks) expect(c.length).toBeLessThanOrEqual(RESOURCE_SLICE_MAX_DEVICES);
  });

  it("sorts by name and drops health and empty maps", () => {
    const chunks = sliceDeviceChunks([
      { name: "b", health: "Healthy", attributes: {}, capacity: { memory: { value: "1Gi" } } },
      { name: "a", health: "Healthy", attributes: { model: { string: "X" } } },
      { name: "c", health: "Unhealthy" },
    ]);
    expect(chunks).toEqual([
      [
        { name: "a", attributes: { model: { string: "X" } } },
        { name: "b", capacity: { memory: { value: "1Gi" } } },
      ],
    ]);
  });
});

describe("desiredSlices", () => {
  it("fills driver, nodeName, pool, count and labels", () => {
    const slices = desiredSlices(pool(devices(130)), 7);
    expect(slices).toHaveLength(2);
    expect(slices[1]).toMatchObject({
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: {
        name: resourceSliceName(DRIVER, NODE, 1),
        labels: { "dpo.dev/config": "mock", "app.kubernetes.io/managed-by": "dpo" },
      },
      spec: { driver: DRIVER, nodeName: NODE, pool: { name: NODE, generation: 7, resourceSliceCount: 2 } },
    });
    expect(slices[1]!.spec.devices).toHaveLength(2);
  });
});

describe("planSlices", () => {
  it.each([
    {
      name: "first start: create at generation 1",
      existing: () => [],
      last: 0,
      devs: devices(3),
      want: { generation: 1, ops: ["create"] },
    },
    {
      name: "nothing changed: no ops, generation kept",
      existing: () => desiredSlices(pool(devices(3)), 4),
      last: 0,
      devs: devices(3),
      want: { generation: 4, ops: [] },
    },
    {
      name: "a restart continues from the generation the API server has",
      existing: () => desiredSlices(pool(devices(3)), 9),
      last: 0,
      devs: devices(4),
      want: { generation: 10, ops: ["update"] },
    },
    {
      name: "a device turned unhealthy: update, generation bumped",
      existing: () => desiredSlices(pool(devices(3)), 2),
      last: 2,
      devs: devices(3, [1]),
      want: { generation: 3, ops: ["update"] },
    },
    {
      name: "grew past 128: update the first, create the second",
      existing: () => desiredSlices(pool(devices(100)), 1),
      last: 1,
      devs: devices(200),
      want: { generation: 2, ops: ["update", "create"] },
    },
    {
      name: "shrank below 129: update the first, then delete the second",
      existing: () => desiredSlices(pool(devices(200)), 5),
      last: 5,
      devs: devices(10),
      want: { generation: 6, ops: ["update", "delete"] },
    },
    {
      name: "mixed generations (an interrupted earlier run) are rewritten even with the same content",
      existing: () => [
        ...desiredSlices(pool(devices(200)), 5).slice(0, 1),
        ...desiredSlices(pool(devices(200)), 4).slice(1),
      ],
      last: 0,
      devs: devices(200),
      want: { generation: 6, ops: ["update", "update"] },
    },
    {
      name: "our own last write is newer than what was listed: never go back",
      existing: () => desiredSlices(pool(devices(3)), 3),
      last: 8,
      devs: devices(3),
      want: { generation: 9, ops: ["update"] },
    },
    {
      name: "a foreign slice of the pool is deleted",
      existing: () => [
        ...desiredSlices(pool(devices(3)), 1),
        { ...desiredSlices(pool(devices(1)), 1)[0]!, metadata: { name: "someone-else" } },
      ],
      last: 1,
      devs: devices(3),
      want: { generation: 2, ops: ["update", "delete"] },
    },
    {
      name: "a slice with our name but another pool name is deleted and created (pool name is immutable)",
      existing: () => {
        const [s] = desiredSlices(pool(devices(3)), 1);
        return [{ ...s!, spec: { ...s!.spec, pool: { ...s!.spec.pool, name: "other" } } }];
      },
      last: 1,
      devs: devices(3),
      want: { generation: 2, ops: ["delete", "create"] },
    },
  ])("$name", ({ existing, last, devs, want }) => {
    const have = existing().map((s, i) => ({
      ...s,
      metadata: { ...s.metadata, resourceVersion: String(i + 1) },
    }));
    const plan = planSlices(pool(devs), have, last);
    expect({ generation: plan.generation, ops: plan.ops.map((op) => op.op) }).toEqual(want);
    // Updates carry the resourceVersion read, so a concurrent writer makes them fail with 409.
    for (const op of plan.ops) {
      if (op.op === "update")
        expect(op.slice.metadata.resourceVersion).toBe(
          have.find((s) => s.metadata.name === op.slice.metadata.name)?.metadata.resourceVersion,
        );
      if (op.op !== "delete") expect(op.slice.spec.pool.generation).toBe(plan.generation);
    }
    // Applying the plan reaches a fixed point: planning again changes nothing.
    const after = apply(have, plan);
    expect(planSlices(pool(devs), after, plan.generation)).toEqual({ generation: plan.generation, ops: [] });
    expect(after.every((s) => s.spec.pool.generation === plan.generation)).toBe(true);
    expect(after.every((s) => s.spec.pool.resourceSliceCount === after.length)).toBe(true);
  });

  it("quantities the API server returns in canonical form count as unchanged", () => {
    const devs: PoolDevice[] = [{ name: "a", health: "Healthy", capacity: { memory: { value: "1024Mi" } } }];
    const [slice] = desiredSlices(pool(devs), 3);
    const fromServer: ResourceSlice = {
      ...slice!,
      spec: { ...slice!.spec, devices: [{ name: "a", capacity: { memory: { value: "1Gi" } } }] },
    };
    expect(planSlices(pool(devs), [fromServer], 3).ops).toEqual([]);
    expect(quantityAmount("1.5")).toBe(quantityAmount("1500m"));
    expect(quantityAmount("1e3")).toBe(quantityAmount("1k"));
  });
});
