// The DeviceNodeState a plugin reports: labels, owner, spec and status from the runtime's view, and `since` tracking.
import { describe, expect, it } from "vitest";
import { DeviceNodeStateStatusSchema } from "../../../../src/api/v1beta1/devicenodestate.js";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import { draDeviceName, draPoolDevices } from "../../../../src/plugin-runtime/dra/devices.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import {
  buildDeviceNodeState,
  deviceNodeStatePath,
  sameReport,
  statusApplyBody,
  trackSince,
  type DeviceSince,
  type NodeStateInput,
} from "../../../../src/plugin-runtime/report/node-state.js";

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const T0 = "2025-01-01T00:00:00.000Z";
const T1 = "2025-01-01T00:01:00.000Z";
const T2 = "2025-01-01T00:02:00.000Z";

function device(id: string, overrides: Partial<PhysicalDevice> = {}): PhysicalDevice {
  return { id, numaNode: 0, health: "Healthy", reason: "", attributes: {}, ...overrides };
}

function input(overrides: Partial<NodeStateInput> = {}): NodeStateInput {
  const physical = overrides.physical ?? [device("foo-0"), device("foo-1", { numaNode: 1 })];
  return {
    namespace: "dpo-system",
    config: { name: "example-foo", uid: "uid-1" },
    nodeName: "node-a",
    resourceName: "hardware-vendor.example/foo",
    pluginVersion: "0.1.0",
    kubeletAPIVersion: "v1beta1",
    registration: { registered: true, since: T0, socket: "/var/lib/kubelet/device-plugins/dpo-foo.sock" },
    physical,
    advertised: advertiseDevices(physical, { strategy: "None", failRequestsGreaterThanOne: false }),
    since: new Map(),
    now: T1,
    ...overrides,
  };
}

describe("trackSince", () => {
  const prev: DeviceSince = new Map([
    ["a", { health: "Healthy", since: T0 }],
    ["b", { health: "Healthy", since: T0 }],
    ["gone", { health: "Unhealthy", since: T0 }],
  ]);
  it.each([
    {
      what: "keeps since for unchanged health, even when the reason changes",
      devices: [device("a", { reason: "something" }), device("b")],
      want: { a: T0, b: T0 },
    },
    {
      what: "stamps now on a health flip",
      devices: [device("a", { health: "Unhealthy", reason: "Overheated" }), device("b")],
      want: { a: T1, b: T0 },
    },
    {
      what: "stamps now on a new device and drops vanished ones",
      devices: [device("a"), device("new")],
      want: { a: T0, new: T1 },
    },
    {
      what: "keeps the first of duplicate ids, as the device set does",
      devices: [device("a", { health: "Unhealthy" }), device("a")],
      want: { a: T1 },
    },
  ])("$what", ({ devices, want }) => {
    const next = trackSince(prev, devices, T1);
    expect(Object.fromEntries([...next].map(([id, v]) => [id, v.since]))).toEqual(want);
  });

  it("moves since twice for a flip and a flip back", () => {
    let since: DeviceSince = new Map();
    since = trackSince(since, [device("a")], T0);
    since = trackSince(since, [device("a", { health: "Unhealthy" })], T1);
    since = trackSince(since, [device("a")], T2);
    expect(since.get("a")).toEqual({ health: "Healthy", since: T2 });
  });
});

