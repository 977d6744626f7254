// One config means the same sharing on both paths: the devices a time-sliced DRA config publishes take as
// many holders as the device plugin path's replicas (N pods share one device, pod N+1 does not fit), the
// slices say what they sent, several claims prepare one device alike, and the operator's DRASharing
// condition tells an API server that dropped allowMultipleAllocations from one that kept it.
import { describe, expect, it } from "vitest";
import { SharingSchema, type Sharing } from "../../../../src/api/v1beta1/spec.js";
import { LABEL_SHARED_ALLOCATIONS } from "../../../../src/contract/names.js";
import {
  DRA_SHARING,
  draSharingCondition,
  sharedAllocationsKept,
  slimResourceSliceForCache,
  type DraSharingFacts,
  type SlimResourceSlice,
} from "../../../../src/operator/status/index.js";
import {
  MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE,
  quantityAmount,
} from "../../../../src/plugin-runtime/devices/attributes.js";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import type { DraResourceClaim } from "../../../../src/plugin-runtime/dra/claim.js";
import { draPoolDevices, type DraNodeDevice } from "../../../../src/plugin-runtime/dra/devices.js";
import { planClaimPreparation } from "../../../../src/plugin-runtime/dra/prepare.js";
import {
  concurrentAllocations,
  REPLICAS_CAPACITY,
  shareDevice,
  UNREQUESTED_CAPACITY_POLICY,
} from "../../../../src/plugin-runtime/dra/sharing.js";
import {
  desiredSlices,
  planSlices,
  type SliceCapacity,
  type SliceDevice,
} from "../../../../src/plugin-runtime/dra/slices.js";

const physical = (attributes: Record<string, string> = {}): PhysicalDevice => ({
  id: "foo-0",
  numaNode: undefined,
  health: "Healthy",
  reason: "",
  attributes,
});

/**
 * The scheduler's bookkeeping for pods that each ask for one device and name no capacity (the claim an
 * extended resource request becomes, or a plain ExactCount 1 claim), as calculateConsumedCapacity and
 * CmpRequestOverCapacity do it in k8s.io/dynamic-resource-allocation v0.37.2: a device that does not allow
 * multiple allocations goes to one; otherwise each allocation takes every capacity's requestPolicy.default,
 * or its whole value without a policy, and fits while no capacity goes over its value.
 */
function podsAdmitted(device: SliceDevice, pods: number): boolean[] {
  const consumed = new Map<string, number>();
  let holders = 0;
  const out: boolean[] = [];
  for (let pod = 0; pod < pods; pod++) {
    if (device.allowMultipleAllocations !== true) {
      out.push(holders === 0);
      if (holders === 0) holders++;
      continue;
    }
    const caps = Object.entries<SliceCapacity>(device.capacity ?? {});
    const fits = caps.every(([name, c]) => {
      const take = quantityAmount(c.requestPolicy?.default ?? c.value);
      return (consumed.get(name) ?? 0) + take <= quantityAmount(c.value);
    });
    if (fits) {
      for (const [name, c] of caps) {
        consumed.set(name, (consumed.get(name) ?? 0) + quantityAmount(c.requestPolicy?.default ?? c.value));
      }
    }
    out.push(fits);
  }
  return out;
}

