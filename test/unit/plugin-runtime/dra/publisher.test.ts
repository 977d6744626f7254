// The ResourceSlice publisher's loop against an in-memory API: coalescing, backoff on errors, re-reading
// after a conflict, a start that does not throw while the API server is away, and with a watch, slices
// someone else deleted or changed put back (the kubelet deletes every slice of its node when it starts).
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { observationAgrees, SlicePublisher } from "../../../../src/plugin-runtime/dra/publisher.js";
import type { PoolDevice, ResourceSlice } from "../../../../src/plugin-runtime/dra/slices.js";
import { DeviceTaintProbe } from "../../../../src/plugin-runtime/dra/taint-support.js";
import {
  ApiError,
  type ApiRequest,
  type ApiWatchRequest,
  type WatchEvent,
} from "../../../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../../../tools/cluster/wait.js";

const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

interface Watcher {
  onEvent: (event: WatchEvent<ResourceSlice>) => void;
  end: (err?: ApiError) => void;
}

/**
 * A tiny resourceslices store with request counting and injectable failures. Writes get a
 * resourceVersion and, on create, a uid, and go out to the open watches as the API server sends them (a
 * write's event may come before its answer); a watch first replays what happened after the
 * resourceVersion it asks for.
 */
class FakeApi {
  readonly objects = new Map<string, ResourceSlice>();
  readonly calls: string[] = [];
  /** The path of every watch started. */
  readonly watchPaths: string[] = [];
  failures: ApiError[] = [];
  /** As a 1.35 API server with DRADeviceTaints off: device taints are dropped from every write. */
  dropTaints = false;
  /** Server-side dry runs seen (answered, never stored). */
  dryRuns = 0;
  private rv = 0;
  private uid = 0;
  private readonly watchers = new Set<Watcher>();
  private readonly history: WatchEvent<ResourceSlice>[] = [];

  request<T>(req: ApiRequest): Promise<T> {
    this.calls.push(req.method);
    const failure = this.failures.shift();
    if (failure) return Promise.reject(failure);
    const name = req.path.split("?")[0]!.split("/")[5];
    switch (req.method) {
      case "GET":
        return Promise.resolve({
          metadata: { resourceVersion: String(this.rv) },
          items: [...this.objects.values()],
        } as T);
      case "POST":
      case "PUT": {
        const slice = this.stored(req.body as ResourceSlice);
        if (req.path.includes("dryRun=All")) {
          this.dryRuns++;
          return Promise.resolve(slice as T);
        }
        const uid = this.objects.get(slice.metadata.name)?.metadata.uid ?? `uid-${++this.uid}`;
        const stored = {
          ...slice,
          metadata: { ...slice.metadata, uid, resourceVersion: String(++this.rv) },
        };
        const type = this.objects.has(slice.metadata.name) ? "MODIFIED" : "ADDED";
        this.objects.set(slice.metadata.name, stored);
        this.emit(type, stored);
        return Promise.resolve(stored as T);
      }
      case "DELETE":
        this.remove(name!);
        return Promise.resolve({} as T);
      default:
        return Promise.reject(new Error(`unexpected ${req.method}`));
    }
  }

  private stored(slice: ResourceSlice): ResourceSlice {
    if (!this.dropTaints) return slice;
    const devices = slice.spec.devices?.map(({ taints: _dropped, ...rest }) => rest);
    return { ...slice, spec: { ...slice.spec, ...(devices === undefined ? {} : { devices }) } };
  }

  watch<T>(req: ApiWatchRequest, onEvent: (event: WatchEvent<T>) => void): Promise<void> {
    this.watchPaths.push(req.path);
    const since = Number(new URLSearchParams(req.path.split("?")[1]).get("resourceVersion") ?? 0);
    for (const event of this.history) {
      if (Number(event.object.metadata.resourceVersion) > since) onEvent(event as WatchEvent<T>);
    }
    return new Promise((resolve, reject) => {
      const watcher: Watcher = {
        onEvent: onEvent as (event: WatchEvent<ResourceSlice>) => void,
        end: (err) => {
          this.watchers.delete(watcher);
          if (err) reject(err);
          else resolve();
        },
      };
      this.watchers.add(watcher);
      req.signal?.addEventListener(
        "abort",
        () => watcher.end(new ApiError("aborted", { code: 0, reason: "Aborted" })),
        { once: true },
      );
    });
  }

