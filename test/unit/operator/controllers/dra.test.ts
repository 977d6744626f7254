// The operator's DRA decisions: the DeviceClass it owns (rendered, kept current, a namesake left alone)
// and which ResourceSlices it deletes (config gone or off DRA, another driver, node gone or not targeted).
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import {
  decideDeviceClass,
  findSlicesToDelete,
  renderDeviceClass,
  type DeviceClass,
} from "../../../../src/operator/controllers/dra.js";
import type { SlimResourceSlice } from "../../../../src/operator/status/published-devices.js";

function config(spec: Partial<DevicePluginConfigSpecInput> = {}, name = "gpu"): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "example.com/gpu",
      backend: { type: "Mock", mock: { devices: 2 } },
      publish: "DRA",
      nodeSelector: { gpu: "yes" },
      ...spec,
    },
  });
}

const OWNER = {
  apiVersion: "dpo.dev/v1beta1",
  kind: "DevicePluginConfig",
  name: "gpu",
  uid: "uid-1",
  controller: true,
  blockOwnerDeletion: true,
};

describe("renderDeviceClass", () => {
  it("selects the driver's devices first, then the spec's selectors; owned, labelled, named by default after the driver", () => {
    const cls = renderDeviceClass(
      config({
        dra: {
          deviceClass: {
            selectors: [{ cel: { expression: 'device.attributes["gpu.example.com"].model == "X100"' } }],
          },
        },
      }),
    );
    expect(cls).toEqual({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: {
        name: "gpu.example.com",
        labels: { "app.kubernetes.io/managed-by": "dpo", "dpo.dev/config": "gpu" },
        ownerReferences: [OWNER],
      },
      spec: {
        selectors: [
          { cel: { expression: 'device.driver == "gpu.example.com"' } },
          { cel: { expression: 'device.attributes["gpu.example.com"].model == "X100"' } },
        ],
      },
    });
  });

  it("takes the class and driver names from spec.dra", () => {
    const cls = renderDeviceClass(
      config({ dra: { driverName: "drv.example.org", deviceClass: { name: "fast-gpus" } } }),
    );
    expect(cls.metadata.name).toBe("fast-gpus");
    expect(cls.spec?.selectors).toEqual([{ cel: { expression: 'device.driver == "drv.example.org"' } }]);
  });
});

describe("decideDeviceClass", () => {
  const desired = renderDeviceClass(config());
  const stored = (change: (c: DeviceClass) => void = () => {}): DeviceClass => {
    const c: DeviceClass = structuredClone({
      ...desired,
      metadata: { ...desired.metadata, uid: "c1", resourceVersion: "42" },
    });
    change(c);
    return c;
  };

  it.each<{ case: string; existing: DeviceClass | undefined; want: string }>([
    { case: "none yet: create", existing: undefined, want: "Create" },
    { case: "as rendered: nothing", existing: stored(), want: "None" },
    {
      case: "someone's extra label and annotation: nothing",
      existing: stored((c) => {
        c.metadata!.labels!["team"] = "ml";
        c.metadata!.annotations = { note: "x" };
      }),
      want: "None",
    },
    {
      case: "selectors edited: update",
      existing: stored((c) => (c.spec!.selectors = [{ cel: { expression: "true" } }])),
      want: "Update",
    },
    {
      case: "a field added to the spec: update",
      existing: stored((c) => (c.spec!["extendedResourceName"] = "example.com/gpu")),
      want: "Update",
    },
    {
      case: "our label removed: update",
      existing: stored((c) => delete c.metadata!.labels!["dpo.dev/config"]),
      want: "Update",
    },
    {
      case: "no owner: a namesake, conflict",
      existing: stored((c) => delete c.metadata!.ownerReferences),
      want: "Conflict",
    },
    {
      case: "owned by a config of the same name but another uid (deleted and re-created): conflict",
      existing: stored((c) => (c.metadata!.ownerReferences = [{ ...OWNER, uid: "uid-0" }])),
      want: "Conflict",
    },
    {
      case: "the config is an owner but not the controller: conflict",
      existing: stored((c) => (c.metadata!.ownerReferences = [{ ...OWNER, controller: false }])),
      want: "Conflict",
    },
  ])("$case", ({ existing, want }) => {
    expect(decideDeviceClass(config(), existing).kind).toBe(want);
  });

  it("an update is the rendered class with the stored resourceVersion, keeping others' labels and annotations", () => {
    const action = decideDeviceClass(
      config(),
      stored((c) => {
        c.spec!.selectors = [];
        c.metadata!.labels!["team"] = "ml";
        c.metadata!.annotations = { note: "x" };
      }),
    );
    expect(action.kind).toBe("Update");
    if (action.kind !== "Update") return;
    expect(action.object.spec).toEqual(desired.spec);
    expect(action.object.metadata).toMatchObject({
      resourceVersion: "42",
      labels: { team: "ml", "dpo.dev/config": "gpu" },
      annotations: { note: "x" },
      ownerReferences: [OWNER],
    });
  });

  it("a conflict names the class and its controller", () => {
    const action = decideDeviceClass(
      config(),
      stored(
        (c) =>
          (c.metadata!.ownerReferences = [
            { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "u", controller: true },
          ]),
      ),
    );
    expect(action).toEqual({
      kind: "Conflict",
      message:
        "DeviceClass gpu.example.com already exists and is not owned by this config (its controller is ConfigMap x); dpo leaves it alone and creates none: delete it, or set spec.dra.deviceClass.name to another name",
    });
  });
});