describe("one config, the same sharing in both modes", () => {
  const manyAttributes = Object.fromEntries(
    Array.from({ length: MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE }, (_, i) => [
      `a${String(i).padStart(2, "0")}`,
      `v${i}`,
    ]),
  );
  const cases: {
    name: string;
    sharing: Record<string, unknown>;
    attributes: Record<string, string>;
    holders: number;
  }[] = [
    { name: "no sharing", sharing: { strategy: "None" }, attributes: {}, holders: 1 },
    { name: "TimeSlicing 2", sharing: { strategy: "TimeSlicing", replicas: 2 }, attributes: {}, holders: 2 },
    {
      name: "TimeSlicing 4 with failRequestsGreaterThanOne",
      sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true },
      attributes: { model: "X100" },
      holders: 4,
    },
    {
      // Without a policy on memory the first holder would take all 16Gi and the device would be full.
      name: "TimeSlicing 3 on a device with its own capacity",
      sharing: { strategy: "TimeSlicing", replicas: 3 },
      attributes: { memory: "16Gi", model: "X100" },
      holders: 3,
    },
    {
      name: "TimeSlicing 5 on a device with the most attributes the API allows",
      sharing: { strategy: "TimeSlicing", replicas: 5 },
      attributes: manyAttributes,
      holders: 5,
    },
    {
      name: "TimeSlicing 1024",
      sharing: { strategy: "TimeSlicing", replicas: 1024 },
      attributes: {},
      holders: 1024,
    },
  ];
  it.each(cases)(
    "$name: $holders pods share one device on each path, the next one does not",
    ({ sharing, attributes, holders }) => {
      const parsed = SharingSchema.parse(sharing);
      const device = physical(attributes);

      // Device plugin path: the kubelet sees one replica id per holder, and a pod per id.
      const replicas = advertiseDevices([device], parsed);
      expect(replicas).toHaveLength(holders);

      // DRA path: one published device that holders pods fit on, and not one more.
      const [published] = desiredSlices(
        {
          driver: "foo.vendor.example",
          node: "node-1",
          configName: "c",
          devices: draPoolDevices([device], parsed),
        },
        1,
      )[0]!.spec.devices!;
      expect(published).toBeDefined();
      expect(concurrentAllocations(published!)).toBe(holders);
      const admitted = podsAdmitted(published!, holders + 1);
      expect(admitted.filter(Boolean)).toHaveLength(holders);
      expect(admitted[holders]).toBe(false);
      expect(
        Object.keys(published!.attributes ?? {}).length + Object.keys(published!.capacity ?? {}).length,
      ).toBeLessThanOrEqual(MAX_ATTRIBUTES_AND_CAPACITIES_PER_DEVICE);
    },
  );
});

describe("shareDevice", () => {
  const timeSliced = SharingSchema.parse({ strategy: "TimeSlicing", replicas: 3 });
  const replicas = { value: "3", requestPolicy: { default: "1", validValues: ["1"] } };
  const cases: { name: string; sharing: Sharing; device: SliceDevice; want: unknown }[] = [
    {
      name: "not shared: the device as it is",
      sharing: SharingSchema.parse({ strategy: "None" }),
      device: { name: "d", capacity: { memory: { value: "16Gi" } } },
      want: { name: "d", capacity: { memory: { value: "16Gi" } } },
    },
    {
      name: "shared: multiple allocations, the replicas capacity, the backend's capacities taken only when asked",
      sharing: timeSliced,
      device: { name: "d", attributes: { model: { string: "X" } }, capacity: { memory: { value: "16Gi" } } },
      want: {
        name: "d",
        attributes: { model: { string: "X" } },
        allowMultipleAllocations: true,
        capacity: {
          memory: { value: "16Gi", requestPolicy: UNREQUESTED_CAPACITY_POLICY },
          [REPLICAS_CAPACITY]: replicas,
        },
      },
    },
    {
      name: "full device: the capacity sorting last makes room",
      sharing: timeSliced,
      device: {
        name: "d",
        attributes: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`a${i}`, { int: i }])),
        capacity: { mem: { value: "1Gi" }, zmem: { value: "2Gi" } },
      },
      want: {
        name: "d",
        attributes: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`a${i}`, { int: i }])),
        allowMultipleAllocations: true,
        capacity: {
          mem: { value: "1Gi", requestPolicy: UNREQUESTED_CAPACITY_POLICY },
          [REPLICAS_CAPACITY]: replicas,
        },
      },
    },
    {
      name: "full device without capacities: the attribute sorting last makes room",
      sharing: timeSliced,
      device: {
        name: "d",
        attributes: Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`a${i + 10}`, { int: i }])),
      },
      want: {
        name: "d",
        attributes: Object.fromEntries(Array.from({ length: 31 }, (_, i) => [`a${i + 10}`, { int: i }])),
        allowMultipleAllocations: true,
        capacity: { [REPLICAS_CAPACITY]: replicas },
      },
    },
  ];
  it.each(cases)("$name", ({ sharing, device, want }) => {
    expect(shareDevice(device, sharing)).toEqual(want);
  });
});