  /** Someone else deletes a slice (the kubelet starting). */
  deleteBehindBack(name: string): void {
    this.remove(name);
  }

  /** Someone else rewrites a slice. */
  replaceBehindBack(slice: ResourceSlice): void {
    const stored = { ...slice, metadata: { ...slice.metadata, resourceVersion: String(++this.rv) } };
    this.objects.set(slice.metadata.name, stored);
    this.emit("MODIFIED", stored);
  }

  /** Ends every open watch with `err` (410: the resourceVersion was compacted away). */
  endWatches(err: ApiError): void {
    for (const watcher of [...this.watchers]) watcher.end(err);
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  private remove(name: string): void {
    const gone = this.objects.get(name);
    if (gone === undefined) return;
    this.objects.delete(name);
    this.emit("DELETED", { ...gone, metadata: { ...gone.metadata, resourceVersion: String(++this.rv) } });
  }

  private emit(type: "ADDED" | "MODIFIED" | "DELETED", object: ResourceSlice): void {
    this.history.push({ type, object });
    for (const watcher of this.watchers) watcher.onEvent({ type, object });
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

describe("SlicePublisher with a watch", () => {
  function watching(api: FakeApi, resyncBackoffMs = 100): SlicePublisher {
    const p = new SlicePublisher({
      client: api,
      driver: "d.example.com",
      node: "n",
      configName: "c",
      devices: () => devices,
      logger,
      coalesceMs: 30,
      retryBaseMs: 20,
      retryMaxMs: 100,
      watch: api,
      watchRetryBaseMs: 20,
      watchRetryMaxMs: 100,
      resyncBackoffMs,
    });
    publishers.push(p);
    return p;
  }

  const only = (api: FakeApi): ResourceSlice | undefined =>
    api.objects.size === 1 ? [...api.objects.values()][0] : undefined;

  it("watches only its node's slices of its driver", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    await watching(api).start();
    await waitFor("a watch open", () => api.openWatches === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    const query = new URLSearchParams(api.watchPaths[0]!.split("?")[1]);
    expect(query.get("watch")).toBe("true");
    expect(query.get("fieldSelector")).toBe("spec.nodeName=n,spec.driver=d.example.com");
    expect(query.get("resourceVersion")).not.toBe("");
  });

  it("puts back a slice deleted behind its back within a second, one generation up", async () => {
    devices = [
      { name: "a", health: "Healthy" },
      { name: "b", health: "Healthy" },
    ];
    const api = new FakeApi();
    const p = watching(api);
    await p.start();
    // Whether the watch is open yet or lists afterwards, the change must be seen.
    const [before] = api.objects.values();
    expect(before!.spec.pool.generation).toBe(1);

    const deletedAt = performance.now();
    api.deleteBehindBack(before!.metadata.name);
    const back = await waitFor(
      "the slice back",
      (observe) => {
        observe({ slices: [...api.objects.keys()], state: p.state(), error: p.error() });
        return only(api);
      },
      { timeoutMs: 1_000, intervalMs: 5 },
    );
    const ms = performance.now() - deletedAt;
    expect(ms).toBeLessThan(1_000);
    expect(back.metadata.name).toBe(before!.metadata.name);
    expect(back.metadata.uid).not.toBe(before!.metadata.uid);
    expect(back.spec.devices?.map((d) => d.name)).toEqual(["a", "b"]);
    expect(back.spec.pool.generation).toBe(2);
  });

  it("puts back a slice someone else rewrote", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = watching(api);
    await p.start();
    // Whether the watch is open yet or lists afterwards, the change must be seen.
    const [mine] = api.objects.values();
    api.replaceBehindBack({ ...mine!, spec: { ...mine!.spec, devices: [] } });
    await waitFor(
      "device a published again",
      (observe) => {
        observe({ slice: only(api)?.spec, error: p.error() });
        return only(api)?.spec.devices?.length === 1;
      },
      { timeoutMs: 1_000, intervalMs: 5 },
    );
    expect(only(api)?.spec.pool.generation).toBe(2);
  });

  it("relists after a 410 and resumes after other failures: what was deleted meanwhile comes back", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = watching(api);
    await p.start();
    await waitFor("a watch open", () => api.openWatches === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });

    // The watch breaks; it is resumed after a backoff and still hears the next deletion.
    api.endWatches(new ApiError("connection reset", { code: 0, reason: "ECONNRESET" }));
    await waitFor("the watch resumed", () => api.openWatches === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    expect(api.watchPaths).toHaveLength(2);
    api.deleteBehindBack([...api.objects.keys()][0]!);
    await waitFor("the slice back after the resumed watch heard it", () => only(api), {
      timeoutMs: 1_000,
      intervalMs: 5,
    });

    // Deleted while no watch was open, and the watch's resourceVersion is gone: only a list tells.
    await waitFor("the watch open", () => api.openWatches === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    const gets = api.calls.filter((c) => c === "GET").length;
    api.endWatches(new ApiError("too old resource version", { code: 410, reason: "Expired" }));
    api.deleteBehindBack([...api.objects.keys()][0]!);
    await waitFor(
      "the slice back after the relist",
      (observe) => {
        observe({ slices: [...api.objects.keys()], calls: api.calls, error: p.error() });
        return only(api);
      },
      { timeoutMs: 1_000, intervalMs: 5 },
    );
    // The watch's list, and the publisher's own read of the pool before it wrote.
    expect(api.calls.filter((c) => c === "GET").length).toBe(gets + 2);
    expect(only(api)?.spec.pool.generation).toBe(3);
  });

  it("answers slices deleted again and again (not a kubelet's one wipe) at a slowing pace", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = watching(api, 300);
    await p.start();
    const backAfter: number[] = [];
    for (let i = 0; i < 4; i++) {
      const deletedAt = performance.now();
      api.deleteBehindBack([...api.objects.keys()][0]!);
      await waitFor(
        `the slice back after deletion ${i + 1}`,
        (observe) => {
          observe({ slices: [...api.objects.keys()], error: p.error() });
          return only(api);
        },
        { timeoutMs: 3_000, intervalMs: 5 },
      );
      backAfter.push(performance.now() - deletedAt);
    }
    // At once (the coalescing delay), then after 300, 600 and 1200 ms.
    expect(backAfter[0], backAfter.join(", ")).toBeLessThan(300);
    [300, 600, 1_200].forEach((ms, i) =>
      expect(backAfter[i + 1], backAfter.join(", ")).toBeGreaterThanOrEqual(ms - 5),
    );
    expect(only(api)?.spec.pool.generation).toBe(5);
  });

  it("takes its own writes coming back through the watch for what they are: no extra read or write", async () => {
    devices = [{ name: "a", health: "Healthy" }];
    const api = new FakeApi();
    const p = watching(api);
    await p.start();
    await waitFor("a watch open", () => api.openWatches === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    // The publisher's list and create, then the watch's list.
    expect(api.calls).toEqual(["GET", "POST", "GET"]);
    const published = (generation: number) =>
      waitFor(
        `generation ${generation}`,
        (observe) => {
          observe({ state: p.state(), error: p.error(), calls: api.calls });
          return p.state()?.generation === generation;
        },
        { timeoutMs: 2_000, intervalMs: 5 },
      );
    devices = [{ name: "a", health: "Unhealthy" }];
    p.changed();
    await published(2);
    devices = [{ name: "b", health: "Healthy" }];
    p.changed();
    await published(3);
    // Time for an echo taken for someone else's write to show as a read.
    await new Promise((r) => setTimeout(r, 100));
    expect(api.calls).toEqual(["GET", "POST", "GET", "PUT", "PUT"]);
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
