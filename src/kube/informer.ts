// Shared informer: lists and watches one resource into an indexed in-memory cache and tells handlers
// what changed. Watches resume from the last resourceVersion, after a clean end at once and after a
// broken connection after a backoff; a 410 Gone leads to a relist (with deletes synthesized for objects
// that vanished), and so does nothing else but a failed list; stop() ends it without error events.
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { backoffDelayMs } from "./backoff.js";
import { sleep, systemClock, type Clock } from "./clock.js";
import { abortReason, EventHandlers, SyncGate } from "./informer-listeners.js";
import { diffRelist, IndexedCache, objectKey, sameVersion, type CacheListOptions } from "./indexed-cache.js";
import { listAll, reportKubeRequest, type ListQuery, type ListResult } from "./request.js";
import { collectionPath, type ResourceRef } from "./resources.js";
import {
  heartbeatAwareWatch,
  randomWatchTimeoutSeconds,
  runWatch,
  type WatchFn,
  type WatchOutcome,
} from "./watch.js";

/** Lists the collection; the signal aborts when the informer stops. */
export type ListFn<T> = (query: ListQuery, signal: AbortSignal) => Promise<ListResult<T>>;

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** A failure this long after the previous one starts the backoff again from `initialMs`. */
  resetAfterMs: number;
}

export interface InformerOptions<T> {
  /** Collection path, e.g. /api/v1/nodes or /apis/dpo.dev/v1beta1/namespaces/dpo/devicenodestates. */
  path: string;
  list: ListFn<T>;
  watch: WatchFn;
  labelSelector?: string;
  fieldSelector?: string;
  /** Name in logs; defaults to the path. */
  name?: string;
  logger?: Logger;
  clock?: Clock;
  backoff?: Partial<BackoffOptions>;
  /** Server-side watch timeout per request; spread out so that watches do not all renew at once. */
  watchTimeoutSeconds?: () => number;
  /**
   * Applied to every object as it enters the cache (by list or watch), before handlers see it, like
   * client-go's SetTransform: drop what no reader needs so the cache does not hold it. It must keep
   * metadata.name, namespace and resourceVersion, and it may return its argument changed or a new object.
   */
  transform?: (obj: T) => T;
  /**
   * Called each time the list/watch loop starts over: `expired` when the API server answered 410 Gone
   * (the watch's resourceVersion was compacted away; a relist follows at once), `error` when a list or
   * watch failed (after the backoff a failed list is listed again and a watch resumes from its
   * resourceVersion). For metrics: how often API faults interrupt the cache.
   */
  onRestart?: (reason: InformerRestartReason) => void;
  /**
   * Called when a list or a watch succeeds after a failure: the API server answers again. Controllers
   * use it to retry at once what failed while it did not.
   */
  onRecover?: () => void;
}

export type InformerRestartReason = "expired" | "error";

/** A transform for any kind: managedFields are the server's bookkeeping for apply, read by no controller. */
export function stripManagedFields<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata?.managedFields === undefined) return obj;
  const { managedFields: _dropped, ...metadata } = obj.metadata;
  return { ...obj, metadata };
}

/**
 * At most 5 s between attempts while the API server is away: once it is back, every informer is at most
 * one backoff behind, so the operator's statuses are right again within seconds (the API-fault tests
 * hold it to 10 s). Six informers retrying every 5 s is a load any API server takes.
 */
const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 5_000, resetAfterMs: 60_000 };

export class Informer<T extends KubernetesObject> {
  readonly name: string;
  private readonly options: InformerOptions<T>;
  /** The last list or watch failed, and none has succeeded since. */
  private failing = false;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly backoff: BackoffOptions;
  private readonly cache = new IndexedCache<T>();
  private readonly handlers: EventHandlers<T>;
  private readonly sync = new SyncGate();
  private readonly stopController = new AbortController();
  private state: "new" | "running" | "stopped" = "new";
  private loop: Promise<void> | undefined;
  /** Ends the current watch; ending one that has ended does nothing. */
  private endWatch: ((outcome: WatchOutcome) => void) | undefined;
  private resourceVersion = "";
  private failures = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;

  constructor(options: InformerOptions<T>) {
    this.options = options;
    this.name = options.name ?? options.path;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({ resource: this.name });
    this.handlers = new EventHandlers(this.logger);
    this.clock = options.clock ?? systemClock;
    this.backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
  }

  /** Starts listing and watching in the background. Register handlers and indexes first. */
  start(): void {
    if (this.state === "stopped") throw new Error(`informer ${this.name} was stopped; create a new one`);
    if (this.state === "running") return;
    this.state = "running";
    this.loop = this.run();
  }