describe("the slices of a time-sliced pool", () => {
  const sharing = SharingSchema.parse({ strategy: "TimeSlicing", replicas: 2 });
  const input = (devices: PhysicalDevice[]) => ({
    driver: "foo.vendor.example",
    node: "node-1",
    configName: "c",
    devices: draPoolDevices(devices, sharing),
  });

  it("are labelled as sent with allowMultipleAllocations; an empty pool's slice is not", () => {
    expect(desiredSlices(input([physical()]), 1)[0]!.metadata.labels?.[LABEL_SHARED_ALLOCATIONS]).toBe(
      "true",
    );
    expect(desiredSlices(input([]), 1)[0]!.metadata.labels?.[LABEL_SHARED_ALLOCATIONS]).toBeUndefined();
  });

  it("are left alone when stored as sent, and written again when the API server dropped the sharing", () => {
    const [sent] = desiredSlices(input([physical({ memory: "16Gi" })]), 3);
    const stored = { ...sent!, metadata: { ...sent!.metadata, resourceVersion: "7" } };
    expect(planSlices(input([physical({ memory: "16Gi" })]), [stored]).ops).toEqual([]);

    // What a 1.35 API server stores: no allowMultipleAllocations, no request policies.
    const dropped = {
      ...stored,
      spec: {
        ...stored.spec,
        devices: stored.spec.devices!.map((d) => ({
          name: d.name,
          attributes: d.attributes,
          capacity: Object.fromEntries(
            Object.entries(d.capacity ?? {}).map(([k, c]) => [k, { value: c.value }]),
          ),
        })),
      },
    };
    expect(planSlices(input([physical({ memory: "16Gi" })]), [dropped]).ops.map((op) => op.op)).toEqual([
      "update",
    ]);
  });
});

describe("several claims on one shared device", () => {
  const node = { driver: "foo.vendor.example", pool: "node-1", cdiKind: "foo.vendor.example/device" };
  const device: DraNodeDevice = {
    name: "foo-0",
    physicalId: "foo-0",
    health: "Healthy",
    reason: "",
    containerEdits: { env: ["MOCK_DEVICE_FOO_0=foo-0"], deviceNodes: [{ path: "/dev/foo0" }] },
  };
  const claim = (uid: string, shareID: string): DraResourceClaim => ({
    metadata: { namespace: "ns", name: `c-${uid}`, uid },
    status: {
      allocation: {
        devices: {
          results: [{ request: "r", driver: node.driver, pool: node.pool, device: "foo-0", shareID }],
        },
      },
    },
  });

  it("each get their own spec file with the device's own edits, as each replica gets the device's CDI edits", () => {
    const plans = ["uid-a", "uid-b", "uid-c"].map((uid, i) =>
      planClaimPreparation(
        { namespace: "ns", name: `c-${uid}`, uid },
        claim(uid, `share-${i}`),
        node,
        new Map([["foo-0", device]]),
      ),
    );
    const files = new Set<string>();
    for (const [i, plan] of plans.entries()) {
      const uid = ["uid-a", "uid-b", "uid-c"][i]!;
      expect(plan.ok).toBe(true);
      if (!plan.ok) continue;
      files.add(plan.fileName);
      expect(plan.devices).toEqual([
        {
          requestNames: ["r"],
          poolName: "node-1",
          deviceName: "foo-0",
          cdiDeviceIds: [`${node.cdiKind}=${uid}-foo-0`],
        },
      ]);
      expect(plan.spec?.devices).toEqual([{ name: `${uid}-foo-0`, containerEdits: device.containerEdits }]);
    }
    expect(files.size).toBe(3);
  });
});

