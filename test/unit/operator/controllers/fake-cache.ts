// The in-memory cache the controllers' tests hand the reconciler in place of an informer: it holds what
// the test puts in it, keyed as the informers key (`namespace/name`, or the name of a cluster-scoped
// object), and counts how often it was listed whole.
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Informer } from "../../../../src/kube/index.js";

export class FakeCache<T extends KubernetesObject> {
  readonly objects = new Map<string, T>();
  /** What hasSynced answers: a test sets it false for a cache still filling. */
  synced = true;
  /** How often the whole cache was listed. */
  lists = 0;
  /**
   * `indexOf` gives an object's values in the by-config index, as the operator's informers index;
   * without it byIndex returns every object (the reconciler's consumers filter by config themselves).
   */
  constructor(private readonly indexOf?: (obj: T) => string[]) {}
  hasSynced(): boolean {
    return this.synced;
  }
  put(obj: T): void {
    this.objects.set(FakeCache.key(obj.metadata!.name!, obj.metadata?.namespace), obj);
  }
  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(FakeCache.key(name, namespace));
  }
  delete(name: string, namespace?: string): void {
    this.objects.delete(FakeCache.key(name, namespace));
  }
  list(): T[] {
    this.lists++;
    return [...this.objects.values()];
  }
  byIndex(_index: string, value: string): T[] {
    const all = [...this.objects.values()];
    const indexOf = this.indexOf;
    return indexOf === undefined ? all : all.filter((o) => indexOf(o).includes(value));
  }
  asInformer(): Informer<T> {
    return this as unknown as Informer<T>;
  }
  private static key(name: string, namespace: string | undefined): string {
    return namespace ? `${namespace}/${name}` : name;
  }
}
