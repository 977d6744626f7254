// The keyed work queue and its worker driver: de-duplication, one worker per key, re-queue after
// processing, per-key exponential backoff, delayed adds and graceful shutdown.
import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import {
  ManualClock,
  flushPromises,
  runWorkers,
  WorkQueue,
  type ReconcileResult,
} from "../../../src/kube/index.js";

/** A promise the test resolves by hand, to hold a reconcile in progress. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

function captureLogs(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "debug" }, stream), lines };
}

describe("WorkQueue", () => {
  it("keeps one entry per key while it waits, in first-added order", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    for (const key of ["a", "b", "a", "c", "b", "a"]) queue.add(key);
    expect(queue.len()).toBe(3);
    expect([await queue.get(), await queue.get(), await queue.get()]).toEqual(["a", "b", "c"]);
    expect(queue.len()).toBe(0);
  });

  it("does not hand a held key to another worker, and queues it once more when it is done", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    queue.add("a");
    expect(await queue.get()).toBe("a");
    queue.add("a");
    queue.add("a");
    queue.add("b");
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("b");
    queue.done("a");
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("a");
    queue.done("a");
    expect(queue.len()).toBe(0);
  });

  it("grows a failing key's retry delay exponentially up to the maximum, and forget() resets it", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock, baseDelayMs: 5, maxDelayMs: 100 });
    const readyAfter: number[] = [];
    for (let attempt = 0; attempt < 7; attempt++) {
      const start = clock.now();
      queue.addRateLimited("k");
      // Step 1 ms at a time until the key shows up: measures the real delay, not the advertised one.
      while (queue.len() === 0) await clock.advance(1);
      readyAfter.push(clock.now() - start);
      await queue.get();
      queue.done("k");
    }
    expect(readyAfter).toEqual([5, 10, 20, 40, 80, 100, 100]);
    expect(queue.numRequeues("k")).toBe(7);

    queue.forget("k");
    expect(queue.numRequeues("k")).toBe(0);
    const start = clock.now();
    queue.addRateLimited("k");
    while (queue.len() === 0) await clock.advance(1);
    expect(clock.now() - start).toBe(5);
  });

  it("retryBackedOff queues every key waiting out a failure backoff at once, with fresh backoffs, and leaves plain delays", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock, baseDelayMs: 1_000, maxDelayMs: 60_000 });
    for (let i = 0; i < 5; i++) {
      queue.addRateLimited("failing");
      while (queue.len() === 0) await clock.advance(100);
      await queue.get();
      queue.done("failing");
    }
    queue.addRateLimited("failing"); // waits 32 s now
    queue.addAfter("scheduled", 30_000); // a requeueAfter, not a failure
    expect(queue.len()).toBe(0);
    expect(queue.retryBackedOff()).toBe(1);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("failing");
    queue.done("failing");
    expect(queue.numRequeues("failing")).toBe(0);
    // The cancelled backoff does not add the key a second time later.
    await clock.advance(40_000);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("scheduled");
  });

  it("keeps backoff per key: one failing key does not slow another", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock, baseDelayMs: 5 });
    for (let i = 0; i < 4; i++) {
      queue.addRateLimited("slow");
      await clock.advance(1000);
      await queue.get();
      queue.done("slow");
    }
    queue.addRateLimited("slow");
    queue.addRateLimited("fast");
    await clock.advance(5);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("fast");
    await clock.advance(74);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(await queue.get()).toBe("slow");
  });

  it("addAfter adds the key when its delay passes, and the earliest of several delays wins", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock });
    queue.addAfter("a", 1000);
    queue.addAfter("a", 300);
    queue.addAfter("a", 2000);
    await clock.advance(299);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe("a");
    queue.done("a");
    await clock.advance(5000);
    expect(queue.len()).toBe(0);
    queue.addAfter("b", 0);
    expect(queue.len()).toBe(1);
  });

  it("shutDown drops waiting and delayed keys, wakes idle getters, and resolves when held keys are done", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock });
    queue.add("held");
    queue.add("waiting");
    queue.addAfter("delayed", 100);
    expect(await queue.get()).toBe("held");

    let shutDownDone = false;
    const shutDown = queue.shutDown().then(() => (shutDownDone = true));
    expect(queue.shutdownSignal.aborted).toBe(true);
    expect(await queue.get()).toBeUndefined();
    queue.add("late");
    await clock.advance(1000);
    expect(queue.len()).toBe(0);
    await flushPromises();
    expect(shutDownDone).toBe(false);

    queue.done("held");
    await shutDown;
    expect(shutDownDone).toBe(true);
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe("runWorkers", () => {
  it("lets timers and sockets run between items, however quickly each reconcile answers", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    for (let i = 0; i < 1000; i++) queue.add(`key-${i}`);
    let reconciled = 0;
    // A reconcile that answers from the caches: resolved promises only, never a turn of the event loop.
    const reconcile = async (): Promise<void> => {
      reconciled++;
      await Promise.resolve();
    };
    let atTimer: number | undefined;
    setTimeout(() => (atTimer = reconciled), 0);
    const workers = runWorkers(queue, reconcile, { concurrency: 2 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    // The timer, due at once, ran after a few items, not after the whole queue.
    expect(atTimer).toBeDefined();
    expect(atTimer!).toBeLessThan(10);
    await queue.shutDown();
    await workers;
  });

  it("never reconciles one key in two workers at once, and reconciles it again after changes made meanwhile", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    const active = new Set<string>();
    const runs: string[] = [];
    let overlaps = 0;
    const gates = new Map<string, ReturnType<typeof gate>>();
    const reconcile = async (key: string): Promise<void> => {
      if (active.has(key)) overlaps++;
      active.add(key);
      runs.push(key);
      const g = gate();
      gates.set(key, g);
      await g.promise;
      active.delete(key);
    };
    const workers = runWorkers(queue, reconcile, { concurrency: 4 });
    queue.add("a");
    await flushPromises();
    expect(runs).toEqual(["a"]);
    // Changes to "a" arrive while it is being reconciled; three free workers must not pick it up.
    queue.add("a");
    queue.add("a");
    queue.add("b");
    await flushPromises();
    expect(runs).toEqual(["a", "b"]);
    gates.get("a")!.open();
    await flushPromises();
    expect(runs).toEqual(["a", "b", "a"]);
    gates.get("a")!.open();
    gates.get("b")!.open();
    await flushPromises();
    expect(runs).toEqual(["a", "b", "a"]);
    expect(overlaps).toBe(0);
    await queue.shutDown();
    await workers;
  });

  it("runs different keys in parallel up to the concurrency", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    let active = 0;
    let peak = 0;
    const release = gate();
    const workers = runWorkers(
      queue,
      async () => {
        active++;
        peak = Math.max(peak, active);
        await release.promise;
        active--;
      },
      { concurrency: 3 },
    );
    for (const key of ["a", "b", "c", "d", "e"]) queue.add(key);
    await flushPromises();
    expect(peak).toBe(3);
    expect(queue.len()).toBe(2);
    release.open();
    // A worker takes its next key after a turn of the event loop (flushPromises is one turn).
    await flushPromises();
    await flushPromises();
    expect(queue.len()).toBe(0);
    await queue.shutDown();
    await workers;
  });

  it("retries a throwing reconcile with growing backoff, logs the error, and starts over after a success", async () => {
    const clock = new ManualClock();
    const { logger, lines } = captureLogs();
    const queue = new WorkQueue({ clock, baseDelayMs: 5, maxDelayMs: 1000 });
    const attempts: number[] = [];
    let failuresLeft = 4;
    const workers = runWorkers(
      queue,
      async (key) => {
        attempts.push(clock.now());
        if (failuresLeft-- > 0) throw new Error(`backend unavailable for ${key}`);
        return Promise.resolve();
      },
      { logger },
    );
    const start = clock.now();
    queue.add("cfg");
    await clock.advance(1000);
    expect(attempts.map((t) => t - start)).toEqual([0, 5, 15, 35, 75]);
    const errors = lines.filter((l) => l.msg === "reconcile failed");
    expect(errors).toHaveLength(4);
    expect(errors[0]).toMatchObject({ key: "cfg", queue: "queue", attempt: 1, retryInMs: 5, level: 50 });
    expect((errors[0]!.err as { message: string }).message).toBe("backend unavailable for cfg");
    expect(queue.numRequeues("cfg")).toBe(0);

    failuresLeft = 1;
    attempts.length = 0;
    const again = clock.now();
    queue.add("cfg");
    await clock.advance(1000);
    expect(attempts.map((t) => t - again)).toEqual([0, 5]);
    await queue.shutDown();
    await workers;
  });

  it("reconciles again after requeueAfterMs when asked to, without counting a failure", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock });
    const attempts: number[] = [];
    const workers = runWorkers(queue, (): Promise<ReconcileResult> => {
      attempts.push(clock.now());
      return Promise.resolve(attempts.length < 3 ? { requeueAfterMs: 30_000 } : {});
    });
    const start = clock.now();
    queue.add("rollout");
    await clock.advance(120_000);
    expect(attempts.map((t) => t - start)).toEqual([0, 30_000, 60_000]);
    expect(queue.numRequeues("rollout")).toBe(0);
    await queue.shutDown();
    await workers;
  });

  it("on shutdown lets the reconcile in progress finish, signals it, and resolves once every worker has exited", async () => {
    const queue = new WorkQueue({ clock: new ManualClock() });
    const finish = gate();
    const seen: string[] = [];
    let signalAborted = false;
    const workers = runWorkers(
      queue,
      async (key, signal) => {
        seen.push(key);
        await finish.promise;
        signalAborted = signal.aborted;
      },
      { concurrency: 2 },
    );
    queue.add("in-progress");
    await flushPromises();
    queue.add("never-started-a");
    queue.add("never-started-b");
    queue.add("never-started-c");
    await flushPromises();
    expect(seen).toEqual(["in-progress", "never-started-a"]);

    let workersDone = false;
    void workers.then(() => (workersDone = true));
    const shutDown = queue.shutDown();
    await flushPromises();
    expect(workersDone).toBe(false);
    finish.open();
    await shutDown;
    await workers;
    expect(workersDone).toBe(true);
    expect(signalAborted).toBe(true);
    expect(seen).toEqual(["in-progress", "never-started-a"]);
  });

  it("refuses a concurrency below one", async () => {
    await expect(runWorkers(new WorkQueue(), () => Promise.resolve(), { concurrency: 0 })).rejects.toThrow(
      /concurrency/,
    );
  });
});
