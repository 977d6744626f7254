// Topology-aware GetPreferredAllocation on recorded interconnects (test/fixtures/nvidia/topology, see its
// SOURCE.md): an 8-GPU HGX H200 (every pair NV18), a DGX-1 (NV1, NV2 and SYS pairs) and a PCIe-only
// 4-GPU server. For random availability, must-include devices, sizes, policies and time-slicing, the
// chosen GPUs are never worse connected than the best set a brute force finds, and the policy's own
// choice stands whenever it is among the best.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AllocationPolicy } from "../../../../src/api/v1beta1/spec.js";
import { preferredAllocation } from "../../../../src/plugin-runtime/devices/allocation.js";
import { compareConnectedness, connectedness } from "../../../../src/plugin-runtime/devices/interconnect.js";
import { DGX1, HGX_H200, PCIE_T4, advertised } from "./interconnect-support.js";

const RUNS = 400;

function subsets<T>(items: readonly T[], size: number): T[][] {
  if (size === 0) return [[]];
  const out: T[][] = [];
  items.forEach((item, i) => {
    for (const rest of subsets(items.slice(i + 1), size - 1)) out.push([item, ...rest]);
  });
  return out;
}

const POLICIES: readonly AllocationPolicy[] = ["Packed", "Spread", "NUMAAligned"];

describe.each([HGX_H200, DGX1, PCIE_T4])("on the recorded interconnect $name", (topology) => {
  const scenario = fc
    .record({
      replicas: fc.constantFrom(1, 1, 2, 3),
      availableMask: fc.array(fc.boolean(), { minLength: 64, maxLength: 64 }),
      mustIncludeMask: fc.array(fc.integer({ min: 0, max: 7 }), { minLength: 64, maxLength: 64 }),
      size: fc.integer({ min: 1, max: 3 * topology.gpus.length }),
      policy: fc.constantFrom(...POLICIES),
    })
    .map(({ replicas, availableMask, mustIncludeMask, size, policy }) => {
      const devices = advertised(topology, replicas);
      const ids = [...devices.keys()];
      const available = ids.filter((_, i) => availableMask[i] === true);
      // About one available device in eight is already the container's (the kubelet sends both lists).
      const mustInclude = available.filter((_, i) => mustIncludeMask[i] === 0);
      return { devices, available, mustInclude, size: Math.min(size, ids.length), policy };
    });

  it("never picks GPUs worse connected than the best available set, and keeps the policy's choice among equals", () => {
    fc.assert(
      fc.property(scenario, ({ devices, available, mustInclude, size, policy }) => {
        const request = { available, mustInclude, size };
        const answer = preferredAllocation(policy, devices, request, topology.interconnect);
        const plain = preferredAllocation(policy, devices, request);

        // The guarantees every answer keeps.
        const allowed = new Set([...available, ...mustInclude]);
        expect(answer.every((id) => allowed.has(id))).toBe(true);
        expect(new Set(answer).size).toBe(answer.length);
        for (const id of mustInclude) expect(answer).toContain(id);
        expect(answer.length).toBe(plain.length);

        const physical = (ids: readonly string[]) => ids.map((id) => devices.get(id)!.physicalId);
        const anchorGpus = new Set(physical(mustInclude));
        const chosen = answer.filter((id) => !mustInclude.includes(id));
        const chosenGpus = [...new Set(physical(chosen))].filter((g) => !anchorGpus.has(g));
        // How many devices each new GPU took, and how many each could give.
        const counts = chosenGpus
          .map((g) => chosen.filter((id) => devices.get(id)!.physicalId === g).length)
          .sort((a, b) => b - a);
        const freeOf = (g: string) =>
          available.filter((id) => !mustInclude.includes(id) && devices.get(id)!.physicalId === g).length;
        const candidates = [...new Set(physical(available))].filter((g) => !anchorGpus.has(g));
        const canHold = (set: string[]) => {
          const free = set.map(freeOf).sort((a, b) => b - a);
          return counts.every((c, i) => (free[i] ?? 0) >= c);
        };

        const mine = connectedness(topology.interconnect, [...anchorGpus, ...chosenGpus])!;
        let best = mine;
        for (const set of subsets(candidates, chosenGpus.length)) {
          if (!canHold(set)) continue;
          const c = connectedness(topology.interconnect, [...anchorGpus, ...set])!;
          if (compareConnectedness(c, best) < 0) best = c;
        }
        expect(mine).toEqual(best);

        // Among equals the policy decides: when its own answer is as well connected, it is the answer.
        const plainGpus = [...new Set(physical(plain))];
        const theirs = connectedness(topology.interconnect, plainGpus)!;
        if (plainGpus.length === new Set([...anchorGpus, ...chosenGpus]).size) {
          if (compareConnectedness(theirs, mine) === 0) expect(answer).toEqual(plain);
        }
      }),
      { numRuns: RUNS },
    );
  });
});
