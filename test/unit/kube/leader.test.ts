// Lease leader election: the elector loop against an in-memory lease store with the same interface and
// optimistic concurrency as the Kubernetes one.
import { describe, expect, it } from "vitest";
import {
  ConflictError,
  LeaderElector,
  ManualClock,
  NotFoundError,
  NotLeaderError,
  TransientError,
  type LeaseRecord,
  type LeaseStore,
  type StoredLease,
  type StoppedReason,
} from "../../../src/kube/index.js";
import { T0, held } from "./leader-support.js";

/** One Lease object with resourceVersion checks, like the API server. */
class MemoryLeaseStore {
  lease: StoredLease | undefined;
  private version = 0;
  writes = 0;

  get(): StoredLease | undefined {
    return this.lease === undefined
      ? undefined
      : { record: { ...this.lease.record }, resourceVersion: this.lease.resourceVersion };
  }

  create(record: LeaseRecord): StoredLease {
    if (this.lease !== undefined) {
      throw new ConflictError('leases.coordination.k8s.io "operator" already exists', {
        code: 409,
        reason: "AlreadyExists",
      });
    }
    return this.write(record);
  }

  update(record: LeaseRecord, resourceVersion: string): StoredLease {
    if (this.lease === undefined)
      throw new NotFoundError('leases "operator" not found', { code: 404, reason: "NotFound" });
    if (this.lease.resourceVersion !== resourceVersion) {
      throw new ConflictError("the object has been modified", { code: 409, reason: "Conflict" });
    }
    return this.write(record);
  }

  private write(record: LeaseRecord): StoredLease {
    this.writes++;
    this.lease = { record: { ...record }, resourceVersion: String(++this.version) };
    return this.get()!;
  }
}

/**
 * One replica's connection to the store; `reachable = false` makes every call fail like a refused
 * connection, `hanging = true` makes every call wait, unanswered, until its signal aborts (a partition
 * that holds the bytes). `signals` are the signals calls were given.
 */
function connection(
  store: MemoryLeaseStore,
): LeaseStore & { reachable: boolean; hanging: boolean; signals: Array<AbortSignal | undefined> } {
  const call = <T>(fn: () => T, signal?: AbortSignal): Promise<T> => {
    conn.signals.push(signal);
    if (conn.hanging) {
      return new Promise<T>((_, reject) =>
        signal?.addEventListener("abort", () => reject(new TransientError("aborted", { code: 0 }))),
      );
    }
    if (!conn.reachable) return Promise.reject(new TransientError("connection refused", { code: 0 }));
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  };
  const conn = {
    description: "dpo-system/operator",
    reachable: true,
    hanging: false,
    signals: [] as Array<AbortSignal | undefined>,
    get: (signal?: AbortSignal) => call(() => store.get(), signal),
    create: (record: LeaseRecord, signal?: AbortSignal) => call(() => store.create(record), signal),
    update: (record: LeaseRecord, resourceVersion: string, signal?: AbortSignal) =>
      call(() => store.update(record, resourceVersion), signal),
  };
  return conn;
}

interface Replica {
  name: string;
  elector: LeaderElector;
  conn: ReturnType<typeof connection>;
  stop: AbortController;
  done: Promise<void>;
  startedAt: number[];
  stoppedAt: Array<{ at: number; reason: StoppedReason }>;
  leaderSignal: AbortSignal | undefined;
}

function startReplica(name: string, store: MemoryLeaseStore, clock: ManualClock): Replica {
  const conn = connection(store);
  const stop = new AbortController();
  const startedAt: number[] = [];
  const stoppedAt: Replica["stoppedAt"] = [];
  let leaderSignal: AbortSignal | undefined;
  const elector = new LeaderElector({
    store: conn,
    identity: name,
    clock,
    onStartedLeading: (signal) => {
      startedAt.push(clock.now());
      leaderSignal = signal;
    },
    onStoppedLeading: (reason) => stoppedAt.push({ at: clock.now(), reason }),
  });
  const done = elector.run(stop.signal);
  return {
    name,
    elector,
    conn,
    stop,
    done,
    startedAt,
    stoppedAt,
    get leaderSignal() {
      return leaderSignal;
    },
  };
}

/** Advances time in small steps, checking after each that at most one replica believes it leads. */
async function runFor(clock: ManualClock, ms: number, replicas: Replica[], stepMs = 100): Promise<void> {
  for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
    await clock.advance(stepMs);
    const leaders = replicas.filter((r) => r.elector.isLeader()).map((r) => r.name);
    if (leaders.length > 1) throw new Error(`two leaders at ${clock.now() - T0} ms: ${leaders.join(", ")}`);
  }
}

