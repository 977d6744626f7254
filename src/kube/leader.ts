// Lease-based leader election (coordination.k8s.io/v1) with client-go's semantics: a pure decision
// from the observed lease, and a thin loop that acquires, renews every retry period, steps down when
// renewal fails past the renew deadline, and releases the lease on graceful shutdown. Leadership is a
// fence (fence.ts): writes stop at the renew deadline, strictly before a peer can take the lease.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { pino, type Logger } from "pino";
import { sleep, systemClock, withTimeout, type MonotonicClock } from "./clock.js";
import { toKubeError } from "./errors.js";
import { LeaseFence, type WriteFence } from "./fence.js";

/** The lease spec fields leader election uses; times in milliseconds since the epoch. */
export interface LeaseRecord {
  /** "" when nobody holds the lease (after a release). */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: number | undefined;
  renewTime: number | undefined;
  leaseTransitions: number;
}

export interface StoredLease {
  record: LeaseRecord;
  resourceVersion: string;
}

/** The lease object as leader election needs it; the Kubernetes one is kubeLeaseStore. */
export interface LeaseStore {
  /** For logs, e.g. "dpo-system/dpo-operator". */
  readonly description: string;
  /** undefined when the lease does not exist. `signal` cancels the request (an attempt that timed out). */
  get(signal?: AbortSignal): Promise<StoredLease | undefined>;
  /** Throws a ConflictError (AlreadyExists) when someone created it first. */
  create(record: LeaseRecord, signal?: AbortSignal): Promise<StoredLease>;
  /** Throws a ConflictError when the lease changed since `resourceVersion`. */
  update(record: LeaseRecord, resourceVersion: string, signal?: AbortSignal): Promise<StoredLease>;
}

export interface LeaseDecisionInput {
  /** The lease as last read; undefined when it does not exist. */
  current: LeaseRecord | undefined;
  /** Monotonic time at which this elector first saw `current` in its present form. */
  observedAt: number;
  /** Monotonic time now: expiry is judged on it alone. */
  now: number;
  /** Wall-clock time now (ms since the epoch), written into the record's acquireTime and renewTime. */
  wallNow: number;
  identity: string;
  leaseDurationSeconds: number;
}

export type LeaseDecision =
  | { action: "create"; record: LeaseRecord }
  | { action: "take"; record: LeaseRecord }
  | { action: "renew"; record: LeaseRecord }
  | { action: "wait"; holder: string; expiresAt: number };

/**
 * What to do with the lease, as client-go decides it. Expiry is judged on the local monotonic clock:
 * the lease is still held while `observedAt + leaseDurationSeconds` lies in the future, whatever
 * renewTime says, so neither skew between replicas nor a step of the wall clock matters. An empty
 * holder means released: take it now. `expiresAt` is monotonic too.
 */
export function decideLease(input: LeaseDecisionInput): LeaseDecision {
  const { current, observedAt, now, wallNow, identity, leaseDurationSeconds } = input;
  if (current === undefined) {
    return {
      action: "create",
      record: {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: wallNow,
        renewTime: wallNow,
        leaseTransitions: 0,
      },
    };
  }
  if (current.holderIdentity === identity) {
    return {
      action: "renew",
      record: {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: current.acquireTime ?? wallNow,
        renewTime: wallNow,
        leaseTransitions: current.leaseTransitions,
      },
    };
  }
  const expiresAt = observedAt + current.leaseDurationSeconds * 1000;
  if (current.holderIdentity !== "" && expiresAt > now) {
    return { action: "wait", holder: current.holderIdentity, expiresAt };
  }
  return {
    action: "take",
    record: {
      holderIdentity: identity,
      leaseDurationSeconds,
      acquireTime: wallNow,
      renewTime: wallNow,
      leaseTransitions: current.leaseTransitions + 1,
    },
  };
}