describe("findSlicesToDelete", () => {
  const slice = (
    name: string,
    node: string,
    opts: { label?: string; driver?: string; deleting?: boolean } = {},
  ): SlimResourceSlice => ({
    metadata: {
      name,
      uid: `u-${name}`,
      labels: { "dpo.dev/config": opts.label ?? "gpu" },
      ...(opts.deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: {
      driver: opts.driver ?? "gpu.example.com",
      nodeName: node,
      pool: { name: node, generation: 1, resourceSliceCount: 1 },
      devices: [],
    },
  });
  const nodes: Record<string, V1Node> = {
    n1: { metadata: { name: "n1", labels: { gpu: "yes" } } },
    n2: { metadata: { name: "n2", labels: { gpu: "no" } } },
    n3: {
      metadata: { name: "n3", labels: { gpu: "yes" } },
      spec: { taints: [{ key: "maintenance", effect: "NoSchedule" }] },
    },
    n4: {
      metadata: { name: "n4", labels: { gpu: "yes" } },
      spec: { taints: [{ key: "drain", effect: "NoExecute" }] },
    },
  };
  const all = [
    slice("a", "n1"),
    slice("b", "n2"),
    slice("c", "n3"),
    slice("d", "n4"),
    slice("e", "gone"),
    slice("f", "n1", { label: "other" }),
    slice("g", "n1", { driver: "old.example.com" }),
    slice("h", "gone", { deleting: true }),
  ];
  const run = (
    cfg: DevicePluginConfig | undefined,
    opts: { synced?: boolean; limit?: number; draPluginOn?: string[] } = {},
  ) =>
    findSlicesToDelete({
      configLabel: "gpu",
      config: cfg,
      slices: all,
      node: (n) => nodes[n],
      nodesSynced: opts.synced ?? true,
      limit: opts.limit ?? 100,
      ...(opts.draPluginOn !== undefined ? { draPluginOn: new Set(opts.draPluginOn) } : {}),
    });
  const summary = (r: ReturnType<typeof run>) => r.slices.map((s) => `${s.slice.metadata.name}:${s.reason}`);

  it.each<{
    case: string;
    cfg: DevicePluginConfig | undefined;
    synced?: boolean;
    draPluginOn?: string[];
    want: string[];
  }>([
    {
      case: "a DRA config: another driver's, a node gone, a node not selected or evicting; a NoSchedule taint keeps it",
      cfg: config(),
      want: ["b:NodeNotTargeted", "d:NodeNotTargeted", "e:NodeGone", "g:OtherDriver"],
    },
    {
      case: "before the node cache is complete, a missing node proves nothing",
      cfg: config(),
      synced: false,
      want: ["g:OtherDriver"],
    },
    {
      case: "switched to DevicePlugin: every slice of the config",
      cfg: config({ publish: "DevicePlugin" }),
      want: ["a:NotDRA", "b:NotDRA", "c:NotDRA", "d:NotDRA", "e:NotDRA", "g:NotDRA"],
    },
    {
      case: "switching to DevicePlugin: the slices of nodes whose DRA plugin still runs stay until it is gone",
      cfg: config({ publish: "DevicePlugin" }),
      draPluginOn: ["n1", "n3"],
      want: ["b:NotDRA", "d:NotDRA", "e:NotDRA"],
    },
    {
      case: "the config is gone: every slice of it, none of another config's",
      cfg: undefined,
      want: ["a:ConfigGone", "b:ConfigGone", "c:ConfigGone", "d:ConfigGone", "e:ConfigGone", "g:ConfigGone"],
    },
  ])("$case", ({ cfg, synced, draPluginOn, want }) => {
    expect(
      summary(
        run(cfg, {
          ...(synced === undefined ? {} : { synced }),
          ...(draPluginOn === undefined ? {} : { draPluginOn }),
        }),
      ),
    ).toEqual(want);
  });

  it("deletes a bounded batch and says how many are left", () => {
    const r = run(undefined, { limit: 2 });
    expect(summary(r)).toEqual(["a:ConfigGone", "b:ConfigGone"]);
    expect(r.remaining).toBe(4);
  });
});
