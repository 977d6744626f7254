// The informer's list/watch loop against a scripted API: resume from the last resourceVersion, relist after
// 410 or a broken watch, backoff after errors, clean stop.
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import {
  Informer,
  ManualClock,
  objectKey,
  type ListResult,
  type QueryParams,
} from "../../../src/kube/index.js";
import { type Obj, obj, names } from "./informer-support.js";

interface WatchCall {
  query: QueryParams;
  onEvent: (type: string, object: unknown) => void;
  onDone: (err: unknown) => void;
  aborted: boolean;
}

/** A scripted API server: the test decides what each list returns and what each watch delivers. */
class ScriptedApi {
  lists: Array<() => Promise<ListResult<Obj>>> = [];
  listCalls = 0;
  watches: WatchCall[] = [];
  watchFailures: Error[] = [];

  list = (): Promise<ListResult<Obj>> => {
    this.listCalls++;
    const next = this.lists.shift();
    if (next === undefined) return Promise.reject(new Error("unexpected list"));
    return next();
  };

  watch = (
    _path: string,
    query: QueryParams,
    onEvent: (type: string, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<{ abort(): void }> => {
    const failure = this.watchFailures.shift();
    if (failure !== undefined) return Promise.reject(failure);
    const call: WatchCall = { query, onEvent, onDone, aborted: false };
    this.watches.push(call);
    return Promise.resolve({
      abort: () => {
        if (call.aborted) return;
        call.aborted = true;
        // client-node's Watch reports an abort as an AbortError through done().
        const err = new Error("The operation was aborted.");
        err.name = "AbortError";
        onDone(err);
      },
    });
  };

  get lastWatch(): WatchCall {
    const call = this.watches.at(-1);
    if (call === undefined) throw new Error("no watch started");
    return call;
  }
}

const listOf =
  (resourceVersion: string, ...items: Obj[]) =>
  (): Promise<ListResult<Obj>> =>
    Promise.resolve({ items, metadata: { resourceVersion } });

function captureLogs(): { logger: pino.Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { logger: pino({ level: "debug" }, stream), lines };
}

interface Recorded {
  events: string[];
}

function setup(options: { backoff?: { initialMs: number; maxMs: number } } = {}) {
  const clock = new ManualClock();
  const api = new ScriptedApi();
  const { logger, lines } = captureLogs();
  const restarts: string[] = [];
  const informer = new Informer<Obj>({
    path: "/api/v1/namespaces/dpo/configmaps",
    list: api.list,
    watch: api.watch,
    clock,
    logger,
    backoff: options.backoff,
    watchTimeoutSeconds: () => 300,
    labelSelector: "app=dpo",
    onRestart: (reason) => restarts.push(reason),
    onRecover: () => restarts.push("recovered"),
  });
  const recorded: Recorded = { events: [] };
  informer.onAdd((o) => recorded.events.push(`add ${objectKey(o)}@${o.metadata?.resourceVersion}`));
  informer.onUpdate((old, cur) =>
    recorded.events.push(
      `update ${objectKey(cur)}@${old.metadata?.resourceVersion}->${cur.metadata?.resourceVersion}`,
    ),
  );
  informer.onDelete((o) => recorded.events.push(`delete ${objectKey(o)}@${o.metadata?.resourceVersion}`));
  return { clock, api, informer, recorded, lines, restarts };
}

let running: Informer<Obj> | undefined;
afterEach(async () => {
  await running?.stop();
  running = undefined;
});

describe("Informer", () => {
  it("lists, syncs, then watches from the list's resourceVersion and applies events", async () => {
    const { clock, api, informer, recorded } = setup();
    running = informer;
    api.lists.push(listOf("10", obj("a", "5"), obj("b", "6")));
    informer.start();
    await informer.waitForSync();
    await clock.advance(0);
    expect(informer.hasSynced()).toBe(true);
    expect(api.lastWatch.query).toMatchObject({
      resourceVersion: "10",
      allowWatchBookmarks: true,
      labelSelector: "app=dpo",
      timeoutSeconds: 300,
    });

    api.lastWatch.onEvent("ADDED", obj("c", "11"));
    api.lastWatch.onEvent("MODIFIED", obj("a", "12"));
    api.lastWatch.onEvent("MODIFIED", obj("a", "12"));
    api.lastWatch.onEvent("DELETED", obj("b", "13"));
    api.lastWatch.onEvent("BOOKMARK", { kind: "ConfigMap", metadata: { resourceVersion: "20" } });
    expect(recorded.events).toEqual(["add a@5", "add b@6", "add c@11", "update a@5->12", "delete b@13"]);
    expect(names(informer.list())).toEqual(["a", "c"]);
    expect(informer.get("a")?.metadata?.resourceVersion).toBe("12");
    expect(informer.lastSyncResourceVersion()).toBe("20");
  });

  it("resumes a cleanly closed watch from the last resourceVersion without listing again", async () => {
    const { clock, api, informer, recorded } = setup();
    running = informer;
    api.lists.push(listOf("10", obj("a", "5")));
    informer.start();
    await clock.advance(0);
    await clock.advance(60_000);
    api.lastWatch.onEvent("MODIFIED", obj("a", "15"));
    api.lastWatch.onDone(null);
    await clock.advance(0);
    expect(api.watches).toHaveLength(2);
    expect(api.lastWatch.query.resourceVersion).toBe("15");
    expect(api.listCalls).toBe(1);
    expect(recorded.events).toEqual(["add a@5", "update a@5->15"]);
  });

  it("relists after a 410 ERROR event and reports what changed meanwhile, deletes included", async () => {
    const { clock, api, informer, recorded, lines, restarts } = setup();
    running = informer;
    api.lists.push(listOf("10", obj("keep", "1"), obj("change", "2"), obj("drop", "3")));
    informer.start();
    await clock.advance(0);
    api.lists.push(listOf("50", obj("keep", "1"), obj("change", "40"), obj("new", "45")));
    api.lastWatch.onEvent("ERROR", {
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      reason: "Expired",
      code: 410,
      message: "too old resource version: 10 (30)",
    });
    await clock.advance(0);
    expect(api.watches[0]!.aborted).toBe(true);
    expect(api.listCalls).toBe(2);
    expect(recorded.events.slice(3)).toEqual(["add new@45", "update change@2->40", "delete drop@3"]);
    expect(names(informer.list())).toEqual(["change", "keep", "new"]);
    expect(api.lastWatch.query.resourceVersion).toBe("50");
    // An expired watch is routine: no warning, and no backoff before the relist.
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(restarts).toEqual(["expired"]);
  });

  it("relists after the watch request itself answers 410 Gone", async () => {
    const { clock, api, informer, restarts } = setup();
    running = informer;
    api.lists.push(listOf("10", obj("a", "1")));
    informer.start();
    await clock.advance(0);
    api.lists.push(listOf("60", obj("a", "1")));
    api.lastWatch.onDone(Object.assign(new Error("Gone"), { statusCode: 410 }));
    await clock.advance(0);
    expect(api.listCalls).toBe(2);
    expect(api.lastWatch.query.resourceVersion).toBe("60");
    expect(restarts).toEqual(["expired"]);
  });

  it("after a broken watch, resumes it from the last resourceVersion after a backoff that grows with repeated failures, without listing", async () => {
    const { clock, api, informer, recorded, lines, restarts } = setup({
      backoff: { initialMs: 500, maxMs: 4_000 },
    });
    running = informer;
    api.lists.push(listOf("10", obj("a", "1"), obj("b", "1")));
    informer.start();
    await clock.advance(0);
    api.lastWatch.onEvent("MODIFIED", obj("a", "15"));

    // The connection breaks, and the API server stays away for three more attempts.
    api.lastWatch.onDone(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
    for (let i = 0; i < 3; i++) api.watchFailures.push(new Error("connect ECONNREFUSED 127.0.0.1:6443"));
    const attempts: number[] = [];
    const start = clock.now();
    for (let t = 0; t < 10_000 && api.watches.length < 2; t += 10) {
      const failuresBefore = api.watchFailures.length;
      await clock.advance(10);
      if (api.watchFailures.length < failuresBefore || api.watches.length === 2)
        attempts.push(clock.now() - start);
    }
    expect(attempts).toEqual([500, 1_500, 3_500, 7_500]);
    expect(api.listCalls).toBe(1);
    expect(api.lastWatch.query.resourceVersion).toBe("15");
    // What happened meanwhile arrives as events on the resumed watch.
    api.lastWatch.onEvent("DELETED", obj("b", "20"));
    expect(recorded.events.slice(2)).toEqual(["update a@1->15", "delete b@20"]);
    expect(lines.filter((l) => l.msg === "watch failed; resuming it after backoff")).toHaveLength(4);
    // Four failures, then one recovery when the watch is finally up.
    expect(restarts).toEqual(["error", "error", "error", "error", "recovered"]);
  });

  it("relists when the resumed watch meets a compacted resourceVersion (410), and lists again after a failed list", async () => {
    const { clock, api, informer, recorded, lines, restarts } = setup({
      backoff: { initialMs: 500, maxMs: 4_000 },
    });
    running = informer;
    api.lists.push(listOf("10", obj("a", "1"), obj("b", "1")));
    informer.start();
    await clock.advance(0);
    api.lastWatch.onDone(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }));
    await clock.advance(500);
    expect(api.watches).toHaveLength(2);
    expect(api.lastWatch.query.resourceVersion).toBe("10");
    // The API server restarted and etcd was compacted: the resumed watch is answered 410 Gone, and the
    // relist right after it fails once more.
    api.lists.push(() => Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:6443")));
    api.lists.push(listOf("30", obj("a", "2")));
    api.lastWatch.onDone(Object.assign(new Error("Gone"), { statusCode: 410 }));
    await clock.advance(0);
    expect(api.listCalls).toBe(2);
    // The second failure in a row: the backoff has doubled.
    await clock.advance(999);
    expect(api.listCalls).toBe(2);
    await clock.advance(1);
    expect(api.listCalls).toBe(3);
    expect(recorded.events.slice(2)).toEqual(["update a@1->2", "delete b@1"]);
    expect(api.lastWatch.query.resourceVersion).toBe("30");
    expect(lines.filter((l) => l.msg === "list failed; listing again after backoff")).toHaveLength(1);
    expect(restarts).toEqual(["error", "recovered", "expired", "error", "recovered"]);
  });

  it("retries a watch that fails to start from the listed resourceVersion, and treats a watch that closes at once as a failure", async () => {
    const { clock, api, informer } = setup({ backoff: { initialMs: 500, maxMs: 4_000 } });
    running = informer;
    api.lists.push(listOf("10", obj("a", "1")));
    api.watchFailures.push(new Error("exec credential plugin failed"));
    informer.start();
    await clock.advance(0);
    expect(api.watches).toHaveLength(0);
    await clock.advance(500);
    expect(api.listCalls).toBe(1);
    expect(api.watches).toHaveLength(1);
    expect(api.lastWatch.query.resourceVersion).toBe("10");

    // Closed at once with no event: not a healthy end, so the next attempt waits for the backoff.
    api.lastWatch.onDone(null);
    await clock.advance(0);
    expect(api.watches).toHaveLength(1);
    await clock.advance(1_000);
    expect(api.watches).toHaveLength(2);
    expect(api.listCalls).toBe(1);
  });

  it("stops cleanly: the watch is aborted, no error is logged, no event arrives afterwards", async () => {
    const { clock, api, informer, recorded, lines } = setup();
    api.lists.push(listOf("10", obj("a", "1")));
    informer.start();
    await clock.advance(0);
    const watch = api.lastWatch;
    await informer.stop();
    expect(watch.aborted).toBe(true);
    watch.onEvent("ADDED", obj("late", "99"));
    await clock.advance(60_000);
    expect(recorded.events).toEqual(["add a@1"]);
    expect(api.listCalls).toBe(1);
    expect(api.watches).toHaveLength(1);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(clock.pendingTimers()).toBe(0);
    expect(() => informer.start()).toThrow(/stopped/);
  });

  it("stops cleanly while waiting out a backoff, and while a list is still in flight", async () => {
    const first = setup();
    first.api.lists.push(() => Promise.reject(new Error("connection refused")));
    first.informer.start();
    await first.clock.advance(0);
    expect(first.clock.pendingTimers()).toBe(1);
    await first.informer.stop();
    expect(first.clock.pendingTimers()).toBe(0);

    const second = setup();
    let rejectList: (err: Error) => void = () => undefined;
    second.api.lists.push(() => new Promise((_resolve, reject) => (rejectList = reject)));
    second.informer.start();
    const sync = second.informer.waitForSync();
    const stopped = second.informer.stop();
    await expect(sync).rejects.toThrow(/stopped before its cache synced/);
    rejectList(Object.assign(new Error("aborted"), { name: "AbortError" }));
    await stopped;
    expect(second.lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it("waitForSync rejects with the signal's reason when it aborts first", async () => {
    const { api, informer } = setup();
    running = informer;
    api.lists.push(() => new Promise(() => undefined));
    informer.start();
    const controller = new AbortController();
    const sync = informer.waitForSync(controller.signal);
    controller.abort(new Error("shutting down"));
    await expect(sync).rejects.toThrow("shutting down");
  });

  it("serves the cache by namespace, labels and secondary index, and replays the cache to late handlers", async () => {
    const { clock, api, informer } = setup();
    running = informer;
    informer.addIndex("owner", (o) => (o.metadata?.labels?.owner ? [o.metadata.labels.owner] : []));
    api.lists.push(
      listOf(
        "10",
        obj("a", "1", { namespace: "x", labels: { owner: "cfg1", tier: "gpu" } }),
        obj("b", "1", { namespace: "y", labels: { owner: "cfg1" } }),
        obj("c", "1", { namespace: "x", labels: { owner: "cfg2" } }),
      ),
    );
    informer.start();
    await clock.advance(0);
    expect(names(informer.list({ namespace: "x" }))).toEqual(["x/a", "x/c"]);
    expect(names(informer.list({ labels: { owner: "cfg1" } }))).toEqual(["x/a", "y/b"]);
    expect(names(informer.list({ namespace: "x", labels: { tier: "gpu" } }))).toEqual(["x/a"]);
    expect(names(informer.byIndex("owner", "cfg1"))).toEqual(["x/a", "y/b"]);
    expect(informer.get("b", "y")?.metadata?.name).toBe("b");
    expect(informer.get("b", "x")).toBeUndefined();

    api.lastWatch.onEvent("MODIFIED", obj("a", "2", { namespace: "x", labels: { owner: "cfg2" } }));
    api.lastWatch.onEvent("DELETED", obj("b", "3", { namespace: "y", labels: { owner: "cfg1" } }));
    expect(names(informer.byIndex("owner", "cfg1"))).toEqual([]);
    expect(names(informer.byIndex("owner", "cfg2"))).toEqual(["x/a", "x/c"]);
    expect(names(informer.list({ namespace: "y" }))).toEqual([]);

    const late: string[] = [];
    informer.onAdd((o) => late.push(objectKey(o)));
    expect(late.sort()).toEqual(["x/a", "x/c"]);
  });

  it("keeps going when a handler throws", async () => {
    const { clock, api, informer, recorded, lines } = setup();
    running = informer;
    informer.onAdd(() => {
      throw new Error("handler bug");
    });
    api.lists.push(listOf("10", obj("a", "1")));
    informer.start();
    await clock.advance(0);
    api.lastWatch.onEvent("ADDED", obj("b", "11"));
    expect(recorded.events).toEqual(["add a@1", "add b@11"]);
    expect(informer.size()).toBe(2);
    expect(lines.filter((l) => l.msg === "informer event handler threw")).toHaveLength(2);
  });
});
