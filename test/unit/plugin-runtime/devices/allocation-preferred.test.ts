// GetPreferredAllocation per policy (Packed, Spread, NUMAAligned, None) on hand-made NUMA layouts, and what every
// policy's answer keeps: the size asked for, the devices that must be included, only available devices.
import { describe, expect, it } from "vitest";
import type { AllocationPolicy } from "../../../../src/api/v1beta1/spec.js";
import { preferredAllocation } from "../../../../src/plugin-runtime/devices/allocation.js";
import { naturalCompare } from "../../../../src/plugin-runtime/devices/policies.js";
import type { AdvertisedDevice } from "../../../../src/plugin-runtime/devices/types.js";
import { noSharing, timeSlicing, node, replicas, sharedFour, plainFour } from "./allocation-support.js";

interface PreferredCase {
  name: string;
  devices: Map<string, AdvertisedDevice>;
  /** Devices already given to other containers: left out of `available`. */
  allocated?: string[];
  mustInclude?: string[];
  size: number;
  want: string[];
}

function ask(policy: AllocationPolicy, c: PreferredCase): string[] {
  const allocated = new Set(c.allocated ?? []);
  // The kubelet's available list is unordered; hand it over reversed to show order does not matter.
  const available = [...c.devices.keys()].filter((id) => !allocated.has(id)).reverse();
  return preferredAllocation(policy, c.devices, {
    available,
    mustInclude: c.mustInclude ?? [],
    size: c.size,
  });
}

function sorted(ids: readonly string[]): string[] {
  return [...ids].sort(naturalCompare);
}

const packedCases: PreferredCase[] = [
  {
    name: "one replica: the first device of the first node",
    devices: sharedFour,
    size: 1,
    want: replicas(0, 0),
  },
  {
    name: "fills one physical device's replicas before the next, on one NUMA node",
    devices: sharedFour,
    size: 6,
    want: [...replicas(0, 0, 1, 2, 3), ...replicas(2, 0, 1)],
  },
  {
    name: "best fit: the partly used device whose free replicas match the request",
    devices: sharedFour,
    allocated: replicas(1, 0, 1),
    size: 2,
    want: replicas(1, 2, 3),
  },
  {
    name: "best fit NUMA node: the busier node that still holds the request",
    devices: sharedFour,
    allocated: replicas(0, 0, 1),
    size: 3,
    want: replicas(2, 0, 1, 2),
  },
  {
    name: "must-include: the rest comes from the same physical device",
    devices: sharedFour,
    mustInclude: replicas(3, 1),
    size: 3,
    want: replicas(3, 0, 1, 2),
  },
  {
    name: "must-include device is full: the rest stays on its NUMA node",
    devices: sharedFour,
    allocated: replicas(3, 0, 2, 3),
    mustInclude: replicas(3, 1),
    size: 3,
    want: [...replicas(1, 0, 1), ...replicas(3, 1)],
  },
  {
    name: "larger than a node: whole devices first, fewest physical devices",
    devices: sharedFour,
    size: 10,
    want: [...replicas(0, 0, 1, 2, 3), ...replicas(1, 0, 1), ...replicas(2, 0, 1, 2, 3)],
  },
  {
    name: "fewest physical devices beats fewest NUMA nodes",
    devices: node(
      [
        ["foo-0", 0],
        ["foo-1", 0],
        ["foo-2", 0],
        ["foo-3", 1],
      ],
      timeSlicing(3),
    ),
    allocated: [...replicas(0, 0, 1), ...replicas(1, 0, 1), ...replicas(2, 0, 1)],
    size: 3,
    want: replicas(3, 0, 1, 2),
  },
  {
    name: "without sharing: keeps the emptier NUMA node whole",
    devices: plainFour,
    allocated: ["foo-1"],
    size: 1,
    want: ["foo-3"],
  },
  {
    name: "without sharing: one NUMA node before the next",
    devices: plainFour,
    size: 3,
    want: ["foo-0", "foo-1", "foo-2"],
  },
  {
    name: "skips unhealthy devices while healthy ones remain",
    devices: node(
      [
        ["foo-0", 0, false],
        ["foo-1", 1],
        ["foo-2", 0],
        ["foo-3", 1],
      ],
      timeSlicing(4),
    ),
    size: 4,
    want: replicas(2, 0, 1, 2, 3),
  },
];

