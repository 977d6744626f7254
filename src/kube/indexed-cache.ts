// An informer's store: objects by key, by namespace and by secondary indexes, and what a relist changed in it.
import type { KubernetesObject } from "@kubernetes/client-node";

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

/** Whether two states of an object are the same version: equal, non-empty resourceVersions. */
export function sameVersion(a: KubernetesObject, b: KubernetesObject): boolean {
  const version = a.metadata?.resourceVersion;
  return version !== undefined && version !== "" && version === b.metadata?.resourceVersion;
}

function matchesLabels(obj: KubernetesObject, labels: Record<string, string> | undefined): boolean {
  if (labels === undefined) return true;
  const actual = obj.metadata?.labels ?? {};
  return Object.entries(labels).every(([name, value]) => actual[name] === value);
}

/**
 * Objects by key, with an index by namespace and the secondary indexes readers add. It tells no one of
 * changes: the informer that fills it does.
 */
export class IndexedCache<T extends KubernetesObject> {
  private readonly objects = new Map<string, T>();
  private readonly namespaceIndex = new Map<string, Set<string>>();
  private readonly indexers = new Map<string, (obj: T) => string[]>();
  private readonly indices = new Map<string, Map<string, Set<string>>>();

  /** The objects by key, for diffRelist. Do not mutate them. */
  get byKey(): ReadonlyMap<string, T> {
    return this.objects;
  }

  getByKey(key: string): T | undefined {
    return this.objects.get(key);
  }

  has(key: string): boolean {
    return this.objects.has(key);
  }

  values(): IterableIterator<T> {
    return this.objects.values();
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

  put(key: string, obj: T): void {
    const old = this.objects.get(key);
    if (old !== undefined) this.unindex(key, old);
    this.objects.set(key, obj);
    const namespace = obj.metadata?.namespace ?? "";
    let keys = this.namespaceIndex.get(namespace);
    if (keys === undefined) this.namespaceIndex.set(namespace, (keys = new Set()));
    keys.add(key);
    for (const indexName of this.indexers.keys()) this.indexAdd(indexName, key, obj);
  }

  remove(key: string): void {
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
}
