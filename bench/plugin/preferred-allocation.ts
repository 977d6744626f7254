// GetPreferredAllocation's decision alone, in this process: the pure function the plugin's server calls.
import type { AllocationPolicy } from "../../src/api/v1beta1/spec.js";
import { preferredAllocation } from "../../src/plugin-runtime/devices/allocation.js";
import { advertiseDevices, indexAdvertisedDevices } from "../../src/plugin-runtime/devices/sharing.js";
import { DEVICES, REPLICAS } from "./knobs.js";
import type { Result } from "./report.js";

/**
 * GetPreferredAllocation's decision alone (no gRPC), per policy, on 8 devices x 100 replicas over two NUMA
 * nodes with a 16-device request: the pure function the server calls, measured here rather than timed in
 * a unit test. Runs in this process, before the plugin processes, with Node's default flags.
 */
export function preferredAllocationPerCall(): Result {
  const devices = indexAdvertisedDevices(
    advertiseDevices(
      Array.from({ length: DEVICES }, (_, i) => ({
        id: `dev-${i}`,
        numaNode: i % 2,
        health: "Healthy" as const,
        reason: "",
        attributes: {},
      })),
      { strategy: "TimeSlicing", replicas: REPLICAS, failRequestsGreaterThanOne: false },
    ),
  );
  const request = { available: [...devices.keys()].reverse(), mustInclude: ["dev-5::50"], size: 16 };
  const policies: AllocationPolicy[] = ["Packed", "Spread", "NUMAAligned", "None"];
  const perCall = policies.map((policy) => {
    for (let i = 0; i < 200; i++) preferredAllocation(policy, devices, request);
    const runs = 2_000;
    const started = performance.now();
    for (let i = 0; i < runs; i++) preferredAllocation(policy, devices, request);
    return { policy, ms: (performance.now() - started) / runs };
  });
  const worst = Math.max(...perCall.map((p) => p.ms));
  return {
    metric: `GetPreferredAllocation decision, in process, size 16 of ${DEVICES * REPLICAS}`,
    value: perCall.map((p) => `${p.policy} ${p.ms.toFixed(3)} ms`).join(", "),
    target: "≤ 1 ms per call",
    missed: worst <= 1 ? [] : ["≤ 1 ms"],
  };
}
