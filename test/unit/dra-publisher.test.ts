// The ResourceSlice publisher's loop against an in-memory API: coalescing, backoff on errors, re-reading
// after a conflict, and a start that does not throw while the API server is away.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { SlicePublisher } from "../../src/plugin-runtime/dra/publisher.js";
import type { PoolDevice, ResourceSlice } from "../../src/plugin-runtime/dra/slices.js";
import { ApiError, type ApiRequest } from "../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../tools/cluster/wait.js";

const logger = pino({ level: "silent" });

/** A tiny resourceslices store with request counting and injectable failures. */
class FakeApi {
  readonly objects = new Map<string, ResourceSlice>();
  readonly calls: string[] = [];
  failures: ApiError[] = [];
  private rv = 0;

  request<T>(req: ApiRequest): Promise<T> {
    this.calls.push(req.method);
    const failure = this.failures.shift();
    if (failure) return Promise.reject(failure);
    const name = req.path.split("?")[0]!.split("/")[5];
    switch (req.method) {
      case "GET":
        return Promise.resolve({ items: [...this.objects.values()] } as T);
      case "POST":
      case "PUT": {
        const slice = req.body as ResourceSlice;
        const stored = { ...slice, metadata: { ...slice.metadata, resourceVersion: String(++this.rv) } };
        this.objects.set(slice.metadata.name, stored);
        return Promise.resolve(stored as T);
      }
      case "DELETE":
        this.objects.delete(name!);
        return Promise.resolve({} as T);
      default:
        return Promise.reject(new Error(`unexpected ${req.method}`));
    }
  }
}

let devices: PoolDevice[] = [];
const publishers: SlicePublisher[] = [];

function start(api: FakeApi, coalesceMs = 30): SlicePublisher {
  const p = new SlicePublisher({
    client: api,
    driver: "d.example.com",
    node: "n",
    configName: "c",
    devices: () => devices,
    logger,
    coalesceMs,
    retryBaseMs: 20,
    retryMaxMs: 100,
  });
  publishers.push(p);
  return p;
}

const generation = (api: FakeApi): number | undefined => [...api.objects.values()][0]?.spec.pool.generation;

afterEach(async () => {
  for (const p of publishers.splice(0)) await p.stop();
});

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
