// DRA device sharing from a config's sharing (the same number of holders per device as the device plugin
// path's replicas), and device health as ResourceSlice taints (value within label limits, timeAdded kept,
// devices gone leave the slice, the 64-device limit once a device is tainted).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SharingSchema, type Sharing } from "../../../../src/api/v1beta1/spec.js";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import {
  concurrentAllocations,
  draDeviceSharing,
  REPLICAS_CAPACITY,
} from "../../../../src/plugin-runtime/dra/sharing.js";
import type { ResourceSlice } from "../../../../src/plugin-runtime/dra/slices.js";
import {
  healthTaints,
  taintedDeviceChunks,
  taintedSliceDevices,
  taintValue,
  UNHEALTHY_TAINT_KEY,
  type HealthDevice,
  type TaintedSliceDevice,
} from "../../../../src/plugin-runtime/dra/taints.js";

describe("draDeviceSharing", () => {
  it.each([
    { name: "no sharing: an exclusive device", sharing: { strategy: "None" }, want: {} },
    {
      name: "TimeSlicing replicas 4: four allocations of one share each",
      sharing: { strategy: "TimeSlicing", replicas: 4 },
      want: {
        allowMultipleAllocations: true,
        capacity: {
          [REPLICAS_CAPACITY]: { value: "4", requestPolicy: { default: "1", validValues: ["1"] } },
        },
      },
    },
  ])("$name", ({ sharing, want }) => {
    expect(draDeviceSharing(SharingSchema.parse(sharing))).toEqual(want);
  });

  const physical: PhysicalDevice[] = [{ id: "dev-0", health: "Healthy", reason: "" } as PhysicalDevice];
  const sharingArb: fc.Arbitrary<Sharing> = fc.oneof(
    fc.constant(SharingSchema.parse({ strategy: "None" })),
    fc
      .record({ replicas: fc.integer({ min: 2, max: 1024 }), failRequestsGreaterThanOne: fc.boolean() })
      .map((s) => SharingSchema.parse({ strategy: "TimeSlicing", ...s })),
  );
  it("one config gives one device as many holders on both paths", () => {
    fc.assert(
      fc.property(sharingArb, (sharing) => {
        const devicePluginHolders = advertiseDevices(physical, sharing).length;
        expect(concurrentAllocations(draDeviceSharing(sharing))).toBe(devicePluginHolders);
      }),
    );
  });

  it("N pods asking for 1 fit one device on each path, and the next does not", () => {
    const sharing = SharingSchema.parse({ strategy: "TimeSlicing", replicas: 3 });
    const device = draDeviceSharing(sharing);
    const policy = device.capacity![REPLICAS_CAPACITY]!;
    // The scheduler's bookkeeping for requests that name no capacity: each takes the default.
    let consumed = 0;
    const admitted: boolean[] = [];
    for (let pod = 0; pod < 4; pod++) {
      const ok = consumed + Number(policy.requestPolicy.default) <= Number(policy.value);
      if (ok) consumed += Number(policy.requestPolicy.default);
      admitted.push(ok);
    }
    expect(admitted).toEqual([true, true, true, false]);
    expect(advertiseDevices(physical, sharing).map((d) => d.id)).toHaveLength(3);
  });
});

describe("taintValue", () => {
  it.each([
    { reason: "ECC error: 12 uncorrectable", want: "ECC_error_12_uncorrectable" },
    { reason: "", want: "Unhealthy" },
    { reason: "  ", want: "Unhealthy" },
    { reason: "-device gone-", want: "device_gone" },
    { reason: "x".repeat(80), want: "x".repeat(63) },
    { reason: `${"a".repeat(62)}: tail`, want: "a".repeat(62) },
    { reason: "Xid 79 (GPU has fallen off the bus)", want: "Xid_79_GPU_has_fallen_off_the_bus" },
  ])("$reason → $want", ({ reason, want }) => {
    expect(taintValue(reason)).toBe(want);
  });

  it("is always a label value", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (reason) => {
        const value = taintValue(reason);
        expect(value.length).toBeLessThanOrEqual(63);
        expect(value).toMatch(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/);
      }),
    );
  });
});

const NOW = new Date("2026-11-27T08:00:00.123Z");
const EARLIER = "2026-11-27T07:00:00Z";