/** Steps time until `predicate` holds, or fails after `deadlineMs` printing what was seen. */
async function advanceUntil(
  clock: ManualClock,
  replicas: Replica[],
  predicate: () => boolean,
  deadlineMs: number,
  describeState: () => string,
): Promise<number> {
  const start = clock.now();
  while (!predicate()) {
    if (clock.now() - start > deadlineMs)
      throw new Error(`not reached within ${deadlineMs} ms; last seen: ${describeState()}`);
    await runFor(clock, 100, replicas);
  }
  return clock.now() - start;
}

const leaders = (replicas: Replica[]): string =>
  JSON.stringify(
    replicas.map((r) => ({ name: r.name, leader: r.elector.isLeader(), sees: r.elector.leader() })),
  );

describe("LeaderElector", () => {
  it("with two replicas started together, exactly one leads and the other keeps waiting", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const replicas = [startReplica("a", store, clock), startReplica("b", store, clock)];
    await runFor(clock, 60_000, replicas);
    const leading = replicas.filter((r) => r.elector.isLeader());
    expect(leading).toHaveLength(1);
    const [leader] = leading;
    const follower = replicas.find((r) => r !== leader)!;
    expect(store.lease!.record).toMatchObject({
      holderIdentity: leader!.name,
      leaseTransitions: 0,
      acquireTime: T0,
    });
    expect(store.lease!.record.renewTime).toBeGreaterThan(clock.now() - 2_500);
    expect(follower.elector.leader()).toBe(leader!.name);
    expect(follower.startedAt).toEqual([]);
    // Renewing every 2 s for a minute is about 30 writes, not one per follower attempt.
    expect(store.writes).toBeLessThan(40);
    for (const r of replicas) r.stop.abort();
    await Promise.all(replicas.map((r) => r.done));
  });

  it("when the leader is cut off, it steps down before the other takes over, within the lease duration", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    await runFor(clock, 1_000, [a]);
    expect(a.elector.isLeader()).toBe(true);
    const b = startReplica("b", store, clock);
    await runFor(clock, 10_000, [a, b]);
    expect(b.elector.isLeader()).toBe(false);

    const lastRenew = store.lease!.record.renewTime!;
    a.conn.reachable = false;
    await advanceUntil(
      clock,
      [a, b],
      () => b.elector.isLeader(),
      30_000,
      () => leaders([a, b]),
    );

    expect(a.stoppedAt).toEqual([{ at: expect.any(Number) as number, reason: "lost" }]);
    expect(a.leaderSignal?.aborted).toBe(true);
    await a.done;
    const aStopped = a.stoppedAt[0]!.at;
    const bStarted = b.startedAt[0]!;
    expect(aStopped).toBeLessThan(bStarted);
    // The renew deadline from when the last successful renewal was sent (plus the 100 ms test step).
    expect(aStopped - lastRenew).toBeLessThanOrEqual(10_000 + 100);
    // b first sees a's last renewal on its next poll (≤ 2.4 s later, jittered retry period), waits a
    // lease duration from then, and takes over on the poll after that (≤ 2.4 s more).
    expect(bStarted - lastRenew).toBeGreaterThanOrEqual(15_000);
    expect(bStarted - lastRenew).toBeLessThanOrEqual(2_400 + 15_000 + 2_400 + 100);
    expect(store.lease!.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it("when the leader's requests hang, its fence closes at the renew deadline, before the other leads", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    await runFor(clock, 1_000, [a]);
    const b = startReplica("b", store, clock);
    await runFor(clock, 5_000, [a, b]);
    expect(a.elector.isLeader()).toBe(true);
    const lastRenew = store.lease!.record.renewTime!;
    a.conn.hanging = true;
    const hangingFrom = a.conn.signals.length;

    const mayWrite = (r: Replica): boolean => {
      try {
        r.elector.fence.check("PATCH /x");
        return true;
      } catch (err) {
        expect(err).toBeInstanceOf(NotLeaderError);
        return false;
      }
    };
    let fenceClosedAt: number | undefined;
    const overlap: number[] = [];
    await advanceUntil(
      clock,
      [a, b],
      () => {
        if (fenceClosedAt === undefined && !mayWrite(a)) fenceClosedAt = clock.now();
        if (mayWrite(a) && b.elector.isLeader()) overlap.push(clock.now());
        return b.elector.isLeader();
      },
      30_000,
      () => leaders([a, b]),
    );

    expect(overlap, "times both could write").toEqual([]);
    // Closed at the renew deadline from the last successful renewal (seen at the next 100 ms step) ...
    expect(fenceClosedAt! - lastRenew).toBeGreaterThan(9_900);
    expect(fenceClosedAt! - lastRenew).toBeLessThanOrEqual(10_000 + 100);
    // ... and b took over a full lease duration after it, so strictly later.
    expect(b.startedAt[0]! - lastRenew).toBeGreaterThanOrEqual(15_000);
    expect(b.startedAt[0]!).toBeGreaterThan(fenceClosedAt!);
    // Every lease request left hanging was cancelled, so none can reach the server later.
    const hung = a.conn.signals.slice(hangingFrom);
    expect(hung.length).toBeGreaterThan(0);
    expect(hung.map((signal) => signal?.aborted)).toEqual(hung.map(() => true));
    // The workers' signal ended with the fence, saying why.
    expect(a.leaderSignal?.reason).toBeInstanceOf(NotLeaderError);
    expect(a.stoppedAt.map((s) => s.reason)).toEqual(["lost"]);
    await a.done;
    b.stop.abort();
    await b.done;
  });

  it("a step of the wall clock, either way, neither ends leadership nor lets the other take over", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    await runFor(clock, 1_000, [a]);
    const b = startReplica("b", store, clock);
    await runFor(clock, 5_000, [a, b]);
    clock.jumpWallClock(3_600_000);
    await runFor(clock, 20_000, [a, b]);
    clock.jumpWallClock(-7_200_000);
    await runFor(clock, 20_000, [a, b]);
    expect(a.elector.isLeader()).toBe(true);
    expect(b.elector.isLeader()).toBe(false);
    expect(a.stoppedAt).toEqual([]);
    expect(store.lease!.record.leaseTransitions).toBe(0);
    for (const r of [a, b]) r.stop.abort();
    await Promise.all([a.done, b.done]);
  });

  it("rides out renewal failures shorter than the renew deadline", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    const b = startReplica("b", store, clock);
    await runFor(clock, 5_000, [a, b]);
    const [leader] = [a, b].filter((r) => r.elector.isLeader());
    leader!.conn.reachable = false;
    await runFor(clock, 7_000, [a, b]);
    leader!.conn.reachable = true;
    await runFor(clock, 30_000, [a, b]);
    expect(leader!.elector.isLeader()).toBe(true);
    expect(leader!.stoppedAt).toEqual([]);
    for (const r of [a, b]) r.stop.abort();
    await Promise.all([a.done, b.done]);
  });

  it("on graceful shutdown releases the lease so the other replica takes over at once", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    await runFor(clock, 1_000, [a]);
    const b = startReplica("b", store, clock);
    await runFor(clock, 5_000, [a, b]);
    expect(a.elector.isLeader()).toBe(true);

    a.stop.abort();
    await a.done;
    expect(a.stoppedAt).toEqual([{ at: clock.now(), reason: "released" }]);
    expect(store.lease!.record).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 });

    const waited = await advanceUntil(
      clock,
      [a, b],
      () => b.elector.isLeader(),
      15_000,
      () => leaders([a, b]),
    );
    // One jittered retry period (at most 2.4 s), far sooner than the 15 s lease duration.
    expect(waited).toBeLessThanOrEqual(2_500);
    expect(store.lease!.record).toMatchObject({ holderIdentity: "b", leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it("steps down at once when a renewal finds another holder", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    const a = startReplica("a", store, clock);
    await runFor(clock, 1_000, [a]);
    store.lease = {
      record: held("intruder", { renewTime: clock.now(), acquireTime: clock.now() }),
      resourceVersion: "intruder-1",
    };
    await runFor(clock, 2_500, [a]);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.stoppedAt.map((s) => s.reason)).toEqual(["lost"]);
    await a.done;
  });

  it("aborting before leadership was acquired ends the campaign without callbacks", async () => {
    const clock = new ManualClock(T0);
    const store = new MemoryLeaseStore();
    store.lease = { record: held("other", { renewTime: T0 }), resourceVersion: "7" };
    const a = startReplica("a", store, clock);
    await runFor(clock, 5_000, [a]);
    a.stop.abort();
    await a.done;
    expect(a.startedAt).toEqual([]);
    expect(a.stoppedAt).toEqual([]);
    expect(store.lease.record.holderIdentity).toBe("other");
  });

  it("refuses timings that cannot be safe", () => {
    const store = connection(new MemoryLeaseStore());
    const make = (leaseDurationMs: number, renewDeadlineMs: number, retryPeriodMs: number): LeaderElector =>
      new LeaderElector({
        store,
        identity: "a",
        leaseDurationMs,
        renewDeadlineMs,
        retryPeriodMs,
        onStartedLeading: () => undefined,
        onStoppedLeading: () => undefined,
      });
    expect(() => make(10_000, 10_000, 2_000)).toThrow(/leaseDuration/);
    expect(() => make(15_000, 2_000, 2_000)).toThrow(/renewDeadline/);
    expect(() => make(15_000, 10_000, 2_000)).not.toThrow();
  });
});
