// The ResourceSlice publisher with a watch: slices someone else deleted or changed are put back (the kubelet
// deletes every slice of its node when it starts), and what it reads from the watch stream.
import { afterEach, describe, expect, it } from "vitest";
import { SlicePublisher } from "../../../../src/plugin-runtime/dra/publisher.js";
import type { PoolDevice, ResourceSlice } from "../../../../src/plugin-runtime/dra/slices.js";
import { ApiError } from "../../../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../../../tools/cluster/wait.js";
import { FakeApi, logger, publishers, stopPublishers } from "./publisher-support.js";

let devices: PoolDevice[] = [];
afterEach(stopPublishers);

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
