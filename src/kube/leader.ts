// Lease-based leader election (coordination.k8s.io/v1) with client-go's semantics: a pure decision
// from the observed lease, and a thin loop that acquires, renews every retry period, steps down when
// renewal fails past the renew deadline, and releases the lease on graceful shutdown.
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { sleep, systemClock, withTimeout, type Clock } from "./clock.js";
import { isNotFound, toKubeError } from "./errors.js";

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
  /** undefined when the lease does not exist. */
  get(): Promise<StoredLease | undefined>;
  /** Throws a ConflictError (AlreadyExists) when someone created it first. */
  create(record: LeaseRecord): Promise<StoredLease>;
  /** Throws a ConflictError when the lease changed since `resourceVersion`. */
  update(record: LeaseRecord, resourceVersion: string): Promise<StoredLease>;
}

export interface LeaseDecisionInput {
  /** The lease as last read; undefined when it does not exist. */
  current: LeaseRecord | undefined;
  /** Local time at which this elector first saw `current` in its present form. */
  observedAt: number;
  now: number;
  identity: string;
  leaseDurationSeconds: number;
}

export type LeaseDecision =
  | { action: "create"; record: LeaseRecord }
  | { action: "take"; record: LeaseRecord }
  | { action: "renew"; record: LeaseRecord }
  | { action: "wait"; holder: string; expiresAt: number };

/**
 * What to do with the lease, as client-go decides it. Expiry is judged on the local clock: the
 * lease is still held while `observedAt + leaseDurationSeconds` lies in the future, whatever renewTime
 * says, so clock skew between replicas does not matter. An empty holder means released: take it now.
 */
