// Pure pieces of the operator's controller: drift detection, which node updates matter, and which configs
// an event concerns.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { containsDesired } from "../../../../src/operator/model/drift.js";
import {
  configForLabel,
  configForSlice,
  configUpdateMatters,
  configsForConfig,
  configsForDeviceClass,
  configsForNode,
  nodeChangeMatters,
  ownerConfigName,
  specDeviceClassName,
  type ConfigLookup,
} from "../../../../src/operator/controllers/mapping.js";
import type { StoredConfig } from "../../../../src/operator/controllers/config-reconciler.js";
import { configLabelValue } from "../../../../src/contract/names.js";

describe("containsDesired", () => {
  it.each([
    ["equal scalars", 1, 1, true],
    ["different scalars", 1, 2, false],
    ["int-or-string", 8080, "8080", true],
    ["extra server fields are fine", { a: 1 }, { a: 1, b: 2 }, true],
    ["missing field", { a: 1, b: 2 }, { a: 1 }, false],
    ["zero value dropped by omitempty", { readOnly: false, n: 0, s: "" }, {}, true],
    ["empty object absent", { annotations: {} }, {}, true],
    ["empty array absent", { tolerations: [] }, {}, true],
    ["array length differs", { a: [1, 2] }, { a: [1] }, false],
    ["array element differs", { a: [{ x: 1 }] }, { a: [{ x: 2 }] }, false],
    ["array elements with server defaults", { a: [{ x: 1 }] }, { a: [{ x: 1, y: "default" }] }, true],
    ["object vs scalar", { a: { b: 1 } }, { a: 1 }, false],
    ["nothing cached", { a: 1 }, undefined, false],
    [
      "drift in a nested field",
      { spec: { template: { image: "a" } } },
      { spec: { template: { image: "b" } } },
      false,
    ],
  ])("%s", (_name, desired, actual, want) => {
    expect(containsDesired(desired, actual)).toBe(want);
  });
});

function node(
  patch: Partial<{
    labels: Record<string, string>;
    ready: string;
    capacity: Record<string, string>;
    heartbeat: string;
    taints: { key: string; effect: string }[];
  }>,
): V1Node {
  return {
    metadata: { name: "n", labels: patch.labels ?? { a: "1" } },
    spec: { taints: patch.taints },
    status: {
      capacity: patch.capacity ?? { cpu: "4" },
      allocatable: patch.capacity ?? { cpu: "4" },
      conditions: [
        {
          type: "Ready",
          status: patch.ready ?? "True",
          lastHeartbeatTime: new Date(patch.heartbeat ?? "2026-01-01T00:00:00Z"),
        },
      ],
    },
  };
}

describe("nodeChangeMatters", () => {
  it.each([
    ["heartbeat only", node({}), node({ heartbeat: "2026-01-01T00:00:10Z" }), false],
    ["label change", node({}), node({ labels: { a: "2" } }), true],
    ["Ready flips", node({}), node({ ready: "False" }), true],
    ["capacity of a resource", node({}), node({ capacity: { cpu: "4", "vendor.example/foo": "4" } }), true],
    ["taint added", node({}), node({ taints: [{ key: "k", effect: "NoSchedule" }] }), true],
  ])("%s", (_name, old, cur, want) => {
    expect(nodeChangeMatters(old, cur)).toBe(want);
  });
});

describe("ownerConfigName", () => {
  it("finds the DevicePluginConfig owner and ignores others", () => {
    expect(
      ownerConfigName({
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "DaemonSet", name: "x", uid: "1" },
          { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", name: "foo", uid: "2" },
        ],
      }),
    ).toBe("foo");
    expect(ownerConfigName({ ownerReferences: [] })).toBeUndefined();
    expect(ownerConfigName(undefined)).toBeUndefined();
  });
});