describe("sharedAllocationsKept", () => {
  const slice = (labelled: boolean, devices: SlimResourceSlice["spec"]["devices"]): SlimResourceSlice => ({
    metadata: { name: "s", labels: labelled ? { [LABEL_SHARED_ALLOCATIONS]: "true" } : {} },
    spec: { driver: "d", pool: { name: "n", generation: 1, resourceSliceCount: 1 }, devices },
  });
  it.each([
    { name: "no slices", slices: [], want: undefined },
    { name: "a labelled slice without devices", slices: [slice(true, [])], want: undefined },
    {
      name: "only slices not sent shared (an older plugin)",
      slices: [slice(false, [{ name: "a" }])],
      want: undefined,
    },
    {
      name: "sent shared, stored shared",
      slices: [slice(true, [{ name: "a", allowMultipleAllocations: true }])],
      want: true,
    },
    {
      name: "sent shared, stored exclusive (1.35)",
      slices: [slice(true, [{ name: "a" }, { name: "b" }])],
      want: false,
    },
    {
      name: "one slice kept it: the gate is the API server's",
      slices: [slice(true, [{ name: "a" }]), slice(true, [{ name: "b", allowMultipleAllocations: true }])],
      want: true,
    },
  ])("$name: $want", ({ slices, want }) => {
    expect(sharedAllocationsKept(slices)).toBe(want);
  });

  it("reads the field through the slim cache", () => {
    const cached = slimResourceSliceForCache({
      metadata: { name: "s", labels: { [LABEL_SHARED_ALLOCATIONS]: "true" } },
      spec: {
        driver: "d",
        pool: { name: "n", generation: 1, resourceSliceCount: 1 },
        devices: [
          { name: "a", allowMultipleAllocations: true, capacity: { x: { value: "1" } } },
          { name: "b" },
        ],
      },
    });
    expect(cached.spec.devices).toEqual([{ name: "a", allowMultipleAllocations: true }, { name: "b" }]);
    expect(sharedAllocationsKept([cached])).toBe(true);
  });
});

describe("draSharingCondition", () => {
  const base: DraSharingFacts = {
    publish: "DRA",
    sharing: { strategy: "TimeSlicing", replicas: 4 },
    resourceApiServed: true,
    kept: true,
  };
  it.each([
    { name: "not shared", facts: { ...base, sharing: { strategy: "None" as const } }, want: undefined },
    { name: "device plugin mode", facts: { ...base, publish: "DevicePlugin" as const }, want: undefined },
    { name: "kept", facts: base, want: ["True", "SharedAllocations"] },
    { name: "dropped", facts: { ...base, kept: false }, want: ["False", "SharedAllocationsUnsupported"] },
    {
      name: "no evidence yet",
      facts: { ...base, kept: undefined },
      want: ["Unknown", "SharedAllocationsUnknown"],
    },
    {
      name: "no resource API",
      facts: { ...base, resourceApiServed: false, kept: undefined },
      want: ["False", "ResourceAPIUnavailable"],
    },
  ])("$name", ({ facts, want }) => {
    const condition = draSharingCondition(facts);
    expect(condition === undefined ? undefined : [condition.status, condition.reason]).toEqual(want);
    if (condition !== undefined) expect(condition.type).toBe(DRA_SHARING);
  });

  it("says how many holders a device gets instead of how many were asked for", () => {
    expect(draSharingCondition({ ...base, kept: false })?.message).toContain(
      "one claim at a time instead of 4",
    );
    expect(draSharingCondition(base)?.message).toContain("up to 4 claims hold it at once");
  });
});