  /** Ends the watch and the loop; resolves when nothing of the informer runs any more. */
  async stop(): Promise<void> {
    if (this.state !== "stopped") {
      this.state = "stopped";
      this.stopController.abort();
      this.endWatch?.("stopped");
      this.sync.rejectWaiters(new Error(`informer ${this.name} stopped before its cache synced`));
    }
    await this.loop;
  }

  /** True once the first list has been applied to the cache. */
  hasSynced(): boolean {
    return this.sync.isSynced;
  }

  /** Resolves once the cache has synced; rejects when `signal` aborts or the informer stops first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.sync.isSynced) return Promise.resolve();
    if (this.state === "stopped") return Promise.reject(new Error(`informer ${this.name} is stopped`));
    return this.sync.wait(signal);
  }

  /** resourceVersion of the last list or event applied. */
  lastSyncResourceVersion(): string {
    return this.resourceVersion;
  }

  /**
   * Calls `handler` for every object added from now on, and at once for every object already in the
   * cache (so a late handler sees the same world as an early one). Returns an unsubscribe function.
   */
  onAdd(handler: (obj: T) => void): () => void {
    return this.handlers.onAdd(handler, this.cache.values());
  }

  onUpdate(handler: (old: T, current: T) => void): () => void {
    return this.handlers.onUpdate(handler);
  }

  /** On a relist, `obj` is the last state the cache knew (the final state was never seen). */
  onDelete(handler: (obj: T) => void): () => void {
    return this.handlers.onDelete(handler);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.cache.getByKey(namespace ? `${namespace}/${name}` : name);
  }

  getByKey(key: string): T | undefined {
    return this.cache.getByKey(key);
  }

  /** Cached objects, optionally of one namespace and with the given labels. Do not mutate them. */
  list(options: CacheListOptions = {}): T[] {
    return this.cache.list(options);
  }

  keys(): string[] {
    return this.cache.keys();
  }

  size(): number {
    return this.cache.size();
  }

  /** Adds a secondary index: `indexFn` returns the index values of an object (e.g. its owner's name). */
  addIndex(indexName: string, indexFn: (obj: T) => string[]): void {
    this.cache.addIndex(indexName, indexFn);
  }

  /** Objects whose `indexName` values include `value`. */
  byIndex(indexName: string, value: string): T[] {
    return this.cache.byIndex(indexName, value);
  }

