// DeviceSet.holdElsewhere: devices the other publish path holds leave the advertised list (every replica
// under time-slicing) and come back once freed; each change is one more snapshot its listeners hear of.
import { describe, expect, it } from "vitest";
import { DeviceSet, type DeviceSetSnapshot } from "../../../../src/plugin-runtime/devices/device-set.js";
import { pino } from "pino";
import { MockDeviceBackend } from "../../../../src/plugin-runtime/backends/mock.js";
import { devicePluginShares } from "../../../../src/plugin-runtime/podresources/allocations.js";

async function started(sharing: ConstructorParameters<typeof DeviceSet>[1]): Promise<DeviceSet> {
  const set = new DeviceSet(
    new MockDeviceBackend(
      { devices: 3, idPrefix: "s", numaNodes: 1, attributes: {} },
      { logger: pino({ level: "silent" }) },
    ),
    sharing,
  );
  await set.start();
  return set;
}

describe("DeviceSet.holdElsewhere", () => {
  it.each([
    {
      what: "without sharing",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: ["s-1"],
      advertised: ["s-0", "s-2"],
    },
    {
      what: "time-sliced: every replica of a held device",
      sharing: { strategy: "TimeSlicing" as const, replicas: 2, failRequestsGreaterThanOne: false },
      held: ["s-0", "s-2"],
      advertised: ["s-1::0", "s-1::1"],
    },
    {
      what: "an id the backend does not have changes nothing advertised",
      sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false },
      held: ["x-9"],
      advertised: ["s-0", "s-1", "s-2"],
    },
  ])("$what", async ({ sharing, held, advertised }) => {
    const set = await started(sharing);
    const heard: DeviceSetSnapshot[] = [];
    set.onChange((s) => heard.push(s));
    const before = set.snapshot();
    set.holdElsewhere(new Set(held));
    const snap = set.snapshot();
    expect(snap.advertised.map((d) => d.id)).toEqual(advertised);
    expect([...snap.byId.keys()]).toEqual(advertised);
    expect(
      snap.physical.map((d) => d.id),
      "physical devices stay",
    ).toEqual(["s-0", "s-1", "s-2"]);
    expect([...snap.heldElsewhere]).toEqual(held);
    expect(snap.unheld.map((d) => d.id)).toEqual(["s-0", "s-1", "s-2"].filter((id) => !held.includes(id)));
    expect(snap.version).toBe(before.version + 1);
    expect(heard).toEqual([snap]);

    // The same set again is no news; freeing them brings every device back.
    set.holdElsewhere(new Set(held));
    expect(heard).toHaveLength(1);
    set.holdElsewhere(new Set());
    expect(set.snapshot().advertised.map((d) => d.id)).toEqual(before.advertised.map((d) => d.id));
    expect(heard).toHaveLength(2);
    await set.stop();
  });
});

describe("devicePluginShares", () => {
  it.each([
    { ids: [], want: [] },
    {
      ids: ["s-0", "s-1"],
      want: [
        ["s-0", 1],
        ["s-1", 1],
      ],
    },
    {
      ids: ["s-0::0", "s-0::1", "s-2::3"],
      want: [
        ["s-0", 2],
        ["s-2", 1],
      ],
    },
    { ids: ["0000:3b:00.0"], want: [["0000:3b:00.0", 1]] },
  ])("$ids → $want", ({ ids, want }) => {
    const holder = { namespace: "ml", pod: "p", container: "c" };
    expect([...devicePluginShares(new Map(ids.map((id) => [id, holder])))]).toEqual(want);
  });
});