/** Local observation time of `next`: unchanged while the record is unchanged, `now` when it changed. */
export function observationTime(
  previous: LeaseRecord | undefined,
  previousAt: number,
  next: LeaseRecord,
  now: number,
): number {
  return previous !== undefined && sameRecord(previous, next) ? previousAt : now;
}

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return (
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

export type StoppedReason = "lost" | "released";

export interface LeaderElectionOptions {
  store: LeaseStore;
  /** Unique per process; see defaultIdentity(). */
  identity: string;
  leaseDurationMs?: number;
  /** How long after a renewal was sent this replica may still write without another success. */
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Release the lease when run()'s signal aborts, so a peer takes over at once (default true). */
  releaseOnCancel?: boolean;
  /**
   * Called once leadership is acquired; `signal` aborts when it ends, the moment the fence closes (for
   * "lost", at the renew deadline, before onStoppedLeading).
   */
  onStartedLeading: (signal: AbortSignal) => void;
  /** Called once when leadership ends: "lost" (renewal failed; exit and restart) or "released". */
  onStoppedLeading: (reason: StoppedReason) => void;
  /** Called when another holder is observed. */
  onNewLeader?: (identity: string) => void;
  /** Wall time for the record, monotonic time for every expiry and deadline. */
  clock?: MonotonicClock;
  logger?: Logger;
}

/** client-go's convention: the host (pod) name plus a random suffix, so two processes never share one. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

/** client-go waits retryPeriod × [1, 1 + this) between acquire attempts. */
const JITTER_FACTOR = 1.2;

export class LeaderElector {
  private readonly options: Required<
    Pick<LeaderElectionOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs" | "releaseOnCancel">
  > &
    LeaderElectionOptions;
  private readonly clock: MonotonicClock;
  private readonly logger: Logger;
  private readonly leaseDurationSeconds: number;
  private readonly leaseFence: LeaseFence;
  private observed: StoredLease | undefined;
  /** Monotonic. */
  private observedAt = 0;
  private leading = false;
  private lastReportedLeader = "";
  /** Wakes the renew loop when the fence closes by itself. */
  private fenceExpired = new AbortController();

  constructor(options: LeaderElectionOptions) {
    this.options = {
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      releaseOnCancel: true,
      ...options,
    };
    const { leaseDurationMs, renewDeadlineMs, retryPeriodMs, identity } = this.options;
    if (identity === "") throw new Error("leader election needs a non-empty identity");
    if (!(leaseDurationMs > renewDeadlineMs))
      throw new Error("leaseDuration must be greater than renewDeadline");
    if (!(renewDeadlineMs > JITTER_FACTOR * retryPeriodMs)) {
      throw new Error(`renewDeadline must be greater than retryPeriod × ${JITTER_FACTOR}`);
    }
    if (retryPeriodMs <= 0) throw new Error("retryPeriod must be positive");
    this.leaseDurationSeconds = Math.max(1, Math.floor(leaseDurationMs / 1000));
    // The lease says whole seconds: a peer waits that long, so the fence must close within it.
    if (!(this.leaseDurationSeconds * 1000 > renewDeadlineMs)) {
      throw new Error("leaseDuration, in whole seconds, must be greater than renewDeadline");
    }
    this.clock = options.clock ?? systemClock;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({
      lease: options.store.description,
      identity,
    });
    this.leaseFence = new LeaseFence(this.clock, renewDeadlineMs, () => this.fenceExpired.abort());
  }

  isLeader(): boolean {
    return this.leading && this.leaseFence.state().open;
  }

  /** Checked by every write of the workers; open only while this replica leads within its renew deadline. */
  get fence(): WriteFence {
    return this.leaseFence;
  }

  /** Holder of the lease as last observed ("" when none or unknown). */
  leader(): string {
    return this.observed?.record.holderIdentity ?? "";
  }

  /**
   * Campaigns until this process holds the lease, then leads until renewal fails past the renew
   * deadline ("lost") or `signal` aborts (the lease is released). Resolves after onStoppedLeading,
   * or without any callback when `signal` aborts before leadership was acquired.
   */
  async run(signal: AbortSignal): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs, identity } = this.options;
    this.logger.info("campaigning for leadership");
    let acquiredAt: number | undefined;
    while (!signal.aborted) {
      acquiredAt = await this.tryAcquireOrRenew(renewDeadlineMs);
      if (acquiredAt !== undefined) break;
      await sleep(this.clock, retryPeriodMs * (1 + Math.random() * (JITTER_FACTOR - 1)), signal);
    }
    if (signal.aborted || acquiredAt === undefined) return;

    this.fenceExpired = new AbortController();
    this.leaseFence.open(acquiredAt);
    this.leading = true;
    this.logger.info("acquired leadership");
    this.safely("onStartedLeading", () => this.options.onStartedLeading(this.leaseFence.signal));

    // As client-go: after each success wait one retry period, then keep trying every retry period. Unlike
    // client-go the deadline is the fence's: renewDeadline from when the last successful renewal was
    // sent, so the loop gives up exactly when writes stop, and a peer cannot take over before
    // leaseDuration after that renewal.
    const wake = AbortSignal.any([signal, this.fenceExpired.signal]);
    let reason: StoppedReason | undefined;
    while (reason === undefined) {
      await sleep(this.clock, this.pauseBeforeRenewal(), wake);
      while (reason === undefined) {
        if (signal.aborted) {
          reason = "released";
          break;
        }
        const fence = this.leaseFence.state();
        if (fence.open) {
          const sentAt = await this.tryAcquireOrRenew(fence.remainingMs);
          if (sentAt !== undefined && this.leader() === identity && this.leaseFence.renewed(sentAt)) break;
        }
        if (!this.leaseFence.state().open || this.leader() !== identity) {
          reason = "lost";
          break;
        }
        await sleep(this.clock, this.pauseBeforeRenewal(), wake);
      }
    }

    const stoppedReason: StoppedReason = reason;
    this.leading = false;
    this.leaseFence.close(reason === "lost" ? "renew-deadline-passed" : "not-leading");
    if (reason === "released" && this.options.releaseOnCancel) await this.release();
    if (reason === "lost")
      this.logger.warn({ renewDeadlineMs }, "lost leadership: could not renew the lease in time");
    else this.logger.info("stopped leading");
    this.safely("onStoppedLeading", () => this.options.onStoppedLeading(stoppedReason));
  }

  /**
   * One retry period, but never so long that the fence closes before the next attempt: a slow
   * acquisition or renewal leaves less of the deadline. Closer to it, half of what is left, down to a
   * quarter period, so an outage that ends before the deadline is not lost to the cadence of attempts.
   */
  private pauseBeforeRenewal(): number {
    const { retryPeriodMs } = this.options;
    const fence = this.leaseFence.state();
    if (!fence.open) return 0;
    const pause = Math.min(retryPeriodMs, Math.max(retryPeriodMs / 4, fence.remainingMs / 2));
    return pause < fence.remainingMs ? pause : fence.remainingMs / 2;
  }

  /**
   * Gives the lease up if this process holds it: empty holder and a one-second duration, so a peer
   * takes over on its next attempt instead of waiting for expiry. Returns whether the lease is free
   * of us afterwards.
   */
  async release(): Promise<boolean> {
    const { store, identity, renewDeadlineMs } = this.options;
    const abort = new AbortController();
    const attempt = async (): Promise<boolean> => {
      const current = await store.get(abort.signal);
      if (current === undefined || current.record.holderIdentity !== identity) return true;
      const now = this.clock.now();
      const released: LeaseRecord = {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current.record.leaseTransitions,
      };
      this.remember(await store.update(released, current.resourceVersion, abort.signal));
      return true;
    };
    try {
      const released = await withTimeout(this.clock, attempt(), renewDeadlineMs, false);
      if (released) this.logger.info("released the lease");
      else this.logger.warn("releasing the lease timed out; peers wait for it to expire");
      return released;
    } catch (err) {
      this.logger.warn({ err: toKubeError(err) }, "could not release the lease; peers wait for it to expire");
      return false;
    } finally {
      abort.abort();
    }
  }

  /**
   * One client-go tryAcquireOrRenew, bounded by `timeoutMs` (the request is cancelled then, so it cannot
   * reach the server later): the monotonic time the successful attempt started, or undefined.
   */
  private async tryAcquireOrRenew(timeoutMs: number): Promise<number | undefined> {
    const sentAt = this.clock.monotonicNow();
    const abort = new AbortController();
    try {
      const ok = await withTimeout(this.clock, this.acquireOrRenewOnce(abort.signal), timeoutMs, false);
      return ok ? sentAt : undefined;
    } catch (err) {
      this.logger.debug({ err: toKubeError(err) }, "lease attempt failed");
      return undefined;
    } finally {
      abort.abort();
    }
  }

  private async acquireOrRenewOnce(signal: AbortSignal): Promise<boolean> {
    const { store, identity } = this.options;
    const now = this.clock.monotonicNow();
    const wallNow = this.clock.now();
    // Fast path: we hold it and nobody could have taken it, so write without reading first.
    const mine = this.observed;
    if (
      mine !== undefined &&
      mine.record.holderIdentity === identity &&
      this.observedAt + mine.record.leaseDurationSeconds * 1000 > now
    ) {
      try {
        this.remember(
          await store.update(
            { ...mine.record, leaseDurationSeconds: this.leaseDurationSeconds, renewTime: wallNow },
            mine.resourceVersion,
            signal,
          ),
        );
        return true;
      } catch (err) {
        if (signal.aborted) throw err;
        this.logger.debug({ err: toKubeError(err) }, "optimistic renew failed; reading the lease");
      }
    }

    const current = await store.get(signal);
    if (current !== undefined) {
      this.observedAt = observationTime(
        this.observed?.record,
        this.observedAt,
        current.record,
        this.clock.monotonicNow(),
      );
      this.observed = current;
    }
    const decision = decideLease({
      current: current?.record,
      observedAt: this.observedAt,
      now,
      wallNow,
      identity,
      leaseDurationSeconds: this.leaseDurationSeconds,
    });
    switch (decision.action) {
      case "wait":
        this.reportLeader(decision.holder);
        return false;
      case "create":
        this.remember(await store.create(decision.record, signal));
        break;
      case "take":
      case "renew":
        // `current` is defined here: only a missing lease leads to "create".
        this.remember(await store.update(decision.record, current?.resourceVersion ?? "", signal));
        break;
    }
    this.reportLeader(identity);
    return true;
  }

  private remember(stored: StoredLease): void {
    this.observed = stored;
    this.observedAt = this.clock.monotonicNow();
  }

  private reportLeader(holder: string): void {
    if (holder === this.lastReportedLeader) return;
    this.lastReportedLeader = holder;
    if (holder !== this.options.identity) {
      this.logger.info({ leader: holder }, "new leader observed");
      const onNewLeader = this.options.onNewLeader;
      if (onNewLeader) this.safely("onNewLeader", () => onNewLeader(holder));
    }
  }

  private safely(callback: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error({ err, callback }, "leader election callback threw");
    }
  }
}
