// Property tests: GetPreferredAllocation's guarantees hold for random nodes, availability and requests.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ALLOCATION_POLICIES,
  type AllocationPolicy,
  type Sharing,
} from "../../../../src/api/v1beta1/spec.js";
import {
  checkAllocateRequest,
  preferredAllocation,
} from "../../../../src/plugin-runtime/devices/allocation.js";
import { heldConflicts, heldOfferedIds } from "../../../../src/plugin-runtime/devices/held.js";
import { naturalCompare } from "../../../../src/plugin-runtime/devices/policies.js";
import { advertiseDevices, indexAdvertisedDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { AdvertisedDevice, PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";

const RUNS = 500;

interface Scenario {
  devices: Map<string, AdvertisedDevice>;
  sharing: Sharing;
  available: string[];
  mustInclude: string[];
  size: number;
}

/** NUMA node 0..3, or unknown about one time in six. */
const numaNodeArb = fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined, freq: 5 });

/**
 * A node: 1..16 physical devices (ids dev-0.. so natural order matters past dev-9), 1..8 replicas
 * (1 = no sharing), NUMA node 0..3 or unknown, about one device in five unhealthy.
 */
const nodeArb = fc
  .record({
    physical: fc.array(
      fc.record({
        numaNode: numaNodeArb,
        healthy: fc.integer({ min: 0, max: 4 }).map((n) => n !== 0),
      }),
      { minLength: 1, maxLength: 16 },
    ),
    replicas: fc.integer({ min: 1, max: 8 }),
  })
  .map(({ physical, replicas }) => {
    const sharing: Sharing =
      replicas === 1
        ? { strategy: "None", failRequestsGreaterThanOne: false }
        : { strategy: "TimeSlicing", replicas, failRequestsGreaterThanOne: false };
    const devices: PhysicalDevice[] = physical.map((p, i) => ({
      id: `dev-${i}`,
      numaNode: p.numaNode,
      health: p.healthy ? "Healthy" : "Unhealthy",
      reason: "",
      attributes: {},
    }));
    return { devices: indexAdvertisedDevices(advertiseDevices(devices, sharing)), sharing };
  });

/** The kubelet's view: available is a shuffled subset, must-include a subset of it, any size. */
const scenarioArb: fc.Arbitrary<Scenario> = nodeArb.chain(({ devices, sharing }) =>
  fc.shuffledSubarray([...devices.keys()]).chain((available) =>
    fc.record({
      devices: fc.constant(devices),
      sharing: fc.constant(sharing),
      available: fc.constant(available),
      mustInclude: fc.shuffledSubarray(available, { maxLength: Math.min(6, available.length) }),
      size: fc.integer({ min: 0, max: available.length + 3 }),
    }),
  ),
);

/** Like scenarioArb, but with ids the plugin never advertised, and must-include not always available. */
const untidyScenarioArb: fc.Arbitrary<Scenario> = scenarioArb.chain((s) =>
  fc
    .record({
      ghosts: fc.shuffledSubarray(["ghost-0", "ghost-1", "dev-99::0", "dev-0::99"]),
      mustGhosts: fc.shuffledSubarray(["ghost-0", "stale-3"], { maxLength: 1 }),
      dropMustFromAvailable: fc.boolean(),
      duplicate: fc.boolean(),
    })
    .map(({ ghosts, mustGhosts, dropMustFromAvailable, duplicate }) => {
      const mustInclude = [...s.mustInclude, ...mustGhosts];
      let available = [...ghosts, ...s.available];
      if (dropMustFromAvailable) available = available.filter((id) => !mustInclude.includes(id));
      if (duplicate) available = [...available, ...available.slice(0, 3)];
      return { ...s, available, mustInclude };
    }),
);

const policyArb = fc.constantFrom(...ALLOCATION_POLICIES);

function answer(policy: AllocationPolicy, s: Scenario): string[] {
  return preferredAllocation(policy, s.devices, {
    available: s.available,
    mustInclude: s.mustInclude,
    size: s.size,
  });
}

function healthyCandidates(s: Scenario): AdvertisedDevice[] {
  const must = new Set(s.mustInclude);
  const candidates = new Map<string, AdvertisedDevice>();
  for (const id of s.available) {
    const device = s.devices.get(id);
    if (!must.has(id) && device?.health === "Healthy") candidates.set(id, device);
  }
  return [...candidates.values()];
}

/** Fewest groups whose sizes add up to `need` (take the largest first). */
function fewestGroups(sizes: Iterable<number>, need: number): number {
  let total = 0;
  let groups = 0;
  for (const size of [...sizes].sort((a, b) => b - a)) {
    if (total >= need) break;
    total += size;
    groups++;
  }
  return groups;
}

