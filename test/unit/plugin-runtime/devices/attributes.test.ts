// Typed DRA attributes: IDs the API accepts, each value type, capacities, collisions and the per-device
// limit (ResourceSliceMaxAttributesAndCapacitiesPerDevice = 32 in k8s.io/api v0.34.4 resource/v1).
import { describe, expect, it } from "vitest";
import {
  attributeIdBase,
  attributeIds,
  draTypedAttributes,
  isAttributeId,
  isQuantity,
  MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
  truncateUtf8,
  typeAttributeValue,
  type DraAttributeInput,
  type DraAttributeOptions,
  type DraTypedAttributes,
} from "../../../../src/plugin-runtime/devices/attributes.js";

describe("attributeIdBase", () => {
  it.each([
    { key: "model", id: "model" },
    { key: "iommuGroup", id: "iommuGroup" },
    { key: "_x", id: "_x" },
    { key: "pci-address", id: "pci_address" },
    { key: "vendor.id", id: "vendor_id" },
    { key: "0day", id: "_0day" },
    { key: "", id: "_" },
    { key: "a".repeat(32), id: "a".repeat(32) },
    { key: "a".repeat(40), id: "a".repeat(32) },
    { key: "ümlaut", id: "_mlaut" },
  ])("$key → $id", ({ key, id }) => {
    const got = attributeIdBase(key);
    expect(got).toBe(id);
    expect(isAttributeId(got)).toBe(true);
  });
});

describe("attributeIds", () => {
  it.each([
    {
      name: "a valid key keeps its name, the rewritten one that collides gets a hash",
      keys: ["pci-address", "pci_address"],
      check: (ids: Map<string, string>) => {
        expect(ids.get("pci_address")).toBe("pci_address");
        expect(ids.get("pci-address")).toMatch(/^pci_address_[0-9a-f]{8}$/);
      },
    },
    {
      name: "two rewritten keys with the same base: the first in sort order keeps the base",
      keys: ["a.b", "a-b"],
      check: (ids: Map<string, string>) => {
        expect(ids.get("a-b")).toBe("a_b");
        expect(ids.get("a.b")).toMatch(/^a_b_[0-9a-f]{8}$/);
      },
    },
    {
      name: "long keys cut to the same 32 characters stay apart",
      keys: [`${"x".repeat(32)}1`, `${"x".repeat(32)}2`],
      check: (ids: Map<string, string>) => {
        const [a, b] = [...ids.values()];
        expect(a).toBe("x".repeat(32));
        expect(b).toMatch(/^x{23}_[0-9a-f]{8}$/);
      },
    },
  ])("$name", ({ keys, check }) => {
    const ids = attributeIds(keys);
    check(ids);
    expect(new Set(ids.values()).size).toBe(keys.length);
    for (const id of ids.values()) expect(isAttributeId(id)).toBe(true);
    // Order of the input does not matter.
    expect(attributeIds([...keys].reverse())).toEqual(ids);
  });
});

describe("typeAttributeValue", () => {
  it.each([
    { value: "42", typed: { int: 42 } },
    { value: "-3", typed: { int: -3 } },
    { value: "0", typed: { int: 0 } },
    { value: "007", typed: { string: "007" } },
    { value: "9007199254740993", typed: { string: "9007199254740993" } },
    { value: "true", typed: { bool: true } },
    { value: "false", typed: { bool: false } },
    { value: "True", typed: { string: "True" } },
    { value: "1.2.3", typed: { version: "1.2.3" } },
    { value: "12.4.0-rc.1+build.5", typed: { version: "12.4.0-rc.1+build.5" } },
    { value: "v1.2.3", typed: { string: "v1.2.3" } },
    { value: "1.2", typed: { string: "1.2" } },
    { value: "01.2.3", typed: { string: "01.2.3" } },
    { value: "X100", typed: { string: "X100" } },
    { value: "0000:3b:00.0", typed: { string: "0000:3b:00.0" } },
    { value: "", typed: { string: "" } },
    { value: "y".repeat(70), typed: { string: "y".repeat(64) } },
    { value: `1.2.3-${"a".repeat(60)}`, typed: { string: `1.2.3-${"a".repeat(58)}` } },
  ])("$value", ({ value, typed }) => {
    expect(typeAttributeValue(value)).toEqual(typed);
  });

  it("cuts long strings at 64 bytes, never inside a character", () => {
    const got = typeAttributeValue("é".repeat(40)) as { string: string };
    expect(got.string).toBe("é".repeat(32));
    expect(truncateUtf8(`a${"é".repeat(40)}`)).toBe(`a${"é".repeat(31)}`);
  });
});

describe("isQuantity", () => {
  it.each([
    ["80Gi", true],
    ["512Mi", true],
    ["1.5", true],
    ["100m", true],
    ["1e3", true],
    ["4G", true],
    ["Gi", false],
    ["80 Gi", false],
    ["eighty", false],
  ])("%s → %s", (value, ok) => {
    expect(isQuantity(value)).toBe(ok);
  });
});

