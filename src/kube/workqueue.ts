// Keyed work queue for reconcilers: de-duplicates keys, never hands one key to two workers at once,
// delays and rate-limits retries per key, and shuts down after the keys in hand are done.
import { pino, type Logger } from "pino";
import { backoffDelayMs, type ExponentialBackoff } from "./backoff.js";
import { systemClock, type Clock } from "./clock.js";

export interface WorkQueueOptions {
  /** Name in logs. */
  name?: string;
  clock?: Clock;
  /** First retry delay of a failing key; doubles with every further failure. */
  baseDelayMs?: number;
  /** Ceiling of the retry delay. */
  maxDelayMs?: number;
}

/**
 * The queue itself. A key added while it waits is not added twice; a key added while a worker holds
 * it is queued again once, when the worker calls done().
 */
export class WorkQueue {
  readonly name: string;
  private readonly clock: Clock;
  private readonly backoff: ExponentialBackoff;
  private readonly queue: string[] = [];
  /** Keys that need processing: queued ones, and held ones added again while held. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly delayed = new Map<string, { readyAt: number; cancel: () => void }>();
  private readonly failures = new Map<string, number>();
  private getters: Array<(key: string | undefined) => void> = [];
  private idleWaiters: Array<() => void> = [];
  private readonly shutdownController = new AbortController();

  constructor(options: WorkQueueOptions = {}) {
    this.name = options.name ?? "queue";
    this.clock = options.clock ?? systemClock;
    this.backoff = { baseMs: options.baseDelayMs ?? 5, maxMs: options.maxDelayMs ?? 5 * 60_000 };
  }

  /** Aborts when shutDown() is called; reconcilers get it to cut long waits short. */
  get shutdownSignal(): AbortSignal {
    return this.shutdownController.signal;
  }

  isShuttingDown(): boolean {
    return this.shutdownController.signal.aborted;
  }

  add(key: string): void {
    if (this.isShuttingDown() || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  /** Adds `key` after `delayMs`; of several pending delays for one key the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.isShuttingDown()) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.clock.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending !== undefined && pending.readyAt <= readyAt) return;
    pending?.cancel();
    const cancel = this.clock.setTimer(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, { readyAt, cancel });
  }

  /** Adds `key` after its next backoff delay: base, 2×base, 4×base, … up to the maximum. */
  addRateLimited(key: string): void {
    this.addAfter(key, this.nextDelay(key));
  }

  /** The delay the next addRateLimited(key) will use, without using it. */
  peekDelay(key: string): number {
    return backoffDelayMs(this.backoff, (this.failures.get(key) ?? 0) + 1);
  }

  /**
   * Retries now every key that waits out a failure backoff, with its failure history cleared: for when
   * the cause of the failures is gone (the API server is reachable again), so convergence does not wait
   * for backoffs grown during the outage. Delays asked for without a failure (requeueAfter) stay.
   * Returns how many keys it retried.
   */
  retryBackedOff(): number {
    const keys = [...this.failures.keys()];
    for (const key of keys) {
      this.failures.delete(key);
      const pending = this.delayed.get(key);
      if (pending !== undefined) {
        pending.cancel();
        this.delayed.delete(key);
      }
      this.add(key);
    }
    return keys.length;
  }

  /** Clears the failure history of `key`: its next retry starts again at the base delay. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Keys waiting for a worker (not counting held or delayed ones). */
  len(): number {
    return this.queue.length;
  }

  /** Waits for the next key and marks it held; undefined once the queue shuts down. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.hold(key));
    if (this.isShuttingDown()) return Promise.resolve(undefined);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** Releases a held key; if it was added meanwhile, it is queued again now. */
  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.isShuttingDown()) this.enqueue(key);
    if (this.processing.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  /**
   * Stops accepting keys, drops queued and delayed ones (level-triggered reconcilers lose nothing: the
   * next start lists everything again), wakes idle workers, and resolves when no key is held.
   */
  shutDown(): Promise<void> {
    if (!this.isShuttingDown()) {
      this.shutdownController.abort();
      for (const { cancel } of this.delayed.values()) cancel();
      this.delayed.clear();
      this.queue.length = 0;
      this.dirty.clear();
      const getters = this.getters;
      this.getters = [];
      for (const resolve of getters) resolve(undefined);
    }
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(key: string): void {
    const getter = this.getters.shift();
    if (getter !== undefined) getter(this.hold(key));
    else this.queue.push(key);
  }

  private hold(key: string): string {
    this.processing.add(key);
    this.dirty.delete(key);
    return key;
  }

  private nextDelay(key: string): number {
    const delay = this.peekDelay(key);
    this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
    return delay;
  }
}

export interface ReconcileResult {
  /** Reconcile this key again after this long, though nothing failed (e.g. to poll a rollout). */
  requeueAfterMs?: number;
}

/** Makes the world match the desired state for one key. Throwing means "retry with backoff". */
export type Reconciler = (key: string, signal: AbortSignal) => Promise<ReconcileResult | void>;

export interface RunWorkersOptions {
  concurrency?: number;
  logger?: Logger;
}

/**
 * Runs `concurrency` workers that take keys from `queue` and reconcile them, until the queue shuts
 * down; resolves when every worker has finished the key in its hands.
 */
export async function runWorkers(
  queue: WorkQueue,
  reconcile: Reconciler,
  options: RunWorkersOptions = {},
): Promise<void> {
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`concurrency must be >= 1, got ${concurrency}`);
  const logger = (options.logger ?? pino({ level: "silent" })).child({ queue: queue.name });
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        const result = await reconcile(key, queue.shutdownSignal);
        queue.forget(key);
        if (result?.requeueAfterMs !== undefined && result.requeueAfterMs > 0) {
          queue.addAfter(key, result.requeueAfterMs);
        }
      } catch (err) {
        const retryInMs = queue.peekDelay(key);
        logger.error({ err, key, attempt: queue.numRequeues(key) + 1, retryInMs }, "reconcile failed");
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
      // A turn of the event loop between items: a reconcile that answers from the caches and writes
      // nothing continues on resolved promises alone, and a queue of them would hold timers (the Lease's
      // renewal) and sockets off for as long as it lasts (19 s at 5000 nodes: docs/benchmarks.md).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