function countBy<T>(items: readonly T[], key: (item: T) => unknown): Map<unknown, number> {
  const counts = new Map<unknown, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

/** The guarantees preferredAllocation documents, for any policy and any input. */
function expectGuarantees(policy: AllocationPolicy, s: Scenario, result: string[]): void {
  const must = new Set(s.mustInclude);
  const offered = new Set([...s.available, ...s.mustInclude]);
  const eligible = new Set([...s.mustInclude, ...s.available.filter((id) => s.devices.has(id))]);
  const context = `${policy} size=${s.size} must=[${[...must].join(",")}] -> [${result.join(",")}]`;

  expect(new Set(result).size, `duplicates: ${context}`).toBe(result.length);
  for (const id of must) expect(result, `missing must-include: ${context}`).toContain(id);
  for (const id of result) {
    expect(offered.has(id), `${id} was not offered: ${context}`).toBe(true);
    expect(must.has(id) || s.devices.has(id), `${id} is unknown: ${context}`).toBe(true);
  }
  if (must.size >= s.size) {
    expect(result.length, `must-include alone: ${context}`).toBe(must.size);
  } else {
    expect(result.length, `size: ${context}`).toBe(Math.min(s.size, eligible.size));
  }
  const usesUnhealthy = result.some((id) => !must.has(id) && s.devices.get(id)?.health === "Unhealthy");
  if (usesUnhealthy) {
    for (const device of healthyCandidates(s)) {
      expect(result, `unhealthy chosen before healthy ${device.id}: ${context}`).toContain(device.id);
    }
  }
}

describe("preferredAllocation properties", () => {
  it("keeps its guarantees for every policy on kubelet-shaped requests", () => {
    fc.assert(
      fc.property(policyArb, scenarioArb, (policy, s) => {
        expectGuarantees(policy, s, answer(policy, s));
      }),
      { numRuns: RUNS },
    );
  });

  it("keeps its guarantees with unknown ids, duplicates and must-include missing from available", () => {
    fc.assert(
      fc.property(policyArb, untidyScenarioArb, (policy, s) => {
        expectGuarantees(policy, s, answer(policy, s));
      }),
      { numRuns: RUNS },
    );
  });

  it("gives the same answer for any order of available and must-include", () => {
    fc.assert(
      fc.property(policyArb, untidyScenarioArb, fc.nat(), (policy, s, seed) => {
        const shuffle = <T>(items: readonly T[]): T[] => {
          const copy = [...items];
          let state = seed + 1;
          for (let i = copy.length - 1; i > 0; i--) {
            state = (state * 1103515245 + 12345) % 2147483648;
            const j = state % (i + 1);
            [copy[i], copy[j]] = [copy[j]!, copy[i]!];
          }
          return copy;
        };
        const reordered = { ...s, available: shuffle(s.available), mustInclude: shuffle(s.mustInclude) };
        expect(answer(policy, reordered)).toEqual(answer(policy, s));
      }),
      { numRuns: RUNS },
    );
  });

  it("Packed touches the fewest physical devices that can hold the request", () => {
    fc.assert(
      fc.property(scenarioArb, (generated) => {
        const s = { ...generated, mustInclude: [] };
        const candidates = healthyCandidates(s);
        fc.pre(s.size <= candidates.length);
        const result = answer("Packed", s).map((id) => s.devices.get(id)!);
        const touched = new Set(result.map((d) => d.physicalId)).size;
        const freePerDevice = countBy(candidates, (d) => d.physicalId).values();
        expect(touched).toBe(fewestGroups(freePerDevice, s.size));
      }),
      { numRuns: RUNS },
    );
  });

  it("Packed without sharing touches the fewest NUMA nodes", () => {
    fc.assert(
      fc.property(
        scenarioArb.filter((s) => s.sharing.strategy === "None"),
        (generated) => {
          const s = { ...generated, mustInclude: [] };
          const candidates = healthyCandidates(s);
          fc.pre(s.size <= candidates.length);
          const result = answer("Packed", s).map((id) => s.devices.get(id)!);
          const touched = new Set(result.map((d) => d.numaNode)).size;
          expect(touched).toBe(fewestGroups(countBy(candidates, (d) => d.numaNode).values(), s.size));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("Spread uses as many distinct physical devices as it can", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const candidates = healthyCandidates(s);
        const must = new Set(s.mustInclude);
        const need = s.size - must.size;
        fc.pre(need >= 0 && need <= candidates.length);
        const mustPhysical = new Set(s.mustInclude.map((id) => s.devices.get(id)!.physicalId));
        const newPhysical = new Set(candidates.map((d) => d.physicalId).filter((p) => !mustPhysical.has(p)));
        const result = answer("Spread", s).map((id) => s.devices.get(id)!);
        const distinct = new Set(result.map((d) => d.physicalId)).size;
        expect(distinct).toBe(mustPhysical.size + Math.min(need, newPhysical.size));
      }),
      { numRuns: RUNS },
    );
  });

  it("NUMAAligned stays on one NUMA node whenever one node can hold the request", () => {
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const must = new Set(s.mustInclude);
        fc.pre(must.size < s.size);
        const mustNodes = new Set(s.mustInclude.map((id) => s.devices.get(id)!.numaNode));
        const freeOnNode = countBy(healthyCandidates(s), (d) => d.numaNode);
        const fittingNodes = [...freeOnNode].filter(
          ([numaNode, free]) =>
            numaNode !== undefined &&
            [...mustNodes].every((n) => n === numaNode) &&
            must.size + free >= s.size,
        );
        fc.pre(fittingNodes.length > 0);
        const result = answer("NUMAAligned", s).map((id) => s.devices.get(id)!);
        const nodes = new Set(result.map((d) => d.numaNode));
        expect(nodes.size, `nodes ${[...nodes].join(",")}`).toBe(1);
        expect(fittingNodes.map(([numaNode]) => numaNode)).toContain([...nodes][0]);
      }),
      { numRuns: RUNS },
    );
  });

  it("NUMAAligned touches the fewest NUMA nodes when none can hold the request", () => {
    fc.assert(
      fc.property(scenarioArb, (generated) => {
        const s = { ...generated, mustInclude: [] };
        const candidates = healthyCandidates(s);
        fc.pre(s.size <= candidates.length);
        const result = answer("NUMAAligned", s).map((id) => s.devices.get(id)!);
        const touched = new Set(result.map((d) => d.numaNode)).size;
        expect(touched).toBe(fewestGroups(countBy(candidates, (d) => d.numaNode).values(), s.size));
      }),
      { numRuns: RUNS },
    );
  });
});