interface TypedCase {
  name: string;
  input: DraAttributeInput;
  options: DraAttributeOptions;
  want: DraTypedAttributes;
}

describe("draTypedAttributes", () => {
  it.each<TypedCase>([
    {
      name: "Mock attributes: model, memory as capacity, index, NUMA node",
      input: { attributes: { model: "X100", memory: "80Gi", index: "0" }, numaNode: 1 },
      options: {},
      want: {
        attributes: {
          index: { int: 0 },
          model: { string: "X100" },
          numaNode: { int: 1 },
          "resource.kubernetes.io/numaNode": { int: 1 },
        },
        capacity: { memory: { value: "80Gi" } },
        dropped: [],
      },
    },
    {
      name: "PCI attributes with rewritten names",
      input: {
        attributes: { vendor: "0x10de", "pci.address": "0000:3b:00.0", iommuGroup: "12", driver: "vfio-pci" },
      },
      options: {},
      want: {
        attributes: {
          driver: { string: "vfio-pci" },
          iommuGroup: { int: 12 },
          pci_address: { string: "0000:3b:00.0" },
          vendor: { string: "0x10de" },
        },
        capacity: {},
        dropped: [],
      },
    },
    {
      name: "a capacity key the backend names, with a decimal quantity",
      input: { attributes: { bandwidth: "25G", memoryMiB: "81920", slots: "x" } },
      options: { capacityKeys: new Set(["bandwidth", "slots"]) },
      want: {
        // slots is no quantity: typed as an attribute after all.
        attributes: { memoryMiB: { int: 81920 }, slots: { string: "x" } },
        capacity: { bandwidth: { value: "25G" } },
        dropped: [],
      },
    },
    {
      name: "a backend's own numaNode attribute wins over the device's NUMA node (the standard one does not)",
      input: { attributes: { numaNode: "3" }, numaNode: 0 },
      options: {},
      want: {
        attributes: { numaNode: { int: 3 }, "resource.kubernetes.io/numaNode": { int: 0 } },
        capacity: {},
        dropped: [],
      },
    },
    {
      name: "bool and version",
      input: { attributes: { mig: "false", driverVersion: "550.54.15", cuda: "12.4.0" } },
      options: {},
      want: {
        attributes: {
          cuda: { version: "12.4.0" },
          driverVersion: { version: "550.54.15" },
          mig: { bool: false },
        },
        capacity: {},
        dropped: [],
      },
    },
  ])("$name", ({ input, options, want }) => {
    expect(draTypedAttributes(input, options)).toEqual(want);
  });

  it("publishes at most 32 attributes and capacities, dropping the IDs that sort last", () => {
    const attributes: Record<string, string> = {};
    for (let i = 0; i < 29; i++) attributes[`a${String(i).padStart(2, "0")}`] = String(i);
    attributes["z1"] = "1Gi";
    attributes["z2"] = "x";
    attributes["z3"] = "y";
    const got = draTypedAttributes({ attributes, numaNode: 0 });
    const count = Object.keys(got.attributes).length + Object.keys(got.capacity).length;
    expect(count).toBe(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE);
    // resource.kubernetes.io/numaNode first, then a00..a28, numaNode, z1 are kept (sorted IDs); z2 and z3 do not fit.
    expect(got.dropped).toEqual(["z2", "z3"]);
    expect(got.capacity).toEqual({ z1: { value: "1Gi" } });
    expect(got.attributes["numaNode"]).toEqual({ int: 0 });
    expect(got.attributes["resource.kubernetes.io/numaNode"]).toEqual({ int: 0 });
  });

  it("keeps the standard attributes, under their qualified names, when a device has too many", () => {
    const attributes: Record<string, string> = { "resource.kubernetes.io/pcieRoot": "pci0000:3a" };
    for (let i = 0; i < 40; i++) attributes[`a${String(i).padStart(2, "0")}`] = String(i);
    const got = draTypedAttributes({ attributes, numaNode: 1 });
    expect(got.attributes["resource.kubernetes.io/pcieRoot"]).toEqual({ string: "pci0000:3a" });
    expect(got.attributes["resource.kubernetes.io/numaNode"]).toEqual({ int: 1 });
    expect(Object.keys(got.attributes)).toHaveLength(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE);
    expect(got.dropped).toContain("numaNode");
  });

  it("publishes no NUMA node for a device without one, as upstream leaves out numa_node -1", () => {
    expect(draTypedAttributes({ attributes: {}, numaNode: undefined }).attributes).toEqual({});
    expect(draTypedAttributes({ attributes: {}, numaNode: -1 }).attributes).toEqual({});
  });

  it("is deterministic whatever the order of the backend's keys", () => {
    const a = draTypedAttributes({ attributes: { "x-y": "1", x_y: "2", b: "3" } });
    const b = draTypedAttributes({ attributes: { b: "3", x_y: "2", "x-y": "1" } });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });
});