export function decideLease(input: LeaseDecisionInput): LeaseDecision {
  const { current, observedAt, now, identity, leaseDurationSeconds } = input;
  if (current === undefined) {
    return {
      action: "create",
      record: {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: now,
        renewTime: now,
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
        acquireTime: current.acquireTime ?? now,
        renewTime: now,
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
      acquireTime: now,
      renewTime: now,
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
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Release the lease when run()'s signal aborts, so a peer takes over at once (default true). */
  releaseOnCancel?: boolean;
  /** Called once leadership is acquired; `signal` aborts when it ends. */
  onStartedLeading: (signal: AbortSignal) => void;
  /** Called once when leadership ends: "lost" (renewal failed; exit and restart) or "released". */
  onStoppedLeading: (reason: StoppedReason) => void;
  /** Called when another holder is observed. */
  onNewLeader?: (identity: string) => void;
  clock?: Clock;
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
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly leaseDurationSeconds: number;
  private observed: StoredLease | undefined;
  private observedAt = 0;
  private leading = false;
  private lastReportedLeader = "";

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
    this.clock = options.clock ?? systemClock;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({
      lease: options.store.description,
      identity,
    });
  }

  isLeader(): boolean {
    return this.leading;
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
    const { retryPeriodMs, renewDeadlineMs } = this.options;
    this.logger.info("campaigning for leadership");
    while (!signal.aborted) {
      if (await this.tryAcquireOrRenew(renewDeadlineMs)) break;
      await sleep(this.clock, retryPeriodMs * (1 + Math.random() * (JITTER_FACTOR - 1)), signal);
    }
    if (signal.aborted) return;

    const leadership = new AbortController();
    this.leading = true;
    this.logger.info("acquired leadership");
    this.safely("onStartedLeading", () => this.options.onStartedLeading(leadership.signal));

    // As client-go: after each success wait one retry period, then keep trying every retry period
    // for at most renewDeadline; a peer cannot take over before leaseDuration after our last renewal.
    let reason: StoppedReason | undefined;
    while (reason === undefined) {
      await sleep(this.clock, retryPeriodMs, signal);
      const deadline = this.clock.now() + renewDeadlineMs;
      while (reason === undefined) {
        if (signal.aborted) {
          reason = "released";
          break;
        }
        const remainingMs = deadline - this.clock.now();
        if (remainingMs > 0 && (await this.tryAcquireOrRenew(remainingMs))) break;
        if (this.clock.now() >= deadline || this.leader() !== this.options.identity) {
          reason = "lost";
          break;
        }
        await sleep(this.clock, retryPeriodMs, signal);
      }
    }

    const stoppedReason: StoppedReason = reason;
    this.leading = false;
    leadership.abort();
    if (reason === "released" && this.options.releaseOnCancel) await this.release();
    if (reason === "lost")
      this.logger.warn({ renewDeadlineMs }, "lost leadership: could not renew the lease in time");
    else this.logger.info("stopped leading");
    this.safely("onStoppedLeading", () => this.options.onStoppedLeading(stoppedReason));
  }

  /**
   * Gives the lease up if this process holds it: empty holder and a one-second duration, so a peer
   * takes over on its next attempt instead of waiting for expiry. Returns whether the lease is free
   * of us afterwards.
   */
  async release(): Promise<boolean> {
    const { store, identity, renewDeadlineMs } = this.options;
    const attempt = async (): Promise<boolean> => {
      const current = await store.get();
      if (current === undefined || current.record.holderIdentity !== identity) return true;
      const now = this.clock.now();
      const released: LeaseRecord = {
        holderIdentity: "",
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current.record.leaseTransitions,
      };
      this.remember(await store.update(released, current.resourceVersion));
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
    }
  }

  /** One client-go tryAcquireOrRenew, bounded by `timeoutMs`; true when we hold a freshly written lease. */
  private async tryAcquireOrRenew(timeoutMs: number): Promise<boolean> {
    try {
      return await withTimeout(this.clock, this.acquireOrRenewOnce(), timeoutMs, false);
    } catch (err) {
      this.logger.debug({ err: toKubeError(err) }, "lease attempt failed");
      return false;
    }
  }

  private async acquireOrRenewOnce(): Promise<boolean> {
    const { store, identity } = this.options;
    const now = this.clock.now();
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
            { ...mine.record, leaseDurationSeconds: this.leaseDurationSeconds, renewTime: now },
            mine.resourceVersion,
          ),
        );
        return true;
      } catch (err) {
        this.logger.debug({ err: toKubeError(err) }, "optimistic renew failed; reading the lease");
      }
    }

    const current = await store.get();
    if (current !== undefined) {
      this.observedAt = observationTime(
        this.observed?.record,
        this.observedAt,
        current.record,
        this.clock.now(),
      );
      this.observed = current;
    }
    const decision = decideLease({
      current: current?.record,
      observedAt: this.observedAt,
      now,
      identity,
      leaseDurationSeconds: this.leaseDurationSeconds,
    });
    switch (decision.action) {
      case "wait":
        this.reportLeader(decision.holder);
        return false;
      case "create":
        this.remember(await store.create(decision.record));
        break;
      case "take":
      case "renew":
        // `current` is defined here: only a missing lease leads to "create".
        this.remember(await store.update(decision.record, current?.resourceVersion ?? ""));
        break;
    }
    this.reportLeader(identity);
    return true;
  }

  private remember(stored: StoredLease): void {
    this.observed = stored;
    this.observedAt = this.clock.now();
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

/** The Lease `namespace/name` through client-node's CoordinationV1Api. */
export function kubeLeaseStore(kc: KubeConfig, lease: { namespace: string; name: string }): LeaseStore {
  const api = kc.makeApiClient(CoordinationV1Api);
  const { namespace, name } = lease;
  const toLease = (record: LeaseRecord, resourceVersion?: string): V1Lease => ({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name, namespace, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      leaseTransitions: record.leaseTransitions,
      // MicroTime must carry six fractional digits or the API server refuses it; V1MicroTime prints them.
      ...(record.acquireTime === undefined ? {} : { acquireTime: new V1MicroTime(record.acquireTime) }),
      ...(record.renewTime === undefined ? {} : { renewTime: new V1MicroTime(record.renewTime) }),
    },
  });
  return {
    description: `${namespace}/${name}`,
    async get() {
      try {
        return fromLease(await api.readNamespacedLease({ name, namespace }));
      } catch (err) {
        if (isNotFound(err)) return undefined;
        throw toKubeError(err);
      }
    },
    async create(record) {
      try {
        return fromLease(await api.createNamespacedLease({ namespace, body: toLease(record) }));
      } catch (err) {
        throw toKubeError(err);
      }
    },
    async update(record, resourceVersion) {
      try {
        return fromLease(
          await api.replaceNamespacedLease({ name, namespace, body: toLease(record, resourceVersion) }),
        );
      } catch (err) {
        throw toKubeError(err);
      }
    },
  };
}

function fromLease(lease: V1Lease): StoredLease {
  const spec = lease.spec ?? {};
  return {
    resourceVersion: lease.metadata?.resourceVersion ?? "",
    record: {
      holderIdentity: spec.holderIdentity ?? "",
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      leaseTransitions: spec.leaseTransitions ?? 0,
      acquireTime: toMillis(spec.acquireTime),
      renewTime: toMillis(spec.renewTime),
    },
  };
}

/** client-node leaves MicroTime as the wire string when reading, though its type says Date. */
function toMillis(value: Date | string | undefined): number | undefined {
  if (value === undefined || value === null) return undefined;
  const millis = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isNaN(millis) ? undefined : millis;
}