describe("healthTaints", () => {
  it.each([
    { name: "healthy: no taint", device: { health: "Healthy", reason: "" }, previous: undefined, want: [] },
    {
      name: "healthy again: the taint goes",
      device: { health: "Healthy", reason: "" },
      previous: [{ key: UNHEALTHY_TAINT_KEY, value: "x", effect: "NoSchedule", timeAdded: EARLIER }],
      want: [],
    },
    {
      name: "newly unhealthy: NoSchedule, added now",
      device: { health: "Unhealthy", reason: "ECC" },
      previous: undefined,
      want: [
        { key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: "2026-11-27T08:00:00Z" },
      ],
    },
    {
      name: "still unhealthy: timeAdded kept",
      device: { health: "Unhealthy", reason: "ECC" },
      previous: [{ key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: EARLIER }],
      want: [{ key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: EARLIER }],
    },
    {
      name: "another reason: the value follows, timeAdded kept",
      device: { health: "Unhealthy", reason: "thermal" },
      previous: [{ key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: EARLIER }],
      want: [{ key: UNHEALTHY_TAINT_KEY, value: "thermal", effect: "NoSchedule", timeAdded: EARLIER }],
    },
    {
      name: "a taint of another key is not carried over",
      device: { health: "Unhealthy", reason: "ECC" },
      previous: [{ key: "example.com/other", effect: "NoExecute", timeAdded: EARLIER }],
      want: [
        { key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: "2026-11-27T08:00:00Z" },
      ],
    },
  ] as const)("$name", ({ device, previous, want }) => {
    expect(healthTaints(device, previous, NOW)).toEqual(want);
  });
});

function slice(devices: TaintedSliceDevice[]): ResourceSlice {
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceSlice",
    metadata: { name: "dpo-1" },
    spec: {
      driver: "gpu.example.com",
      nodeName: "n1",
      pool: { name: "n1", generation: 1, resourceSliceCount: 1 },
      devices,
    },
  };
}

describe("taintedSliceDevices", () => {
  const dev = (name: string, health: "Healthy" | "Unhealthy", reason = ""): HealthDevice => ({
    name,
    health,
    reason,
    attributes: {},
  });

  it("keeps unhealthy devices, tainted, sorted; a device gone from the node leaves", () => {
    const existing = [
      slice([
        {
          name: "b",
          taints: [{ key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: EARLIER }],
        },
        { name: "gone" },
      ]),
    ];
    expect(
      taintedSliceDevices(
        [dev("c", "Healthy"), dev("b", "Unhealthy", "ECC"), dev("a", "Unhealthy", "hot")],
        existing,
        NOW,
      ),
    ).toEqual([
      {
        name: "a",
        taints: [
          { key: UNHEALTHY_TAINT_KEY, value: "hot", effect: "NoSchedule", timeAdded: "2026-11-27T08:00:00Z" },
        ],
      },
      {
        name: "b",
        taints: [{ key: UNHEALTHY_TAINT_KEY, value: "ECC", effect: "NoSchedule", timeAdded: EARLIER }],
      },
      { name: "c" },
    ]);
  });

  it("an unchanged pool gives the very devices it published, at any later time", () => {
    const devices = [dev("a", "Unhealthy", "ECC"), dev("b", "Healthy")];
    const first = taintedSliceDevices(devices, [], NOW);
    const later = taintedSliceDevices(devices, [slice(first)], new Date(NOW.getTime() + 3_600_000));
    expect(later).toEqual(first);
  });
});

describe("taintedDeviceChunks", () => {
  const many = (n: number, tainted: boolean): TaintedSliceDevice[] =>
    Array.from({ length: n }, (_, i) => ({
      name: `d${String(i).padStart(3, "0")}`,
      ...(tainted && i === 0
        ? { taints: [{ key: UNHEALTHY_TAINT_KEY, effect: "NoSchedule" as const }] }
        : {}),
    }));
  it.each([
    { name: "no devices: one empty slice", devices: many(0, false), sizes: [0] },
    { name: "128 untainted fit one slice", devices: many(128, false), sizes: [128] },
    { name: "129 untainted: two", devices: many(129, false), sizes: [128, 1] },
    { name: "one tainted device: 64 a slice", devices: many(128, true), sizes: [64, 64] },
    { name: "65 with a taint: two", devices: many(65, true), sizes: [64, 1] },
  ])("$name", ({ devices, sizes }) => {
    expect(taintedDeviceChunks(devices).map((c) => c.length)).toEqual(sizes);
  });
});
