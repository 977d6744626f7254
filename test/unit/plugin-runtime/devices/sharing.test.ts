// What the kubelet is told about devices under each sharing strategy, and how ids map back to hardware.
import { describe, expect, it } from "vitest";
import type { Sharing } from "../../../../src/api/v1beta1/spec.js";
import { parseAdvertisedId, replicaId } from "../../../../src/contract/replica-id.js";
import {
  advertiseDevices,
  indexAdvertisedDevices,
  replicasPerDevice,
} from "../../../../src/plugin-runtime/devices/sharing.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";

const noSharing: Sharing = { strategy: "None", failRequestsGreaterThanOne: false };
const timeSlicing = (replicas: number): Sharing => ({
  strategy: "TimeSlicing",
  replicas,
  failRequestsGreaterThanOne: false,
});

function physical(id: string, numaNode: number | undefined, healthy = true, reason = ""): PhysicalDevice {
  return { id, numaNode, health: healthy ? "Healthy" : "Unhealthy", reason, attributes: { model: "X100" } };
}

const node = [
  physical("foo-0", 0),
  physical("foo-1", 1, false, "ECC errors"),
  physical("0000:3b:00.0", undefined),
];

describe("advertiseDevices", () => {
  it("advertises each physical device once, under its own id, without sharing", () => {
    expect(advertiseDevices(node, noSharing)).toEqual([
      { id: "foo-0", physicalId: "foo-0", replica: 0, numaNode: 0, health: "Healthy", reason: "" },
      {
        id: "foo-1",
        physicalId: "foo-1",
        replica: 0,
        numaNode: 1,
        health: "Unhealthy",
        reason: "ECC errors",
      },
      {
        id: "0000:3b:00.0",
        physicalId: "0000:3b:00.0",
        replica: 0,
        numaNode: undefined,
        health: "Healthy",
        reason: "",
      },
    ]);
  });

  it("advertises <physical>::<k> replicas in physical order, then replica order, with time-slicing", () => {
    expect(advertiseDevices(node, timeSlicing(3)).map((d) => d.id)).toEqual([
      "foo-0::0",
      "foo-0::1",
      "foo-0::2",
      "foo-1::0",
      "foo-1::1",
      "foo-1::2",
      "0000:3b:00.0::0",
      "0000:3b:00.0::1",
      "0000:3b:00.0::2",
    ]);
  });

  it("gives every replica the health, reason and NUMA node of its physical device", () => {
    const replicas = advertiseDevices(node, timeSlicing(4)).filter((d) => d.physicalId === "foo-1");
    expect(replicas.map((d) => d.replica)).toEqual([0, 1, 2, 3]);
    for (const replica of replicas) {
      expect(replica).toMatchObject({ health: "Unhealthy", reason: "ECC errors", numaNode: 1 });
    }
  });

  it("advertises a physical id that a backend reports twice only once", () => {
    const twice = [physical("foo-0", 0), physical("foo-0", 1, false)];
    expect(advertiseDevices(twice, timeSlicing(2))).toEqual([
      { id: "foo-0::0", physicalId: "foo-0", replica: 0, numaNode: 0, health: "Healthy", reason: "" },
      { id: "foo-0::1", physicalId: "foo-0", replica: 1, numaNode: 0, health: "Healthy", reason: "" },
    ]);
  });

  it("advertises nothing for no devices", () => {
    expect(advertiseDevices([], timeSlicing(8))).toEqual([]);
  });

  it("scales to 8 devices x 100 replicas with unique ids", () => {
    const eight = Array.from({ length: 8 }, (_, i) => physical(`foo-${i}`, i % 2));
    const advertised = advertiseDevices(eight, timeSlicing(100));
    expect(advertised).toHaveLength(800);
    expect(new Set(advertised.map((d) => d.id)).size).toBe(800);
    expect(indexAdvertisedDevices(advertised).get("foo-7::99")).toMatchObject({
      physicalId: "foo-7",
      replica: 99,
    });
  });
});

describe("replicasPerDevice", () => {
  it.each([
    { sharing: noSharing, want: 1 },
    { sharing: timeSlicing(2), want: 2 },
    { sharing: timeSlicing(1024), want: 1024 },
    { sharing: { strategy: "TimeSlicing", failRequestsGreaterThanOne: false } satisfies Sharing, want: 1 },
  ])("$sharing.strategy with replicas $sharing.replicas -> $want", ({ sharing, want }) => {
    expect(replicasPerDevice(sharing)).toBe(want);
  });
});

describe("advertised ids", () => {
  it("reads back every id that time-slicing advertises", () => {
    for (const device of advertiseDevices(node, timeSlicing(5))) {
      expect(parseAdvertisedId(device.id)).toEqual({
        physicalId: device.physicalId,
        replica: device.replica,
      });
      expect(replicaId(device.physicalId, device.replica)).toBe(device.id);
    }
  });
});
