// Whom an informer tells what: the handlers of object changes, each kept from breaking the others, and the
// callers waiting for its first sync.
import type { Logger } from "pino";

/** The add, update and delete handlers of an informer; a handler that throws is logged and skipped. */
export class EventHandlers<T> {
  private readonly addHandlers = new Set<(obj: T) => void>();
  private readonly updateHandlers = new Set<(old: T, current: T) => void>();
  private readonly deleteHandlers = new Set<(obj: T) => void>();

  constructor(private readonly logger: Logger) {}

  /** Registers `handler` and calls it at once for every object in `existing`. Returns an unsubscribe function. */
  onAdd(handler: (obj: T) => void, existing: Iterable<T>): () => void {
    this.addHandlers.add(handler);
    for (const obj of existing) this.call("add", () => handler(obj));
    return () => this.addHandlers.delete(handler);
  }

  onUpdate(handler: (old: T, current: T) => void): () => void {
    this.updateHandlers.add(handler);
    return () => this.updateHandlers.delete(handler);
  }

  onDelete(handler: (obj: T) => void): () => void {
    this.deleteHandlers.add(handler);
    return () => this.deleteHandlers.delete(handler);
  }

  added(obj: T): void {
    for (const handler of this.addHandlers) this.call("add", () => handler(obj));
  }

  updated(old: T, current: T): void {
    for (const handler of this.updateHandlers) this.call("update", () => handler(old, current));
  }

  deleted(obj: T): void {
    for (const handler of this.deleteHandlers) this.call("delete", () => handler(obj));
  }

  /** A throwing handler must not break the cache or the other handlers. */
  private call(event: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error({ err, event }, "informer event handler threw");
    }
  }
}

/** Waiters for a cache's first sync: resolved when it syncs, rejected when it stops first or they give up. */
export class SyncGate {
  private synced = false;
  private waiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];

  get isSynced(): boolean {
    return this.synced;
  }

  /** The cache has synced: resolves every waiter, and every later one at once. */
  markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  /** Rejects every waiter so far with `err` (the cache stopped before it synced). */
  rejectWaiters(err: Error): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.reject(err);
  }

  /** Resolves once synced; rejects when `signal` aborts first, or with what rejectWaiters is given. */
  wait(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(abortReason(signal));
      };
      const waiter = {
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        reject: (err: Error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      this.waiters.push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** Why `signal` aborted, as an Error. */
export function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error(typeof reason === "string" ? reason : "aborted");
}
