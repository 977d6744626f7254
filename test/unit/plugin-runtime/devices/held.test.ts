// The pure rules for devices the node's other publish path holds after a switch of spec.publish (held.ts):
// which offered ids the device plugin must not give, which Allocate requests take more of a held device
// than its holders leave, how the preferred answer orders them, and how the PodResources answer counts the
// DRA claims' shares.
import { describe, expect, it } from "vitest";
import { advertiseDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import {
  checkAllocateRequest,
  describeAllocateRejection,
  preferredAllocation,
} from "../../../../src/plugin-runtime/devices/allocation.js";
import {
  countShares,
  heldConflicts,
  heldOfferedIds,
  sameShares,
} from "../../../../src/plugin-runtime/devices/held.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";
import { draDeviceName } from "../../../../src/plugin-runtime/dra/devices.js";
import { draClaimShares } from "../../../../src/plugin-runtime/podresources/allocations.js";
import type { ListPodResourcesResponse } from "../../../../src/plugin-runtime/proto/index.js";

const NONE = { strategy: "None" as const, failRequestsGreaterThanOne: false };
const SLICED = { strategy: "TimeSlicing" as const, replicas: 4, failRequestsGreaterThanOne: false };

function devicesOf(sharing: typeof NONE | typeof SLICED, count = 3) {
  const physical: PhysicalDevice[] = Array.from({ length: count }, (_, i) => ({
    id: `s-${i}`,
    numaNode: 0,
    health: "Healthy",
    reason: "",
    attributes: {},
  }));
  return new Map(advertiseDevices(physical, sharing).map((d) => [d.id, d]));
}

describe("heldOfferedIds", () => {
  it.each([
    { what: "nothing held", sharing: NONE, offered: ["s-0", "s-1"], held: [], want: [] },
    {
      what: "without sharing: every offered id of a held device",
      sharing: NONE,
      offered: ["s-0", "s-1", "s-2"],
      held: [["s-1", 1]],
      want: ["s-1"],
    },
    {
      what: "time-sliced: as many offered replicas as shares held, highest replica first",
      sharing: SLICED,
      offered: ["s-0::0", "s-0::1", "s-0::2", "s-0::3", "s-1::0"],
      held: [["s-0", 2]],
      want: ["s-0::3", "s-0::2"],
    },
    {
      what: "time-sliced: fewer offered than held shares (the rest already given) holds all offered",
      sharing: SLICED,
      offered: ["s-0::1"],
      held: [["s-0", 3]],
      want: ["s-0::1"],
    },
    {
      what: "unknown and repeated ids are not counted",
      sharing: NONE,
      offered: ["x-9", "s-2", "s-2"],
      held: [
        ["x-9", 1],
        ["s-2", 1],
      ],
      want: ["s-2"],
    },
  ] as const)("$what", ({ sharing, offered, held, want }) => {
    const ids = heldOfferedIds(offered, devicesOf(sharing), new Map(held));
    expect([...ids]).toEqual(want);
  });
});

describe("heldConflicts", () => {
  it.each([
    { what: "nothing held", sharing: NONE, request: ["s-0"], held: [], allocated: [], want: [] },
    {
      what: "without sharing: a held device is never given",
      sharing: NONE,
      request: ["s-0", "s-1"],
      held: [["s-1", 1]],
      allocated: [],
      want: ["s-1"],
    },
    {
      what: "without sharing: other devices are",
      sharing: NONE,
      request: ["s-0", "s-2"],
      held: [["s-1", 1]],
      allocated: [],
      want: [],
    },
    {
      what: "time-sliced: replicas left beside the held shares may be given",
      sharing: SLICED,
      request: ["s-0::0", "s-0::1"],
      held: [["s-0", 1]],
      allocated: ["s-0::2"],
      want: [],
    },
    {
      what: "time-sliced: one more than the holders leave is refused, every requested id of it named",
      sharing: SLICED,
      request: ["s-0::0", "s-0::1"],
      held: [["s-0", 2]],
      allocated: ["s-0::2"],
      want: ["s-0::0", "s-0::1"],
    },
    {
      what: "the request's own ids in the kubelet's view are not counted twice",
      sharing: SLICED,
      request: ["s-0::0"],
      held: [["s-0", 3]],
      allocated: ["s-0::0"],
      want: [],
    },
  ] as const)("$what", ({ sharing, request, held, allocated, want }) => {
    expect(heldConflicts(request, devicesOf(sharing), new Map(held), allocated)).toEqual(want);
  });

  it("is the last check of Allocate, with its own rejection", () => {
    const devices = devicesOf(NONE);
    const conflicts = (ids: readonly string[]) => heldConflicts(ids, devices, new Map([["s-1", 1]]), []);
    const check = checkAllocateRequest(["s-1"], devices, NONE, conflicts);
    expect(check).toEqual({ kind: "HeldElsewhere", ids: ["s-1"] });
    if (check.kind === "Ok") throw new Error("unreachable");
    expect(describeAllocateRejection(check)).toBe("devices held by pods of the other publish path: s-1");
    // A malformed request is reported as such first.
    expect(checkAllocateRequest(["s-1", "s-9"], devices, NONE, conflicts).kind).toBe("Unknown");
    expect(checkAllocateRequest(["s-0"], devices, NONE, conflicts)).toEqual({
      kind: "Ok",
      physicalIds: ["s-0"],
    });
  });
});

describe("preferredAllocation with held devices", () => {
  it.each(["None", "Packed", "Spread", "NUMAAligned"] as const)(
    "%s: held ids only after every other healthy one, and the answer still has the size asked",
    (policy) => {
      const devices = devicesOf(NONE, 4);
      const request = { available: ["s-0", "s-1", "s-2", "s-3"], mustInclude: [], size: 3 };
      const held = new Set(["s-0", "s-1"]);
      expect(preferredAllocation(policy, devices, { ...request, size: 2, held }).sort()).toEqual([
        "s-2",
        "s-3",
      ]);
      const three = preferredAllocation(policy, devices, { ...request, held });
      expect(three).toHaveLength(3);
      expect(three.filter((id) => held.has(id))).toHaveLength(1);
    },
  );
});

describe("shares", () => {
  it("counts and compares", () => {
    expect([...countShares(["a", "b", "a"])]).toEqual([
      ["a", 2],
      ["b", 1],
    ]);
    expect(sameShares(undefined, new Map())).toBe(false);
    expect(sameShares(new Map([["a", 1]]), new Map([["a", 1]]))).toBe(true);
    expect(sameShares(new Map([["a", 1]]), new Map([["a", 2]]))).toBe(false);
    expect(sameShares(new Map([["a", 1]]), new Map([["b", 1]]))).toBe(false);
  });

  it("draClaimShares: one share per distinct claim (and consumable-capacity share) of this driver's pool", () => {
    const driver = "gpu.example.com";
    const table = {
      driver,
      pool: "node-a",
      ids: new Map(["gpu-0", "gpu-1", "ttyUSB0"].map((id) => [draDeviceName(id), id])),
    };
    const claim = (name: string, devices: [string, string, string, string?][]) => ({
      claimName: name,
      claimNamespace: "ml",
      claimResources: devices.map(([driverName, poolName, deviceName, shareId]) => ({
        driverName,
        poolName,
        deviceName,
        shareId,
        cdiDevices: [],
      })),
    });
    const response: ListPodResourcesResponse = {
      podResources: [
        {
          name: "a",
          namespace: "ml",
          cpuIds: [],
          memory: [],
          containers: [
            // One claim used by two containers counts once.
            {
              name: "main",
              devices: [],
              cpuIds: [],
              memory: [],
              dynamicResources: [claim("c1", [[driver, "node-a", "gpu-0"]])],
            },
            {
              name: "side",
              devices: [],
              cpuIds: [],
              memory: [],
              dynamicResources: [claim("c1", [[driver, "node-a", "gpu-0"]])],
            },
          ],
        },
        {
          name: "b",
          namespace: "ml",
          cpuIds: [],
          memory: [],
          containers: [
            {
              name: "main",
              devices: [],
              cpuIds: [],
              memory: [],
              dynamicResources: [
                claim("c2", [
                  [driver, "node-a", "gpu-0"],
                  [driver, "node-a", draDeviceName("ttyUSB0"), "share-1"],
                  [driver, "node-a", draDeviceName("ttyUSB0"), "share-2"],
                  [driver, "node-b", "gpu-1"],
                  ["other.example.com", "node-a", "gpu-1"],
                  [driver, "node-a", "gone-7"],
                ]),
              ],
            },
          ],
        },
      ],
    };
    expect([...draClaimShares(response, table)]).toEqual([
      ["gpu-0", 2],
      ["ttyUSB0", 2],
    ]);
  });
});