describe("which configs an event concerns", () => {
  const stored = (name: string, spec: Record<string, unknown>, extra: object = {}): StoredConfig => ({
    metadata: { name, generation: 1, ...extra },
    spec,
  });
  const longName = `c-${"x".repeat(70)}`;
  const all = [
    stored("gpu", { resourceName: "v.example/gpu", nodeSelector: { gpu: "true" } }),
    stored("gpu-late", { resourceName: "v.example/gpu", nodeSelector: { other: "true" } }),
    stored("fpga", { resourceName: "v.example/fpga", nodeSelector: { fpga: "true" } }),
    stored("dra", { resourceName: "v.example/dra", publish: "DRA" }),
    stored(longName, { resourceName: "v.example/long" }),
  ];
  const configs: ConfigLookup = {
    get: (name) => all.find((c) => c.metadata?.name === name),
    list: () => all,
  };
  const node = (labels: Record<string, string>): V1Node => ({ metadata: { name: "n", labels } });
  /** The configs without a nodeSelector select every node. */
  const rest = ["dra", "dra", longName, longName];

  it.each<[string, V1Node | undefined, V1Node | undefined, string[]]>([
    // Each config that selects the node, then the configs of its resource name (itself too: the queue
    // holds a name once).
    ["a GPU node added", undefined, node({ gpu: "true" }), ["gpu", "gpu", "gpu-late", ...rest]],
    ["an FPGA node deleted", node({ fpga: "true" }), undefined, ["fpga", "fpga", ...rest]],
    ["a node that only the empty selectors match", undefined, node({}), rest],
    [
      "a node relabelled from FPGA to GPU: both sides",
      node({ fpga: "true" }),
      node({ gpu: "true" }),
      ["gpu", "gpu", "gpu-late", "fpga", "fpga", ...rest],
    ],
  ])("%s", (_name, old, cur, want) => {
    expect(configsForNode(configs, old, cur)).toEqual(want);
  });

  it("a config change concerns the config and those sharing its resource name", () => {
    expect(configsForConfig(configs, all[0]!)).toEqual(["gpu", "gpu", "gpu-late"]);
    expect(configsForConfig(configs, stored("gone", {}))).toEqual(["gone"]);
  });

  it("a config change concerns the configs writing CDI specs of its kind too", () => {
    const cdi = (name: string, resourceName: string, c: Record<string, unknown>) => ({
      ...stored(name, {}),
      spec: { resourceName, cdi: c },
    });
    const writers = [
      cdi("x", "v.example/x", { enabled: true, kind: "v.example/k" }),
      cdi("y", "v.example/k", { enabled: true }),
      cdi("z", "v.example/z", { enabled: false, kind: "v.example/k" }),
    ];
    const lookup = { list: () => writers, get: (n: string) => writers.find((w) => w.metadata?.name === n) };
    expect(configsForConfig(lookup as never, writers[0]!)).toEqual(["x", "x", "x", "y"]);
  });

  it("a label value finds its config, also through a long name's hashed value", () => {
    expect(configForLabel(configs, "gpu")).toBe("gpu");
    expect(configLabelValue(longName)).not.toBe(longName);
    expect(configForLabel(configs, configLabelValue(longName))).toBe(longName);
    expect(configForLabel(configs, "nobody")).toBeUndefined();
    expect(configForLabel(configs, undefined)).toBeUndefined();
  });

  it("a slice concerns the config of its label, or the deleted config its label names", () => {
    const slice = (label?: string) =>
      ({ metadata: { name: "s", labels: label ? { "dpo.dev/config": label } : {} }, spec: {} }) as never;
    expect(configForSlice(configs, slice("gpu"))).toBe("gpu");
    expect(configForSlice(configs, slice("deleted"))).toBe("deleted");
    expect(configForSlice(configs, slice())).toBeUndefined();
  });

  it("a DeviceClass concerns its owner and the configs that want its name", () => {
    expect(specDeviceClassName(all[3]!)).toBe("dra.v.example");
    expect(specDeviceClassName(all[0]!)).toBeUndefined();
    const owned = {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      name: "fpga",
      uid: "u",
    };
    expect(configsForDeviceClass(configs, { metadata: { name: "dra.v.example" } })).toEqual(["dra"]);
    expect(configsForDeviceClass(configs, { metadata: { name: "other", ownerReferences: [owned] } })).toEqual(
      ["fpga"],
    );
  });

  it.each<[string, object, object, boolean]>([
    ["our own status write", { status: { a: 1 } }, { status: { mine: true } }, false],
    ["someone else's status", { status: { a: 1 } }, { status: { theirs: true } }, true],
    ["a spec change (generation)", { metadata: { generation: 2 } }, {}, true],
    ["a label change", { metadata: { generation: 1, labels: { a: "b" } } }, {}, true],
    ["deletion", { metadata: { generation: 1, deletionTimestamp: "2026-01-01T00:00:00Z" } }, {}, true],
    ["nothing", {}, {}, false],
  ])("config update: %s", (_name, oldPatch, curPatch, want) => {
    const base = { metadata: { name: "gpu", generation: 1 }, spec: {} };
    const isOwn = (_name: string, status: unknown) => JSON.stringify(status) === '{"mine":true}';
    expect(configUpdateMatters({ ...base, ...oldPatch }, { ...base, ...curPatch }, isOwn)).toBe(want);
  });
});