describe("preferredAllocation with devices the other publish path holds", () => {
  it("chooses a held id only once every other healthy offered one is chosen, keeps the size, and Allocate accepts every answer that avoids them", () => {
    fc.assert(
      fc.property(
        policyArb,
        scenarioArb,
        fc.array(fc.integer({ min: 1, max: 8 }), { minLength: 16, maxLength: 16 }),
        fc.array(fc.boolean(), { minLength: 16, maxLength: 16 }),
        (policy, s, shareCounts, isHeld) => {
          const shares = new Map<string, number>();
          for (const device of s.devices.values()) {
            const i = Number(device.physicalId.slice("dev-".length));
            if (isHeld[i] === true) shares.set(device.physicalId, shareCounts[i]!);
          }
          const held = heldOfferedIds(s.available, s.devices, shares);
          const result = preferredAllocation(policy, s.devices, {
            available: s.available,
            mustInclude: s.mustInclude,
            size: s.size,
            held,
          });
          // Every guarantee of the answer without held devices still holds.
          expectGuarantees(policy, s, result);
          const must = new Set(s.mustInclude);
          const context = `${policy} held=[${[...held].join(",")}] -> [${result.join(",")}]`;
          if (result.some((id) => !must.has(id) && held.has(id))) {
            for (const device of healthyCandidates(s)) {
              if (!held.has(device.id))
                expect(result, `held before ${device.id}: ${context}`).toContain(device.id);
            }
          }
          // Allocate's held check accepts the answer's ids that are not held, when everything the kubelet did
          // not offer is already given through this path: no held device is given past its holders' shares.
          const chosen = result.filter((id) => !held.has(id));
          const given = [...s.devices.keys()].filter((id) => !s.available.includes(id));
          expect(heldConflicts(chosen, s.devices, shares, given), context).toEqual([]);
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("checkAllocateRequest properties", () => {
  it("accepts any set of healthy advertised ids and maps it to their physical devices", () => {
    fc.assert(
      fc.property(
        nodeArb.chain(({ devices, sharing }) =>
          fc.record({
            devices: fc.constant(devices),
            sharing: fc.constant(sharing),
            ids: fc.shuffledSubarray(
              [...devices.values()].filter((d) => d.health === "Healthy").map((d) => d.id),
            ),
          }),
        ),
        ({ devices, sharing, ids }) => {
          fc.pre(ids.length > 0);
          const check = checkAllocateRequest(ids, devices, sharing);
          const physical = [...new Set(ids.map((id) => devices.get(id)!.physicalId))];
          expect(check).toEqual({ kind: "Ok", physicalIds: physical });
        },
      ),
      { numRuns: RUNS },
    );
  });
});

describe("naturalCompare properties", () => {
  const idArb = fc.string({ unit: fc.constantFrom("a", "b", "-", ":", "0", "1", "2", "9"), maxLength: 8 });

  it("is a total order: antisymmetric, transitive and zero only for equal strings", () => {
    fc.assert(
      fc.property(idArb, idArb, idArb, (a, b, c) => {
        expect(Math.sign(naturalCompare(a, b)) + Math.sign(naturalCompare(b, a))).toBe(0);
        expect(naturalCompare(a, b) === 0).toBe(a === b);
        if (naturalCompare(a, b) <= 0 && naturalCompare(b, c) <= 0) {
          expect(naturalCompare(a, c)).toBeLessThanOrEqual(0);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("orders a common prefix by the number that follows", () => {
    fc.assert(
      fc.property(fc.nat(), fc.nat(), (x, y) => {
        expect(Math.sign(naturalCompare(`dev-${x}::0`, `dev-${y}::0`))).toBe(Math.sign(x - y));
      }),
      { numRuns: RUNS },
    );
  });
});
