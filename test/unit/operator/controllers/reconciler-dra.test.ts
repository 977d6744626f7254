// The config reconciler in DRA mode: the DeviceClass it owns (and one it does not), the ResourceSlices of
// a config switched away or deleted, and the class's extended resource name as the probe found.
import type { KubernetesObject } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { validateDevicePluginConfig } from "../../../../src/api/validate.js";
import { renderDeviceClass } from "../../../../src/operator/controllers/dra.js";
import { FakeCache } from "./fake-cache.js";
import { condition, config, setup } from "./reconciler-support.js";

describe("ConfigReconciler in DRA mode", () => {
  const dra = (spec: Record<string, unknown> = {}) =>
    config("foo", "2026-01-01T00:00:00Z", { publish: "DRA", ...spec });
  function withDra() {
    const t = setup();
    const slices = new FakeCache<KubernetesObject & { spec: unknown }>();
    const classes = new FakeCache<KubernetesObject & { spec?: unknown }>();
    t.reconciler.useDraInformers(slices.asInformer() as never, classes.asInformer() as never);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.34.4" } as never } });
    const slice = (name: string, label: string, node: string, devices: number) =>
      slices.put({
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceSlice",
        metadata: { name, uid: `u-${name}`, labels: { "dpo.dev/config": label } },
        spec: {
          driver: "foo.vendor.example",
          nodeName: node,
          pool: { name: node, generation: 1, resourceSliceCount: 1 },
          devices: Array.from({ length: devices }, (_, i) => ({ name: `d${i}` })),
        },
      });
    return { ...t, slices, classes, slice };
  }
  const lastStatus = (t: ReturnType<typeof setup>) =>
    t.applied.filter((a) => a.kind === "status").at(-1)?.status;

  it("creates the DeviceClass and counts the node's published devices", async () => {
    const t = withDra();
    t.configs.put(dra());
    t.slice("s1", "foo", "n1", 3);
    await t.reconciler.reconcile("foo");
    expect(t.applied.map((a) => a.name)).toContain("foo.vendor.example");
    expect(lastStatus(t)?.devices).toMatchObject({ capacity: 3, allocatable: 3 });
    expect(t.deleted).toEqual([]);
  });

  it("leaves a DeviceClass it does not own alone and stalls with DeviceClassConflict", async () => {
    const t = withDra();
    t.configs.put(dra());
    t.classes.put({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: "foo.vendor.example" },
    });
    await t.reconciler.reconcile("foo");
    expect(t.applied.map((a) => a.name)).not.toContain("foo.vendor.example");
    expect(t.deleted).toEqual([]);
    expect(condition(lastStatus(t), "Stalled")).toMatchObject({
      status: "True",
      reason: "DeviceClassConflict",
    });
    expect(t.events).toContain("Warning/DeviceClassConflict");
  });

  it("switched to DevicePlugin: deletes its owned class and its slices, not another config's", async () => {
    const t = withDra();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.classes.put({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: {
        name: "foo.vendor.example",
        uid: "c1",
        ownerReferences: [
          {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            name: "foo",
            uid: "uid-foo",
            controller: true,
          },
        ],
      },
    });
    t.slice("s1", "foo", "n1", 3);
    t.slice("s2", "bar", "n1", 3);
    await t.reconciler.reconcile("foo");
    expect(t.deleted).toEqual([
      "/apis/resource.k8s.io/v1/deviceclasses/foo.vendor.example",
      "/apis/resource.k8s.io/v1/resourceslices/s1",
    ]);
  });

  it("a deleted config's slices are deleted when its name comes back through the queue", async () => {
    const t = withDra();
    t.slice("s1", "gone", "n1", 2);
    t.slice("s2", "foo", "n1", 2);
    t.configs.put(dra());
    expect(await t.reconciler.reconcile("gone")).toEqual({});
    expect(t.deleted).toEqual(["/apis/resource.k8s.io/v1/resourceslices/s1"]);
  });
});

