// Shared informer: lists and watches one resource into an indexed in-memory cache and tells handlers
// what changed. Watches resume from the last resourceVersion, after a clean end at once and after a
// broken connection after a backoff; a 410 Gone leads to a relist (with deletes synthesized for objects
// that vanished), and so does nothing else but a failed list; stop() ends it without error events.
import { Watch, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { backoffDelayMs } from "./backoff.js";
import { sleep, systemClock, type Clock } from "./clock.js";
import { GoneError, toKubeError } from "./errors.js";
import { listAll, reportKubeRequest, type ListQuery, type ListResult, type QueryParams } from "./request.js";
import { collectionPath, type ResourceRef } from "./resources.js";

/** Lists the collection; the signal aborts when the informer stops. */
export type ListFn<T> = (query: ListQuery, signal: AbortSignal) => Promise<ListResult<T>>;

/**
 * Starts one watch request (the shape of client-node's `Watch.watch`): `onEvent` per event, then
 * `onDone` once when the stream ends, with an error when it broke.
 */
export type WatchFn = (
  path: string,
  query: QueryParams,
  onEvent: (type: string, object: unknown) => void,
  onDone: (err: unknown) => void,
) => Promise<{ abort(): void }>;

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

export interface CacheListOptions {
  namespace?: string;
  /** Equality match on every given label. */
  labels?: Record<string, string>;
}

/** Cache key of an object: `namespace/name`, or `name` when cluster-scoped (the work-queue key too). */
export function objectKey(obj: KubernetesObject): string {
  const name = obj.metadata?.name ?? "";
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

/** Inverse of objectKey. */
export function splitObjectKey(key: string): { namespace?: string; name: string } {
  const slash = key.indexOf("/");
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

export interface RelistDiff<T> {
  added: T[];
  updated: Array<{ old: T; current: T }>;
  deleted: T[];
}

/**
 * What a fresh list means for a cache that may have missed events: objects new to the cache were
 * added, objects with another resourceVersion were updated, cached objects missing from the list were
 * deleted while nobody was watching. Objects with the same resourceVersion did not change.
 */
export function diffRelist<T extends KubernetesObject>(
  cached: ReadonlyMap<string, T>,
  fresh: readonly T[],
): RelistDiff<T> {
  const diff: RelistDiff<T> = { added: [], updated: [], deleted: [] };
  const seen = new Set<string>();
  for (const current of fresh) {
    const key = objectKey(current);
    seen.add(key);
    const old = cached.get(key);
    if (old === undefined) diff.added.push(current);
    else if (!sameVersion(old, current)) diff.updated.push({ old, current });
  }
  for (const [key, old] of cached) {
    if (!seen.has(key)) diff.deleted.push(old);
  }
  return diff;
}

function sameVersion(a: KubernetesObject, b: KubernetesObject): boolean {
  const version = a.metadata?.resourceVersion;
  return version !== undefined && version !== "" && version === b.metadata?.resourceVersion;
}

type WatchOutcome = "closed" | "expired" | "stopped";

/**
 * At most 5 s between attempts while the API server is away: once it is back, every informer is at most
 * one backoff behind, so the operator's statuses are right again within seconds (the API-fault tests
 * hold it to 10 s). Six informers retrying every 5 s is a load any API server takes.
 */
const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 5_000, resetAfterMs: 60_000 };
/** A watch that ends cleanly sooner than this without any event is treated as a failure (as client-go does). */
const SHORTEST_HEALTHY_WATCH_MS = 1_000;

export class Informer<T extends KubernetesObject> {
  readonly name: string;
  private readonly options: InformerOptions<T>;
  /** The last list or watch failed, and none has succeeded since. */
  private failing = false;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly backoff: BackoffOptions;
  private readonly objects = new Map<string, T>();
  private readonly namespaceIndex = new Map<string, Set<string>>();
  private readonly indexers = new Map<string, (obj: T) => string[]>();
  private readonly indices = new Map<string, Map<string, Set<string>>>();
  private readonly addHandlers = new Set<(obj: T) => void>();
  private readonly updateHandlers = new Set<(old: T, current: T) => void>();
  private readonly deleteHandlers = new Set<(obj: T) => void>();
  private readonly stopController = new AbortController();
  private state: "new" | "running" | "stopped" = "new";
  private loop: Promise<void> | undefined;
  private endWatch: ((outcome: WatchOutcome) => void) | undefined;
  private resourceVersion = "";
  private synced = false;
  private syncWaiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  private failures = 0;
  private lastFailureAt = Number.NEGATIVE_INFINITY;

  constructor(options: InformerOptions<T>) {
    this.options = options;
    this.name = options.name ?? options.path;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({ resource: this.name });
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
      const waiters = this.syncWaiters;
      this.syncWaiters = [];
      for (const waiter of waiters)
        waiter.reject(new Error(`informer ${this.name} stopped before its cache synced`));
    }
    await this.loop;
  }

  /** True once the first list has been applied to the cache. */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once the cache has synced; rejects when `signal` aborts or the informer stops first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced) return Promise.resolve();
    if (this.state === "stopped") return Promise.reject(new Error(`informer ${this.name} is stopped`));
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
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
      this.syncWaiters.push(waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
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
    this.addHandlers.add(handler);
    for (const obj of this.objects.values()) this.call("add", () => handler(obj));
    return () => this.addHandlers.delete(handler);
  }

  onUpdate(handler: (old: T, current: T) => void): () => void {
    this.updateHandlers.add(handler);
    return () => this.updateHandlers.delete(handler);
  }

  /** On a relist, `obj` is the last state the cache knew (the final state was never seen). */
  onDelete(handler: (obj: T) => void): () => void {
    this.deleteHandlers.add(handler);
    return () => this.deleteHandlers.delete(handler);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }

  getByKey(key: string): T | undefined {
    return this.objects.get(key);
  }

  /** Cached objects, optionally of one namespace and with the given labels. Do not mutate them. */
  list(options: CacheListOptions = {}): T[] {
    const keys =
      options.namespace === undefined
        ? this.objects.keys()
        : (this.namespaceIndex.get(options.namespace) ?? []);
    const result: T[] = [];
    for (const key of keys) {
      const obj = this.objects.get(key);
      if (obj !== undefined && matchesLabels(obj, options.labels)) result.push(obj);
    }
    return result;
  }

  keys(): string[] {
    return [...this.objects.keys()];
  }

  size(): number {
    return this.objects.size;
  }

  /** Adds a secondary index: `indexFn` returns the index values of an object (e.g. its owner's name). */
  addIndex(indexName: string, indexFn: (obj: T) => string[]): void {
    if (this.indexers.has(indexName)) throw new Error(`index ${indexName} already exists`);
    this.indexers.set(indexName, indexFn);
    this.indices.set(indexName, new Map());
    for (const [key, obj] of this.objects) this.indexAdd(indexName, key, obj);
  }

  /** Objects whose `indexName` values include `value`. */
  byIndex(indexName: string, value: string): T[] {
    const index = this.indices.get(indexName);
    if (index === undefined) throw new Error(`no index ${indexName}`);
    return [...(index.get(value) ?? [])].flatMap((key) => {
      const obj = this.objects.get(key);
      return obj === undefined ? [] : [obj];
    });
  }

  private async run(): Promise<void> {
    const signal = this.stopController.signal;
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          if (!(await this.relist(signal))) break;
          this.markSynced();
          this.recovered();
          needList = false;
          this.logger.debug({ objects: this.objects.size, resourceVersion: this.resourceVersion }, "listed");
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
    return new Promise<WatchOutcome>((resolve, reject) => {
      const startedAt = this.clock.now();
      let events = 0;
      let settled = false;
      let handle: { abort(): void } | undefined;
      const settle = (outcome: WatchOutcome | Error): void => {
        if (settled) return;
        settled = true;
        this.endWatch = undefined;
        handle?.abort();
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      };
      this.endWatch = settle;
      const onEvent = (type: string, object: unknown): void => {
        if (settled) return;
        events++;
        if (type === "ERROR") {
          const err = toKubeError(object);
          settle(err instanceof GoneError ? "expired" : err);
          return;
        }
        this.applyEvent(type, type === "BOOKMARK" ? (object as T) : this.transform(object as T));
      };
      const onDone = (err: unknown): void => {
        if (settled) return;
        if (err) {
          const kubeErr = toKubeError(err);
          settle(kubeErr instanceof GoneError ? "expired" : kubeErr);
        } else if (events === 0 && this.clock.now() - startedAt < SHORTEST_HEALTHY_WATCH_MS) {
          settle(new Error("watch closed at once without any event"));
        } else {
          settle("closed");
        }
      };
      const query: QueryParams = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: (this.options.watchTimeoutSeconds ?? randomWatchTimeoutSeconds)(),
        labelSelector: this.options.labelSelector,
        fieldSelector: this.options.fieldSelector,
      };
      this.options.watch(this.options.path, query, onEvent, onDone).then(
        (started) => {
          handle = started;
          if (settled) started.abort();
          else this.recovered();
        },
        (err: unknown) => settle(toKubeError(err)),
      );
    });
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
        const old = this.objects.get(key);
        this.put(key, obj);
        if (old === undefined) this.emitAdd(obj);
        else if (!sameVersion(old, obj)) this.emitUpdate(old, obj);
        break;
      }
      case "DELETED": {
        if (this.objects.has(key)) {
          this.remove(key);
          this.emitDelete(obj);
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
    const diff = diffRelist(this.objects, items);
    for (const obj of diff.deleted) this.remove(objectKey(obj));
    for (const obj of items) this.put(objectKey(obj), obj);
    for (const obj of diff.added) this.emitAdd(obj);
    for (const { old, current } of diff.updated) this.emitUpdate(old, current);
    for (const obj of diff.deleted) this.emitDelete(obj);
  }

  private put(key: string, obj: T): void {
    const old = this.objects.get(key);
    if (old !== undefined) this.unindex(key, old);
    this.objects.set(key, obj);
    const namespace = obj.metadata?.namespace ?? "";
    let keys = this.namespaceIndex.get(namespace);
    if (keys === undefined) this.namespaceIndex.set(namespace, (keys = new Set()));
    keys.add(key);
    for (const indexName of this.indexers.keys()) this.indexAdd(indexName, key, obj);
  }

  private remove(key: string): void {
    const old = this.objects.get(key);
    if (old === undefined) return;
    this.unindex(key, old);
    this.objects.delete(key);
  }

  private unindex(key: string, obj: T): void {
    const namespace = obj.metadata?.namespace ?? "";
    const keys = this.namespaceIndex.get(namespace);
    keys?.delete(key);
    if (keys?.size === 0) this.namespaceIndex.delete(namespace);
    for (const [indexName, indexFn] of this.indexers) {
      const index = this.indices.get(indexName);
      for (const value of indexFn(obj)) {
        const set = index?.get(value);
        set?.delete(key);
        if (set?.size === 0) index?.delete(value);
      }
    }
  }

  private indexAdd(indexName: string, key: string, obj: T): void {
    const indexFn = this.indexers.get(indexName);
    const index = this.indices.get(indexName);
    if (indexFn === undefined || index === undefined) return;
    for (const value of indexFn(obj)) {
      let set = index.get(value);
      if (set === undefined) index.set(value, (set = new Set()));
      set.add(key);
    }
  }

  private markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    const waiters = this.syncWaiters;
    this.syncWaiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  private nextBackoff(): number {
    const now = this.clock.now();
    if (now - this.lastFailureAt > this.backoff.resetAfterMs) this.failures = 0;
    this.lastFailureAt = now;
    this.failures++;
    return backoffDelayMs({ baseMs: this.backoff.initialMs, maxMs: this.backoff.maxMs }, this.failures);
  }

  private emitAdd(obj: T): void {
    for (const handler of this.addHandlers) this.call("add", () => handler(obj));
  }

  private emitUpdate(old: T, current: T): void {
    for (const handler of this.updateHandlers) this.call("update", () => handler(old, current));
  }

  private emitDelete(obj: T): void {
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

function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error(typeof reason === "string" ? reason : "aborted");
}

function matchesLabels(obj: KubernetesObject, labels: Record<string, string> | undefined): boolean {
  if (labels === undefined) return true;
  const actual = obj.metadata?.labels ?? {};
  return Object.entries(labels).every(([name, value]) => actual[name] === value);
}

/**
 * How long a watch the API server heartbeats may go without a byte before it counts as dead. The server
 * sends a bookmark about once a minute to a watch that asked for them, so this is longer than that: a
 * quiet watch stays open, on its keep-alive connection, until its own timeoutSeconds; a dead one is
 * noticed within it.
 */
export const WATCH_INACTIVITY_TIMEOUT_MS = 90_000;

/**
 * How long past its own timeoutSeconds a watch without heartbeats may stay silent. The API server's watch
 * cache sends bookmarks only once it has seen an event of the resource since it started, so a watch of a
 * resource nothing writes (no ResourceSlices in a cluster without DRA) hears nothing until the server ends
 * it: cutting it after 90 s cost a new connection, a TLS handshake, every 90 s per such resource.
 */
export const WATCH_DEADLINE_GRACE_MS = 60_000;

/**
 * The silence after which a watch is given up: held to the bookmark interval once the server has sent it
 * a bookmark, else to its own deadline (`timeoutSeconds`) plus a grace.
 */
export function watchSilenceLimitMs(
  timeoutSeconds: number | undefined,
  heartbeating: boolean,
  limits: { heartbeatMs: number; graceMs: number } = {
    heartbeatMs: WATCH_INACTIVITY_TIMEOUT_MS,
    graceMs: WATCH_DEADLINE_GRACE_MS,
  },
): number {
  if (heartbeating || timeoutSeconds === undefined || !(timeoutSeconds > 0)) return limits.heartbeatMs;
  return timeoutSeconds * 1_000 + limits.graceMs;
}

/**
 * client-node 2's Watch aborts a watch after 30 s without data, shorter than the API server's bookmark
 * interval, so every quiet watch was cut and relisted on a new connection. The field is private, so it
 * is set here and checked: a client-node release that renames it fails at start-up, not silently.
 */
export function longLivedWatch(kc: KubeConfig): Watch {
  const watcher = new Watch(kc);
  const settable = watcher as unknown as { requestTimeoutMs?: unknown };
  if (typeof settable.requestTimeoutMs !== "number") {
    throw new Error("@kubernetes/client-node's Watch has no requestTimeoutMs: check the watch timeout");
  }
  settable.requestTimeoutMs = WATCH_INACTIVITY_TIMEOUT_MS;
  return watcher;
}

/**
 * Watches (one at a time, as an informer runs them) through client-node's Watch, each given up after the
 * silence `watchSilenceLimitMs` allows: its deadline plus a grace until its first bookmark, the bookmark
 * interval after. client-node reads the limit each time data arrives, so it is switched on the bookmark.
 */
export function heartbeatAwareWatch(
  kc: KubeConfig,
  limits?: { heartbeatMs: number; graceMs: number },
): WatchFn {
  const watcher = longLivedWatch(kc);
  const settable = watcher as unknown as { requestTimeoutMs: number };
  return (watchPath, query, onEvent, onDone) => {
    const timeoutSeconds =
      query["timeoutSeconds"] === undefined ? undefined : Number(query["timeoutSeconds"]);
    settable.requestTimeoutMs = watchSilenceLimitMs(timeoutSeconds, false, limits);
    return watcher.watch(
      watchPath,
      query,
      (type: string, object: unknown) => {
        if (type === "BOOKMARK")
          settable.requestTimeoutMs = watchSilenceLimitMs(timeoutSeconds, true, limits);
        onEvent(type, object);
      },
      onDone,
    );
  };
}

function randomWatchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
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