  private async run(): Promise<void> {
    const signal = this.stopController.signal;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          if (!(await this.relist(signal))) break;
          this.sync.markSynced();
          this.recovered();
          needList = false;
          this.logger.debug({ objects: this.cache.size(), resourceVersion: this.resourceVersion }, "listed");
        }
        const outcome = await this.watchOnce();
        if (outcome === "expired") {
          needList = true;
          this.logger.debug({ resourceVersion: this.resourceVersion }, "watch expired; relisting");
          this.options.onRestart?.("expired");
        }
      } catch (err) {
        if (signal.aborted) break;
        // A failed list is listed again. A watch that failed or broke resumes from the last
        // resourceVersion, as client-go's reflector does: the server replays what happened since, or
        // answers 410 Gone if that is compacted away, and then the informer relists. Relisting after
        // every broken connection would read whole collections (every Node of a large cluster) again on
        // each network blip or API server restart.
        const during = needList ? "list" : "watch";
        this.failing = true;
        if (this.resourceVersion === "") needList = true;
        this.options.onRestart?.("error");
        const retryInMs = this.nextBackoff();
        this.logger.warn(
          { err, retryInMs, during, resourceVersion: this.resourceVersion },
          during === "list"
            ? "list failed; listing again after backoff"
            : "watch failed; resuming it after backoff",
        );
        await sleep(this.clock, retryInMs, signal);
      }
    }
  }

  /**
   * Lists the collection into the cache; false when stopped meanwhile. A method of its own so that the
   * list, every object as the API server sent it, is garbage once this returns: held in run()'s own
   * frame, it stayed reachable while run() waited on the watch, that is until the next relist (at 5000
   * nodes, every Node with its managedFields, images and messages beside the slim cache).
   */
  private async relist(signal: AbortSignal): Promise<boolean> {
    const list = await untilAborted(
      this.options.list(
        { labelSelector: this.options.labelSelector, fieldSelector: this.options.fieldSelector },
        signal,
      ),
      signal,
    );
    if (signal.aborted) return false;
    this.replace(list.items.map((item) => this.transform(item)));
    this.resourceVersion = list.metadata?.resourceVersion ?? "";
    return true;
  }

  private watchOnce(): Promise<WatchOutcome> {
    const watch = runWatch({
      watch: this.options.watch,
      path: this.options.path,
      query: {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: (this.options.watchTimeoutSeconds ?? randomWatchTimeoutSeconds)(),
        labelSelector: this.options.labelSelector,
        fieldSelector: this.options.fieldSelector,
      },
      clock: this.clock,
      onEvent: (type, object) =>
        this.applyEvent(type, type === "BOOKMARK" ? (object as T) : this.transform(object as T)),
      onStarted: () => this.recovered(),
    });
    this.endWatch = watch.end;
    return watch.outcome;
  }

  /** The API server answered after a failure: tell onRecover, once per recovery. */
  private recovered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.options.onRecover?.();
  }

  private transform(obj: T): T {
    return this.options.transform === undefined ? obj : this.options.transform(obj);
  }

  private applyEvent(type: string, obj: T): void {
    const key = objectKey(obj);
    switch (type) {
      case "ADDED":
      case "MODIFIED": {
        const old = this.cache.getByKey(key);
        this.cache.put(key, obj);
        if (old === undefined) this.handlers.added(obj);
        else if (!sameVersion(old, obj)) this.handlers.updated(old, obj);
        break;
      }
      case "DELETED": {
        if (this.cache.has(key)) {
          this.cache.remove(key);
          this.handlers.deleted(obj);
        }
        break;
      }
      case "BOOKMARK":
        break;
      default:
        this.logger.debug({ type }, "ignoring unknown watch event type");
        return;
    }
    const version = obj.metadata?.resourceVersion;
    if (version) this.resourceVersion = version;
  }

  private replace(items: T[]): void {
    const diff = diffRelist(this.cache.byKey, items);
    for (const obj of diff.deleted) this.cache.remove(objectKey(obj));
    for (const obj of items) this.cache.put(objectKey(obj), obj);
    for (const obj of diff.added) this.handlers.added(obj);
    for (const { old, current } of diff.updated) this.handlers.updated(old, current);
    for (const obj of diff.deleted) this.handlers.deleted(obj);
  }

  private nextBackoff(): number {
    const now = this.clock.now();
    if (now - this.lastFailureAt > this.backoff.resetAfterMs) this.failures = 0;
    this.lastFailureAt = now;
    this.failures++;
    return backoffDelayMs({ baseMs: this.backoff.initialMs, maxMs: this.backoff.maxMs }, this.failures);
  }
}

/** Settles like `promise`, but rejects as soon as `signal` aborts: stop() must not wait for a hung list. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  });
}

export interface KubeInformerOptions<T extends KubernetesObject = KubernetesObject> {
  resource: ResourceRef;
  /** Only this namespace (namespaced resources); all namespaces when absent. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  logger?: Logger;
  backoff?: Partial<BackoffOptions>;
  /** See InformerOptions.transform. */
  transform?: (obj: T) => T;
  /** See InformerOptions.onRestart. */
  onRestart?: (reason: InformerRestartReason) => void;
  /** See InformerOptions.onRecover. */
  onRecover?: () => void;
}

/**
 * An informer for `resource` on the cluster of `kc`: paged list and client-node's Watch on the same
 * path. Objects are the API server's JSON as is (timestamps are strings whatever a client-node model
 * type says), identical whether they arrived by list or by watch.
 */
export function createInformer<T extends KubernetesObject>(
  kc: KubeConfig,
  options: KubeInformerOptions<T>,
): Informer<T> {
  const path = collectionPath(options.resource, options.namespace);
  const watch = heartbeatAwareWatch(kc);
  return new Informer<T>({
    path,
    name:
      options.namespace === undefined
        ? options.resource.plural
        : `${options.resource.plural}/${options.namespace}`,
    list: (query, signal) => listAll<T>(kc, path, query, signal),
    watch: (watchPath, query, onEvent, onDone) => {
      reportKubeRequest("WATCH", watchPath, 200);
      return watch(watchPath, query, onEvent, onDone);
    },
    labelSelector: options.labelSelector,
    fieldSelector: options.fieldSelector,
    logger: options.logger,
    backoff: options.backoff,
    transform: options.transform,
    onRestart: options.onRestart,
    onRecover: options.onRecover,
  });
}

/** Resolves when every informer has synced; rejects when `signal` aborts first. */
export async function waitForCacheSync(
  informers: ReadonlyArray<{ waitForSync(signal?: AbortSignal): Promise<void> }>,
  signal?: AbortSignal,
): Promise<void> {
  await Promise.all(informers.map((informer) => informer.waitForSync(signal)));
}
