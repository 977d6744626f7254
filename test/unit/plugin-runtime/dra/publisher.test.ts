// The ResourceSlice publisher's loop against an in-memory API: coalescing, backoff on errors, re-reading
// after a conflict, a start that does not throw while the API server is away, device taints, and when an
// observed slice agrees with the one it wrote.
import { afterEach, describe, expect, it } from "vitest";
import { observationAgrees, SlicePublisher } from "../../../../src/plugin-runtime/dra/publisher.js";
import type { PoolDevice } from "../../../../src/plugin-runtime/dra/slices.js";
import { DeviceTaintProbe } from "../../../../src/plugin-runtime/dra/taint-support.js";
import { ApiError } from "../../../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../../../tools/cluster/wait.js";
import {
  FakeApi,
  generation,
  logger,
  publishers,
  startPublisher,
  stopPublishers,
} from "./publisher-support.js";

let devices: PoolDevice[] = [];
const start = (api: FakeApi, coalesceMs?: number): SlicePublisher =>
  startPublisher(api, () => devices, coalesceMs);

afterEach(stopPublishers);

describe("SlicePublisher", () => {
  it("lists once, then writes without re-reading; a burst of changes is one update", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = start(api);
    await p.start();
    expect(api.calls).toEqual(["GET", "POST"]);
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Healthy" },
    ];
    for (let i = 0; i < 10; i++) p.changed();
    await waitFor("generation 2", () => generation(api) === 2, { intervalMs: 5 });
    await new Promise((r) => setTimeout(r, 80));
    expect(api.calls).toEqual(["GET", "POST", "PUT"]);
    expect(p.state()).toMatchObject({ generation: 2, slices: 1, devices: 2 });
  });

  it("does not throw when the API server is away at start, and publishes once it answers", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    api.failures = [0, 1, 2].map(
      () => new ApiError("connection refused", { code: 0, reason: "ECONNREFUSED" }),
    );
    const p = start(api);
    await p.start();
    expect(p.error()).toBe("connection refused");
    expect(p.state()).toBeUndefined();
    await waitFor("published after the outage", () => p.state()?.generation === 1, { intervalMs: 5 });
    expect(p.error()).toBeUndefined();
    expect(api.calls.filter((c) => c === "GET").length).toBe(4);
  });

  it("re-reads the pool after a conflict and writes above what it finds", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = start(api);
    await p.start();
    // Someone else moved the pool on; our next write is refused with 409.
    const [slice] = api.objects.values();
    api.objects.set(slice!.metadata.name, {
      ...slice!,
      metadata: { ...slice!.metadata, resourceVersion: "99" },
      spec: { ...slice!.spec, pool: { ...slice!.spec.pool, generation: 7 } },
    });
    api.failures = [new ApiError("conflict", { code: 409, reason: "Conflict" })];
    devices = [{ name: "a", health: "Unhealthy" }];
    p.changed();
    await waitFor("generation 8", () => generation(api) === 8, { intervalMs: 5 });
    expect(api.calls).toEqual(["GET", "POST", "PUT", "GET", "PUT"]);
    expect([...api.objects.values()][0]!.spec.devices).toEqual([]);
  });

  it("stop leaves the slices and ends the retries", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = start(api);
    await p.start();
    api.failures = Array.from(
      { length: 100 },
      () => new ApiError("boom", { code: 500, reason: "InternalError" }),
    );
    devices = [];
    p.changed();
    await waitFor("a failed pass", () => p.error() === "boom", { intervalMs: 5 });
    await p.stop();
    const calls = api.calls.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(api.calls.length).toBe(calls);
    expect(api.calls).not.toContain("DELETE");
    expect(api.objects.size).toBe(1);
  });

  it("stands by while a newer instance is live, and takes the pool back with its own devices when it goes", async () => {
    const api = new FakeApi();
    let newer: string | undefined;
    let oldDevices: PoolDevice[] = [
      { name: "a", health: "Healthy", attributes: { model: { string: "X1" } } },
    ];
    const old = new SlicePublisher({
      client: api,
      driver: "d.example.com",
      node: "n",
      configName: "c",
      devices: () => oldDevices,
      logger,
      coalesceMs: 5,
      handover: { newerLiveInstance: () => Promise.resolve(newer) },
      handoverPollMs: 10,
    });
    publishers.push(old);
    await old.start();
    const model = (): unknown => [...api.objects.values()][0]?.spec.devices?.[0]?.attributes?.["model"];
    expect(model()).toEqual({ string: "X1" });

    // The new revision's instance starts beside it and publishes another model.
    newer = "/plugins/d.example.com/dra-new.sock";
    const fresh = new SlicePublisher({
      client: api,
      driver: "d.example.com",
      node: "n",
      configName: "c",
      devices: () => [{ name: "a", health: "Healthy", attributes: { model: { string: "X2" } } }],
      logger,
      coalesceMs: 5,
      handover: { newerLiveInstance: () => Promise.resolve(undefined) },
      handoverPollMs: 10,
    });
    publishers.push(fresh);
    await fresh.start();
    expect(model()).toEqual({ string: "X2" });
    await waitFor("the old instance standing by", () => old.standingByFor() === newer, { intervalMs: 5 });

    // A change on the old instance's side writes nothing while the new one is live.
    const writes = api.calls.filter((c) => c !== "GET").length;
    oldDevices = [{ name: "a", health: "Unhealthy", attributes: { model: { string: "X1" } } }];
    old.changed();
    await new Promise((r) => setTimeout(r, 60));
    expect(api.calls.filter((c) => c !== "GET").length).toBe(writes);
    expect(model()).toEqual({ string: "X2" });

    // The new instance goes (a rollback): the old one publishes its own view again, read afresh.
    await fresh.stop();
    newer = undefined;
    await waitFor(
      "the old instance's view back",
      () => old.standingByFor() === undefined && [...api.objects.values()][0]?.spec.devices?.length === 0,
      {
        intervalMs: 5,
      },
    );
    expect(api.calls.at(-2)).toBe("GET");
  });
});

