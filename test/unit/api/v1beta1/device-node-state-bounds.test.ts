// What one node may write in a DeviceNodeState: every list, map and string bounded, the fields its name is made of immutable.
import { describe, expect, it } from "vitest";
import { deviceNodeStateCrd, type StructuralSchema } from "../../../../src/api/crd.js";
import {
  DeviceNodeStateStatusSchema,
  MAX_ATTRIBUTE_KEY,
  MAX_ATTRIBUTE_VALUE,
  MAX_ATTRIBUTES_PER_DEVICE,
} from "../../../../src/api/v1beta1/devicenodestate.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import { buildDeviceNodeState } from "../../../../src/plugin-runtime/report/node-state.js";

const T0 = "2025-01-01T00:00:00.000Z";

interface Visited {
  path: string;
  node: StructuralSchema;
}

function walk(node: StructuralSchema, path: string, out: Visited[] = []): Visited[] {
  out.push({ path, node });
  for (const [name, child] of Object.entries(node.properties ?? {})) walk(child, `${path}.${name}`, out);
  if (node.additionalProperties !== undefined) walk(node.additionalProperties, `${path}.*`, out);
  if (node.items !== undefined) walk(node.items, `${path}[*]`, out);
  return out;
}

const root = deviceNodeStateCrd().spec.versions[0]!.schema.openAPIV3Schema;
const nodes = walk(root, "").filter((n) => n.path.startsWith(".spec") || n.path.startsWith(".status"));

describe("DeviceNodeState CRD bounds", () => {
  it("bounds every string that is not an enum", () => {
    const unbounded = nodes
      .filter((n) => n.node.type === "string" && n.node.enum === undefined && n.node.maxLength === undefined)
      .map((n) => n.path);
    expect(unbounded).toEqual([]);
  });

  it("bounds every list", () => {
    const unbounded = nodes
      .filter((n) => n.node.type === "array" && n.node.maxItems === undefined)
      .map((n) => n.path);
    expect(unbounded).toEqual([]);
  });

  it("bounds every map's entries and key length", () => {
    const maps = nodes.filter((n) => n.node.additionalProperties !== undefined);
    expect(maps.length).toBeGreaterThan(0);
    const unbounded = maps
      .filter(
        (n) =>
          n.node.maxProperties === undefined ||
          !(n.node["x-kubernetes-validations"] ?? []).some((r) =>
            /self\.all\(k, size\(k\) <= \d+\)/.test(r.rule),
          ),
      )
      .map((n) => n.path);
    expect(unbounded).toEqual([]);
  });

  it.each(["configName", "nodeName", "revision"])("spec.%s is immutable", (field) => {
    const rules = root.properties?.spec?.properties?.[field]?.["x-kubernetes-validations"] ?? [];
    expect(rules).toContainEqual(expect.objectContaining({ rule: "self == oldSelf" }));
  });
});

function status(attributes: Record<string, string>): unknown {
  return {
    pluginVersion: "0.1.0",
    kubeletAPIVersion: "v1beta1",
    registration: { state: "Registered", since: T0 },
    advertised: 1,
    healthy: 1,
    devices: [{ id: "d0", health: "Healthy", since: T0, replicas: 1, attributes }],
    updateTime: T0,
  };
}

describe("DeviceNodeState status validation", () => {
  it.each([
    {
      what: "too many attributes",
      attributes: Object.fromEntries(
        Array.from({ length: MAX_ATTRIBUTES_PER_DEVICE + 1 }, (_, i) => [`k${i}`, "v"]),
      ),
    },
    { what: "a long attribute value", attributes: { k: "v".repeat(MAX_ATTRIBUTE_VALUE + 1) } },
    { what: "a long attribute name", attributes: { ["k".repeat(MAX_ATTRIBUTE_KEY + 1)]: "v" } },
  ])("refuses $what, naming the field", ({ attributes }) => {
    const result = DeviceNodeStateStatusSchema.safeParse(status(attributes));
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join("."))).toContainEqual(
      expect.stringMatching(/^devices\.0\.attributes/),
    );
  });

  it("accepts attributes at the bounds", () => {
    const attributes = Object.fromEntries(
      Array.from({ length: MAX_ATTRIBUTES_PER_DEVICE }, (_, i) => [
        `${i}`.padStart(MAX_ATTRIBUTE_KEY, "k"),
        "v".repeat(MAX_ATTRIBUTE_VALUE),
      ]),
    );
    expect(DeviceNodeStateStatusSchema.safeParse(status(attributes)).success).toBe(true);
  });
});

describe("the plugin's report stays within the bounds", () => {
  it("drops and cuts what a backend reports beyond them, so the report is still written", () => {
    const attributes = Object.fromEntries([
      ...Array.from({ length: MAX_ATTRIBUTES_PER_DEVICE + 50 }, (_, i) => [
        `a${String(i).padStart(3, "0")}`,
        "v",
      ]),
      ["z", "x".repeat(MAX_ATTRIBUTE_VALUE * 4)],
      ["k".repeat(MAX_ATTRIBUTE_KEY + 1), "v"],
    ]);
    const physical: PhysicalDevice[] = [{ id: "d0", numaNode: 0, health: "Healthy", reason: "", attributes }];
    const report = buildDeviceNodeState({
      namespace: "dpo-system",
      config: { name: "example-foo" },
      nodeName: "node-a",
      resourceName: "hardware-vendor.example/foo",
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      registration: { registered: true, since: T0 },
      physical,
      advertised: advertiseDevices(physical, { strategy: "None", failRequestsGreaterThanOne: false }),
      since: new Map(),
      now: T0,
    });
    const parsed = DeviceNodeStateStatusSchema.safeParse(report.status);
    expect(parsed.error?.issues ?? []).toEqual([]);
    const kept = report.status.devices[0]?.attributes ?? {};
    expect(Object.keys(kept)).toHaveLength(MAX_ATTRIBUTES_PER_DEVICE);
    // Key order decides what is kept, so the same device always reports the same attributes.
    expect(Object.keys(kept)[0]).toBe("a000");
  });
});