const spreadCases: PreferredCase[] = [
  {
    name: "two replicas: distinct physical devices on distinct NUMA nodes",
    devices: sharedFour,
    size: 2,
    want: [...replicas(0, 0), ...replicas(1, 0)],
  },
  {
    name: "one replica of every physical device before a second of any",
    devices: sharedFour,
    size: 4,
    want: [...replicas(0, 0), ...replicas(1, 0), ...replicas(2, 0), ...replicas(3, 0)],
  },
  {
    name: "second replicas round-robin across NUMA nodes",
    devices: sharedFour,
    size: 6,
    want: [...replicas(0, 0, 1), ...replicas(1, 0, 1), ...replicas(2, 0), ...replicas(3, 0)],
  },
  {
    name: "must-include: the next device goes to the other NUMA node",
    devices: sharedFour,
    mustInclude: replicas(0, 2),
    size: 2,
    want: [...replicas(0, 2), ...replicas(1, 0)],
  },
  {
    name: "prefers the least loaded physical device on a NUMA node",
    devices: sharedFour,
    allocated: replicas(1, 0, 1, 2),
    size: 2,
    want: [...replicas(0, 0), ...replicas(3, 0)],
  },
  {
    name: "without sharing: alternates NUMA nodes",
    devices: plainFour,
    size: 2,
    want: ["foo-0", "foo-1"],
  },
  {
    name: "uses replicas of one device only when no other device is free",
    devices: sharedFour,
    allocated: [...replicas(1, 0, 1, 2, 3), ...replicas(2, 0, 1, 2, 3), ...replicas(3, 0, 1, 2, 3)],
    size: 3,
    want: replicas(0, 0, 1, 2),
  },
];

const numaAlignedCases: PreferredCase[] = [
  {
    name: "all on one NUMA node, packed within it",
    devices: sharedFour,
    size: 4,
    want: replicas(0, 0, 1, 2, 3),
  },
  {
    name: "fills a node's second device rather than leaving the node",
    devices: sharedFour,
    size: 6,
    want: [...replicas(0, 0, 1, 2, 3), ...replicas(2, 0, 1)],
  },
  {
    name: "the node holding must-include",
    devices: sharedFour,
    mustInclude: replicas(1, 0),
    size: 5,
    want: [...replicas(1, 0, 1, 2, 3), ...replicas(3, 0)],
  },
  {
    name: "the node with the fewest free devices that fits",
    devices: sharedFour,
    allocated: replicas(0, 0, 1, 2),
    size: 5,
    want: [...replicas(0, 3), ...replicas(2, 0, 1, 2, 3)],
  },
  {
    name: "fewest free beats fewest physical devices",
    devices: node(
      [
        ["foo-0", 0],
        ["foo-1", 0],
        ["foo-2", 0],
        ["foo-3", 1],
      ],
      timeSlicing(3),
    ),
    allocated: [...replicas(0, 0, 1), ...replicas(1, 0, 1), ...replicas(2, 0, 1)],
    size: 3,
    want: [...replicas(0, 2), ...replicas(1, 2), ...replicas(2, 2)],
  },
  {
    name: "no node fits: a whole node, then the rest packed on the next",
    devices: sharedFour,
    size: 12,
    want: [...replicas(0, 0, 1, 2, 3), ...replicas(1, 0, 1, 2, 3), ...replicas(2, 0, 1, 2, 3)],
  },
  {
    name: "no node fits: the fewest NUMA nodes",
    devices: node(
      [
        ["foo-0", 0],
        ["foo-1", 0],
        ["foo-2", 1],
        ["foo-3", 1],
        ["foo-4", 1],
        ["foo-5", 2],
      ],
      noSharing,
    ),
    size: 4,
    want: ["foo-2", "foo-3", "foo-4", "foo-5"],
  },
  {
    name: "devices without topology come after known NUMA nodes",
    devices: node(
      [
        ["foo-0", undefined],
        ["foo-1", undefined],
        ["foo-2", 3],
        ["foo-3", 3],
      ],
      noSharing,
    ),
    size: 2,
    want: ["foo-2", "foo-3"],
  },
];

const noneCases: PreferredCase[] = [
  {
    name: "natural id order",
    devices: node(
      [
        ["foo-10", 0],
        ["foo-2", 1],
        ["foo-1", 0],
      ],
      noSharing,
    ),
    size: 2,
    want: ["foo-1", "foo-2"],
  },
  {
    name: "must-include, then natural order",
    devices: sharedFour,
    mustInclude: replicas(3, 3),
    size: 3,
    want: [...replicas(0, 0, 1), ...replicas(3, 3)],
  },
];