describe("SlicePublisher with device taints", () => {
  function startTainted(api: FakeApi): SlicePublisher {
    const p = new SlicePublisher({
      client: api,
      driver: "d.example.com",
      node: "n",
      configName: "c",
      devices: () => devices,
      logger,
      coalesceMs: 5,
      deviceTaints: new DeviceTaintProbe({ client: api, driver: "d.example.com", node: "n", logger }),
    });
    publishers.push(p);
    return p;
  }
  const stored = (api: FakeApi) => [...api.objects.values()].flatMap((s) => s.spec.devices ?? []);

  it("keeps an unhealthy device in the slice with its taint, writes nothing more while it stays so, and drops the taint on recovery", async () => {
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Healthy" },
    ];
    const api = new FakeApi();
    const p = startTainted(api);
    await p.start();
    // All healthy: no reason to ask whether taints are kept.
    expect(api.dryRuns).toBe(0);
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Unhealthy", reason: "ECC error" },
    ];
    p.changed();
    await waitFor("b tainted", () => stored(api).find((d) => d.name === "b")?.taints?.length === 1, {
      intervalMs: 5,
    });
    expect(api.dryRuns).toBe(1);
    expect(stored(api).find((d) => d.name === "b")?.taints?.[0]).toMatchObject({
      key: "dpo.dev/unhealthy",
      value: "ECC_error",
      effect: "NoSchedule",
    });
    expect(p.state()?.devices).toBe(1);
    const writes = api.calls.length;
    for (let i = 0; i < 3; i++) {
      p.changed();
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(api.calls.length).toBe(writes);
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Healthy" },
    ];
    p.changed();
    await waitFor("b untainted", () => stored(api).every((d) => d.taints === undefined), { intervalMs: 5 });
    expect(stored(api).map((d) => d.name)).toEqual(["a", "b"]);
    expect(p.state()?.devices).toBe(2);
  });

  it("leaves an unhealthy device out where the API server drops taints (1.35), as without taints", async () => {
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Unhealthy", reason: "ECC" },
    ];
    const api = new FakeApi();
    api.dropTaints = true;
    const p = startTainted(api);
    await p.start();
    expect(api.dryRuns).toBe(1);
    expect(stored(api)).toEqual([{ name: "a" }]);
  });
});

describe("observationAgrees", () => {
  const known = new Map([
    ["s0", { name: "s0", resourceVersion: "5", uid: "u0" }],
    ["s1", { name: "s1", resourceVersion: "7", uid: "u1" }],
  ]);
  it.each([
    [
      "our own update coming back",
      { kind: "event", type: "MODIFIED", slice: { name: "s0", resourceVersion: "5" } },
      true,
    ],
    [
      "an update by someone else",
      { kind: "event", type: "MODIFIED", slice: { name: "s0", resourceVersion: "6" } },
      false,
    ],
    [
      "a slice we do not know added",
      { kind: "event", type: "ADDED", slice: { name: "s2", resourceVersion: "8" } },
      false,
    ],
    [
      "one of ours deleted",
      { kind: "event", type: "DELETED", slice: { name: "s1", resourceVersion: "9", uid: "u1" } },
      false,
    ],
    [
      "an earlier object of that name deleted (we re-created it)",
      { kind: "event", type: "DELETED", slice: { name: "s1", resourceVersion: "9", uid: "old" } },
      true,
    ],
    [
      "a slice we deleted ourselves",
      { kind: "event", type: "DELETED", slice: { name: "s2", resourceVersion: "9", uid: "u2" } },
      true,
    ],
    [
      "a list of exactly ours",
      {
        kind: "list",
        slices: [
          { name: "s1", resourceVersion: "7" },
          { name: "s0", resourceVersion: "5" },
        ],
      },
      true,
    ],
    ["a list missing one", { kind: "list", slices: [{ name: "s0", resourceVersion: "5" }] }, false],
    [
      "a list with one changed",
      {
        kind: "list",
        slices: [
          { name: "s0", resourceVersion: "5" },
          { name: "s1", resourceVersion: "8" },
        ],
      },
      false,
    ],
  ] as const)("%s: %s", (_what, observed, agrees) => {
    expect(observationAgrees(known, observed)).toBe(agrees);
  });
});
