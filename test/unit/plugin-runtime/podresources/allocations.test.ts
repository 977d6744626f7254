// Which container holds which device, from the kubelet's PodResources List, and the per-device series.
import { describe, expect, it } from "vitest";
import type { AdvertisedDevice } from "../../../../src/plugin-runtime/devices/types.js";
import {
  allocationsOf,
  deviceSeries,
  sameAllocations,
} from "../../../../src/plugin-runtime/podresources/allocations.js";
import type { ListPodResourcesResponse } from "../../../../src/plugin-runtime/proto/index.js";

const RESOURCE = "hardware-vendor.example/foo";

function container(name: string, devices: [string, string[], number?][]) {
  return {
    name,
    devices: devices.map(([resourceName, deviceIds, numa]) => ({
      resourceName,
      deviceIds,
      ...(numa === undefined ? {} : { topology: { nodes: [{ ID: numa }] } }),
    })),
    cpuIds: [],
    memory: [],
    dynamicResources: [],
  };
}

function advertised(id: string, health: "Healthy" | "Unhealthy" = "Healthy"): AdvertisedDevice {
  return { id, physicalId: id.split("::")[0]!, replica: 0, numaNode: 0, health, reason: "" };
}

describe("allocationsOf", () => {
  it("takes the devices of its resource from every container, one entry per device and NUMA node", () => {
    const response: ListPodResourcesResponse = {
      podResources: [
        {
          name: "trainer-0",
          namespace: "ml",
          containers: [
            // The kubelet lists a device once per NUMA node it is on, and each device in its own entry.
            container("main", [
              [RESOURCE, ["foo-0::0"], 0],
              [RESOURCE, ["foo-0::0"], 1],
              [RESOURCE, ["foo-1::1"], 1],
              ["other.example/bar", ["bar-0"]],
            ]),
            container("sidecar", []),
          ],
          cpuIds: [],
          memory: [],
        },
        { name: "idle", namespace: "default", containers: [container("app", [])], cpuIds: [], memory: [] },
        {
          name: "web",
          namespace: "shop",
          containers: [container("app", [[RESOURCE, ["foo-2::0", ""]]])],
          cpuIds: [],
          memory: [],
        },
      ],
    };
    expect(Object.fromEntries(allocationsOf(response, RESOURCE))).toEqual({
      "foo-0::0": { namespace: "ml", pod: "trainer-0", container: "main" },
      "foo-1::1": { namespace: "ml", pod: "trainer-0", container: "main" },
      "foo-2::0": { namespace: "shop", pod: "web", container: "app" },
    });
    expect(allocationsOf({ podResources: [] }, RESOURCE).size).toBe(0);
  });

  it("keeps the first container a device appears under", () => {
    const response: ListPodResourcesResponse = {
      podResources: [
        {
          name: "p",
          namespace: "n",
          containers: [
            container("init-sidecar", [[RESOURCE, ["foo-0"]]]),
            container("main", [[RESOURCE, ["foo-0"]]]),
          ],
          cpuIds: [],
          memory: [],
        },
      ],
    };
    expect(allocationsOf(response, RESOURCE).get("foo-0")?.container).toBe("init-sidecar");
  });
});

describe("sameAllocations", () => {
  const a = new Map([["foo-0", { namespace: "n", pod: "p", container: "c" }]]);
  it("compares holders, and unknown with unknown only", () => {
    expect(sameAllocations(a, new Map(a))).toBe(true);
    expect(sameAllocations(a, new Map([["foo-0", { namespace: "n", pod: "p", container: "d" }]]))).toBe(
      false,
    );
    expect(sameAllocations(a, new Map())).toBe(false);
    expect(sameAllocations(undefined, undefined)).toBe(true);
    expect(sameAllocations(undefined, new Map())).toBe(false);
  });
});

describe("deviceSeries", () => {
  it("gives one row per advertised device with its holder, then allocated devices no longer advertised", () => {
    const allocations = new Map([
      ["foo-1", { namespace: "ml", pod: "trainer-0", container: "main" }],
      ["foo-9", { namespace: "ml", pod: "old", container: "main" }],
      ["foo-7", { namespace: "ml", pod: "older", container: "main" }],
    ]);
    expect(deviceSeries([advertised("foo-0"), advertised("foo-1", "Unhealthy")], allocations)).toEqual([
      { device: "foo-0", namespace: "", pod: "", container: "", allocated: 0, healthy: 1 },
      { device: "foo-1", namespace: "ml", pod: "trainer-0", container: "main", allocated: 1, healthy: 0 },
      { device: "foo-7", namespace: "ml", pod: "older", container: "main", allocated: 1, healthy: undefined },
      { device: "foo-9", namespace: "ml", pod: "old", container: "main", allocated: 1, healthy: undefined },
    ]);
  });

  it("leaves allocation unknown while the kubelet has not answered", () => {
    expect(deviceSeries([advertised("foo-0")], undefined)).toEqual([
      { device: "foo-0", namespace: "", pod: "", container: "", allocated: undefined, healthy: 1 },
    ]);
  });
});