describe.each([
  { policy: "Packed" as const, cases: packedCases },
  { policy: "Spread" as const, cases: spreadCases },
  { policy: "NUMAAligned" as const, cases: numaAlignedCases },
  { policy: "None" as const, cases: noneCases },
])("preferredAllocation $policy", ({ policy, cases }) => {
  it.each(cases)("$name", (c) => {
    expect(sorted(ask(policy, c))).toEqual(sorted(c.want));
  });
});

describe("preferredAllocation, every policy", () => {
  const policies = ["Packed", "Spread", "NUMAAligned", "None"] as const;

  it.each(policies)("%s: answers must-include alone when it already fills the request", (policy) => {
    const answer = preferredAllocation(policy, sharedFour, {
      available: [...sharedFour.keys()],
      mustInclude: ["foo-3::1", "foo-0::2", "foo-3::1"],
      size: 1,
    });
    expect(answer).toEqual(["foo-0::2", "foo-3::1"]);
  });

  it.each(policies)(
    "%s: never chooses ids the plugin does not advertise, but keeps must-include",
    (policy) => {
      const answer = preferredAllocation(policy, plainFour, {
        available: ["ghost-0", "foo-2", "ghost-1", "foo-3", "stale-9"],
        mustInclude: ["stale-9"],
        size: 4,
      });
      expect(sorted(answer)).toEqual(["foo-2", "foo-3", "stale-9"]);
    },
  );

  it.each(policies)("%s: includes must-include even when the kubelet left it out of available", (policy) => {
    const answer = preferredAllocation(policy, plainFour, {
      available: ["foo-1", "foo-2"],
      mustInclude: ["foo-0"],
      size: 2,
    });
    expect(answer).toContain("foo-0");
    expect(answer).toHaveLength(2);
  });

  it.each(policies)("%s: uses an unhealthy device only when nothing healthy is left", (policy) => {
    const devices = node(
      [
        ["foo-0", 0, false],
        ["foo-1", 0],
        ["foo-2", 1],
      ],
      noSharing,
    );
    const request = { available: ["foo-0", "foo-1", "foo-2"], mustInclude: [], size: 2 };
    expect(sorted(preferredAllocation(policy, devices, request))).toEqual(["foo-1", "foo-2"]);
    expect(sorted(preferredAllocation(policy, devices, { ...request, size: 3 }))).toEqual([
      "foo-0",
      "foo-1",
      "foo-2",
    ]);
  });

  it.each(policies)("%s: ignores duplicates and answers nothing for size 0", (policy) => {
    const request = { available: ["foo-1", "foo-1", "foo-1"], mustInclude: [], size: 2 };
    expect(preferredAllocation(policy, plainFour, request)).toEqual(["foo-1"]);
    expect(preferredAllocation(policy, plainFour, { ...request, size: 0 })).toEqual([]);
    expect(preferredAllocation(policy, plainFour, { ...request, size: -3 })).toEqual([]);
  });

  it("lists must-include first, then the chosen devices in physical-then-replica order", () => {
    const devices = node(
      [
        ["foo-10", 0],
        ["foo-2", 0],
      ],
      timeSlicing(12),
    );
    const answer = preferredAllocation("Spread", devices, {
      available: [...devices.keys()].reverse(),
      mustInclude: ["foo-10::11"],
      size: 4,
    });
    expect(answer).toEqual(["foo-10::11", "foo-2::0", "foo-2::1", "foo-10::0"]);
  });

  // How fast is measured by `make bench-plugin` (docs/benchmarks.md), not here: a time budget in a unit
  // test fails on a busy machine and says nothing about the answer.
  it("answers 8 devices x 100 replicas with the requested size, the must-include device and no repeat", () => {
    const eight = node(
      Array.from({ length: 8 }, (_, i) => [`foo-${i}`, i % 2] as const),
      timeSlicing(100),
    );
    const available = [...eight.keys()].reverse();
    for (const policy of policies) {
      const answer = preferredAllocation(policy, eight, { available, mustInclude: ["foo-5::50"], size: 16 });
      expect(answer, policy).toHaveLength(16);
      expect(answer, policy).toContain("foo-5::50");
      expect(new Set(answer).size, policy).toBe(16);
      for (const id of answer) expect(available, policy).toContain(id);
    }
  });
});