describe("buildDeviceNodeState", () => {
  it("builds the object: name, namespace, labels, owner (controller, not blocking deletion) and spec", () => {
    const { object } = buildDeviceNodeState(input());
    expect(object).toEqual({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: {
        name: "example-foo-node-a-1c111f8095",
        namespace: "dpo-system",
        labels: { "dpo.dev/config": "example-foo", "dpo.dev/node": "node-a" },
        ownerReferences: [
          {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            name: "example-foo",
            uid: "uid-1",
            controller: true,
            blockOwnerDeletion: false,
          },
        ],
      },
      spec: { configName: "example-foo", nodeName: "node-a", resourceName: "hardware-vendor.example/foo" },
    });
  });

  it("bounds label values for long names", () => {
    const node = `${"n".repeat(70)}.example`;
    const { object } = buildDeviceNodeState(
      input({ nodeName: node, config: { name: "c".repeat(80), uid: "u" } }),
    );
    for (const value of Object.values(object.metadata.labels)) {
      expect(value.length).toBeLessThanOrEqual(63);
      expect(value).toMatch(LABEL_VALUE);
    }
    expect(object.spec.nodeName).toBe(node);
  });

  it("has no owner when the config carries no uid", () => {
    const { object } = buildDeviceNodeState(input({ config: { name: "example-foo" } }));
    expect(object.metadata.ownerReferences).toBeUndefined();
  });

  const flaky = device("foo-1", { health: "Unhealthy", reason: "Overheated", numaNode: undefined });
  it.each([
    {
      what: "all healthy, no sharing",
      physical: [
        device("foo-0", { attributes: { model: "X100", index: "0", memory: "80Gi" } }),
        device("foo-1"),
      ],
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      since: new Map(),
      want: {
        advertised: 2,
        healthy: 2,
        devices: [
          {
            id: "foo-0",
            health: "Healthy",
            since: T1,
            numaNode: 0,
            replicas: 1,
            attributes: { index: "0", memory: "80Gi", model: "X100" },
            typedAttributes: {
              index: { int: 0 },
              model: { string: "X100" },
              numaNode: { int: 0 },
              "resource.kubernetes.io/numaNode": { int: 0 },
            },
            capacity: { memory: { value: "80Gi" } },
          },
          {
            id: "foo-1",
            health: "Healthy",
            since: T1,
            numaNode: 0,
            replicas: 1,
            typedAttributes: { numaNode: { int: 0 }, "resource.kubernetes.io/numaNode": { int: 0 } },
          },
        ],
      },
    },
    {
      what: "one unhealthy device under time-slicing counts every replica",
      physical: [device("foo-0"), flaky],
      sharing: { strategy: "TimeSlicing" as const, replicas: 4, failRequestsGreaterThanOne: false },
      since: new Map([
        ["foo-0", { health: "Healthy" as const, since: T0 }],
        ["foo-1", { health: "Unhealthy" as const, since: T0 }],
      ]),
      want: {
        advertised: 8,
        healthy: 4,
        devices: [
          {
            id: "foo-0",
            health: "Healthy",
            since: T0,
            numaNode: 0,
            replicas: 4,
            typedAttributes: { numaNode: { int: 0 }, "resource.kubernetes.io/numaNode": { int: 0 } },
          },
          { id: "foo-1", health: "Unhealthy", reason: "Overheated", since: T0, replicas: 4 },
        ],
      },
    },
    {
      what: "a tracked since for another health is not used",
      physical: [flaky],
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      since: new Map([["foo-1", { health: "Healthy" as const, since: T0 }]]),
      want: {
        advertised: 1,
        healthy: 0,
        devices: [{ id: "foo-1", health: "Unhealthy", reason: "Overheated", since: T1, replicas: 1 }],
      },
    },
    {
      what: "duplicate physical ids are reported once",
      physical: [device("foo-0"), device("foo-0", { health: "Unhealthy" })],
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      since: new Map(),
      want: {
        advertised: 1,
        healthy: 1,
        devices: [
          {
            id: "foo-0",
            health: "Healthy",
            since: T1,
            numaNode: 0,
            replicas: 1,
            typedAttributes: { numaNode: { int: 0 }, "resource.kubernetes.io/numaNode": { int: 0 } },
          },
        ],
      },
    },
    {
      what: "no devices",
      physical: [],
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      since: new Map(),
      want: { advertised: 0, healthy: 0, devices: [] },
    },
  ])("status: $what", ({ physical, sharing, since, want }) => {
    const { status } = buildDeviceNodeState(
      input({ physical, advertised: advertiseDevices(physical, sharing), since }),
    );
    expect(status).toMatchObject(want);
    expect(status.devices).toEqual(want.devices);
    expect(DeviceNodeStateStatusSchema.safeParse(status).success).toBe(true);
  });

  it("reports each device's typed attributes and capacities exactly as its ResourceSlice publishes them", () => {
    const physical = [
      device("gpu-0", {
        numaNode: 1,
        attributes: {
          model: "X100",
          memory: "80Gi",
          driver: "550.54.15",
          mig: "false",
          "pci.bus-id": "0000:3b:00.0",
        },
      }),
      device("ttyUSB0", { numaNode: undefined, attributes: {} }),
    ];
    const { status } = buildDeviceNodeState(
      input({
        physical,
        advertised: advertiseDevices(physical, { strategy: "None", failRequestsGreaterThanOne: false }),
      }),
    );
    const pool = new Map(draPoolDevices(physical).map((d) => [d.name, d]));
    for (const reported of status.devices) {
      const slice = pool.get(draDeviceName(reported.id))!;
      expect(reported.typedAttributes ?? {}).toEqual(slice.attributes);
      expect(reported.capacity ?? {}).toEqual(slice.capacity);
    }
    expect(status.devices[0]).toMatchObject({
      typedAttributes: {
        driver: { version: "550.54.15" },
        mig: { bool: false },
        model: { string: "X100" },
        numaNode: { int: 1 },
        pci_bus_id: { string: "0000:3b:00.0" },
      },
      capacity: { memory: { value: "80Gi" } },
    });
    // A device with nothing to type carries neither field (no empty objects in the report).
    expect(status.devices[1]).not.toHaveProperty("typedAttributes");
    expect(status.devices[1]).not.toHaveProperty("capacity");
    expect(DeviceNodeStateStatusSchema.safeParse(status).success).toBe(true);
  });

  it.each([
    { what: "no member", value: {}, ok: false },
    { what: "two members", value: { int: 1, string: "1" }, ok: false },
    { what: "an int", value: { int: 1 }, ok: true },
    { what: "a bool", value: { bool: false }, ok: true },
    { what: "a version", value: { version: "1.2.3" }, ok: true },
    { what: "a string over 64 bytes", value: { string: "x".repeat(65) }, ok: false },
    { what: "an unknown member", value: { float: 1.5 }, ok: false },
  ])("the schema takes a typed attribute with $what: $ok", ({ value, ok }) => {
    const status = buildDeviceNodeState(input({})).status;
    const devices = [{ id: "d", health: "Healthy", since: T1, replicas: 1, typedAttributes: { a: value } }];
    expect(DeviceNodeStateStatusSchema.safeParse({ ...status, devices }).success).toBe(ok);
  });

  it("the schema refuses more than 32 typed attributes on one device", () => {
    const status = buildDeviceNodeState(input({})).status;
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`a${i}`, { int: i }]));
    const devices = [{ id: "d", health: "Healthy", since: T1, replicas: 1, typedAttributes: many }];
    expect(DeviceNodeStateStatusSchema.safeParse({ ...status, devices }).success).toBe(false);
  });

  it.each([
    {
      what: "none held",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: [],
      want: [
        ["foo-0", 1, "-"],
        ["foo-1", 1, "-"],
        ["foo-2", 1, "-"],
      ],
      advertised: 3,
    },
    {
      what: "DRA path: one held by device-plugin pods, left out, after the advertised ones",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: ["foo-0"],
      want: [
        ["foo-1", 1, "-"],
        ["foo-2", 1, "-"],
        ["foo-0", 0, "DevicePlugin"],
      ],
      advertised: 2,
    },
    {
      what: "device-plugin path: one held by DRA claims, still advertised",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: ["foo-1"],
      keepAdvertised: true,
      want: [
        ["foo-0", 1, "-"],
        ["foo-1", 1, "DRA"],
        ["foo-2", 1, "-"],
      ],
      advertised: 3,
    },
    {
      what: "time-sliced: a held device has no replica here",
      sharing: { strategy: "TimeSlicing" as const, replicas: 2, failRequestsGreaterThanOne: false },
      held: ["foo-2", "foo-1"],
      want: [
        ["foo-0", 2, "-"],
        ["foo-1", 0, "DevicePlugin"],
        ["foo-2", 0, "DevicePlugin"],
      ],
      advertised: 2,
    },
    {
      what: "an id the backend no longer has is not reported",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: ["gone"],
      want: [
        ["foo-0", 1, "-"],
        ["foo-1", 1, "-"],
        ["foo-2", 1, "-"],
      ],
      advertised: 3,
    },
  ])("devices the other publish path holds: $what", ({ sharing, held, want, advertised, ...rest }) => {
    const keepAdvertised = "keepAdvertised" in rest && rest.keepAdvertised === true;
    const physical = [device("foo-0"), device("foo-1"), device("foo-2", { health: "Unhealthy" })];
    const ids = new Set(held);
    const { status } = buildDeviceNodeState(
      input({
        physical,
        advertised: advertiseDevices(
          physical.filter((d) => keepAdvertised || !ids.has(d.id)),
          sharing,
        ),
        heldElsewhere: { by: keepAdvertised ? "DRA" : "DevicePlugin", ids },
      }),
    );
    expect(status.devices.map((d) => [d.id, d.replicas, d.heldBy ?? "-"])).toEqual(want);
    expect(status.advertised).toBe(advertised);
    // A held device keeps its own health; it is not counted as advertised, healthy or not.
    expect(status.devices.find((d) => d.id === "foo-2")?.health).toBe("Unhealthy");
    expect(DeviceNodeStateStatusSchema.safeParse(status).success).toBe(true);
  });

  it("reports the kubelet's allocated count only when it is known", () => {
    expect(buildDeviceNodeState(input({ allocated: 2 })).status.allocated).toBe(2);
    expect(buildDeviceNodeState(input({ allocated: 0 })).status.allocated).toBe(0);
    const unknown = buildDeviceNodeState(input({ allocated: undefined })).status;
    expect("allocated" in unknown).toBe(false);
    expect(DeviceNodeStateStatusSchema.safeParse({ ...unknown, allocated: 3 }).success).toBe(true);
    expect(DeviceNodeStateStatusSchema.safeParse({ ...unknown, allocated: -1 }).success).toBe(false);
  });

  it.each([
    {
      what: "registered",
      registration: { registered: true, since: T0, socket: "/dp/dpo.sock" },
      want: { state: "Registered", since: T0, socket: "/dp/dpo.sock" },
    },
    {
      what: "not registered, with the kubelet's refusal",
      registration: { registered: false, since: T0, lastError: "resource name is invalid" },
      want: { state: "NotRegistered", since: T0, lastError: "resource name is invalid" },
    },
    {
      what: "empty error and socket are left out",
      registration: { registered: false, since: T0, lastError: "", socket: "" },
      want: { state: "NotRegistered", since: T0 },
    },
    {
      what: "standing by for an older instance (a Replace with the new plugin started ahead)",
      registration: { registered: false, standingBy: true, since: T0, socket: "/dp/new.sock" },
      want: { state: "StandingBy", since: T0, socket: "/dp/new.sock" },
    },
    {
      what: "registered wins over a standby that has not been cleared yet",
      registration: { registered: true, standingBy: true, since: T0 },
      want: { state: "Registered", since: T0 },
    },
    {
      what: "a long error is bounded",
      registration: { registered: false, since: T0, lastError: "e".repeat(5000) },
      want: { state: "NotRegistered", since: T0, lastError: `${"e".repeat(1023)}…` },
    },
    {
      what: "a self-heal, its message bounded, healed once the kubelet listed the devices again",
      registration: {
        registered: true,
        since: T0,
        selfHeal: {
          count: 2,
          lastAtMs: Date.parse(T0),
          message: "m".repeat(500),
          healedAtMs: Date.parse(T1),
        },
      },
      want: {
        state: "Registered",
        since: T0,
        selfHeal: { count: 2, lastTime: T0, message: `${"m".repeat(255)}…`, healedTime: T1 },
      },
    },
  ])("registration: $what", ({ registration, want }) => {
    const { status } = buildDeviceNodeState(input({ registration }));
    expect(status.registration).toEqual(want);
    expect(DeviceNodeStateStatusSchema.safeParse(status).success).toBe(true);
  });

  it("reports versions, the config hash and the update time", () => {
    const { status } = buildDeviceNodeState(input({ configHash: "abc123" }));
    expect(status).toMatchObject({
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      configHash: "abc123",
      updateTime: T1,
    });
    expect(buildDeviceNodeState(input()).status).not.toHaveProperty("configHash");
  });

  it("caps the device list at the schema's 4096 entries", () => {
    const physical = Array.from({ length: 5000 }, (_, i) => device(`d-${i}`));
    const { status } = buildDeviceNodeState(
      input({
        physical,
        advertised: advertiseDevices(physical, { strategy: "None", failRequestsGreaterThanOne: false }),
      }),
    );
    expect(status.devices).toHaveLength(4096);
    expect(status.advertised).toBe(5000);
  });
});

describe("sameReport", () => {
  const base = buildDeviceNodeState(input()).status;
  it.each([
    { what: "nothing written yet", a: undefined, b: base, want: false },
    { what: "only updateTime differs", a: base, b: { ...base, updateTime: T2 }, want: true },
    { what: "health differs", a: base, b: { ...base, healthy: 1 }, want: false },
    {
      what: "registration differs",
      a: base,
      b: { ...base, registration: { ...base.registration, state: "NotRegistered" as const } },
      want: false,
    },
  ])("$what → $want", ({ a, b, want }) => {
    expect(sameReport(a, b)).toBe(want);
  });
});

describe("apply bodies", () => {
  it("addresses the namespaced resource and sends only identity and status to /status", () => {
    const report = buildDeviceNodeState(input());
    expect(deviceNodeStatePath("dpo-system", "example-foo-node-a-1c111f8095")).toBe(
      "/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates/example-foo-node-a-1c111f8095",
    );
    expect(statusApplyBody(report)).toEqual({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: { name: "example-foo-node-a-1c111f8095", namespace: "dpo-system" },
      status: report.status,
    });
  });
});