describe("ConfigReconciler: the DeviceClass's extended resource name, as the probe found", () => {
  const stored = config("foo", "2026-01-01T00:00:00Z", { publish: "DRA" });
  const parsed = validateDevicePluginConfig(stored);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const CLASS = "foo.vendor.example";
  const owned = (name: string | undefined) => {
    const cls = renderDeviceClass(parsed.value, name);
    return { ...cls, metadata: { ...cls.metadata, resourceVersion: "7" } };
  };
  const cases: {
    name: string;
    kept: boolean | undefined;
    existing: ReturnType<typeof owned> | undefined;
    /** The class written, with its extended resource name, or "nothing" when none is written. */
    writes: { extendedResourceName: string | undefined } | "nothing";
    condition: string;
    /** spec.dra.deviceClass.extendedResourceName; unset when absent. */
    choice?: string;
  }[] = [
    {
      name: "kept: a chosen name is mapped instead of the resource name",
      kept: true,
      existing: owned("vendor.example/foo"),
      choice: "example.com/accelerator",
      writes: { extendedResourceName: "example.com/accelerator" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "kept: an empty name turns the mapping off, and the class loses the name it had",
      kept: true,
      existing: owned("vendor.example/foo"),
      choice: "",
      writes: { extendedResourceName: undefined },
      condition: "False/ExtendedResourceMappingDisabled",
    },
    {
      name: "kept (1.37): a new class maps the resource name",
      kept: true,
      existing: undefined,
      writes: { extendedResourceName: "vendor.example/foo" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "dropped (1.35 defaults): a new class maps none",
      kept: false,
      existing: undefined,
      writes: { extendedResourceName: undefined },
      condition: "False/ExtendedResourceUnsupported",
    },
    {
      name: "dropped: a class without the name is not rewritten every pass",
      kept: false,
      existing: owned(undefined),
      writes: "nothing",
      condition: "False/ExtendedResourceUnsupported",
    },
    {
      name: "kept: a class without the name gets it",
      kept: true,
      existing: owned(undefined),
      writes: { extendedResourceName: "vendor.example/foo" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "kept: a class with the name is left alone",
      kept: true,
      existing: owned("vendor.example/foo"),
      writes: "nothing",
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "not probed yet: the class keeps the name it has",
      kept: undefined,
      existing: owned("vendor.example/foo"),
      writes: "nothing",
      condition: "Unknown/ExtendedResourceSupportUnknown",
    },
    {
      name: "not probed yet: a new class maps none",
      kept: undefined,
      existing: undefined,
      writes: { extendedResourceName: undefined },
      condition: "Unknown/ExtendedResourceSupportUnknown",
    },
  ];
  it.each(cases)("$name", async ({ kept, existing, writes, condition: want, choice }) => {
    const t = setup();
    const classes = new FakeCache<KubernetesObject & { spec?: unknown }>();
    t.reconciler.useDraInformers(new FakeCache().asInformer() as never, classes.asInformer() as never);
    if (kept !== undefined) t.reconciler.useExtendedResourceNameKept(kept);
    if (existing) classes.put(existing);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.37.2" } as never } });
    t.configs.put(
      choice === undefined
        ? stored
        : config("foo", "2026-01-01T00:00:00Z", {
            publish: "DRA",
            dra: { deviceClass: { extendedResourceName: choice } },
          }),
    );
    await t.reconciler.reconcile("foo");
    const classWrites = t.written.filter((o) => o.kind === "DeviceClass") as {
      metadata: { name: string };
      spec: { extendedResourceName?: string };
    }[];
    if (writes === "nothing") expect(classWrites).toEqual([]);
    else {
      expect(classWrites.map((o) => o.metadata.name)).toEqual([CLASS]);
      expect(classWrites[0]?.spec.extendedResourceName).toBe(writes.extendedResourceName);
    }
    const status = t.applied.filter((a) => a.kind === "status").at(-1)?.status;
    const got = status?.conditions?.find((c) => c.type === "ExtendedResourceMapping");
    expect(`${got?.status}/${got?.reason}`).toBe(want);
    // Informational: it alone never makes the config not Ready.
    expect(status?.conditions?.find((c) => c.type === "Stalled")?.status).toBe("False");
  });

  it("a DevicePlugin config says whether a switch to DRA could map its name, and writes no class", async () => {
    const t = setup();
    t.reconciler.useDraInformers(new FakeCache().asInformer() as never, new FakeCache().asInformer());
    t.reconciler.useExtendedResourceNameKept(false);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.35.4" } as never } });
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    expect(t.written.filter((o) => o.kind === "DeviceClass")).toEqual([]);
    const status = t.applied.filter((a) => a.kind === "status").at(-1)?.status;
    expect(status?.conditions?.find((c) => c.type === "ExtendedResourceMapping")).toMatchObject({
      status: "False",
      reason: "ExtendedResourceUnsupported",
    });
  });
});
