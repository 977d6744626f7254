// The objects a step's passes wrote, or tried to write and met a 409 Conflict, with the resourceVersion
// each write was planned from, per operator (keyed by its informer) and config: the expectations of
// client-go's controllers. A pass that comes back before the cache shows its last writes must not plan
// those objects again: the plan would start a node twice, or, after a conflict, send the same write from
// the same stale view and meet the same 409 (a DaemonSet watch that is backing off after an API fault
// stays behind for up to 5 s).
import type { KubernetesObject } from "@kubernetes/client-node";
import type { StepDeps } from "../reconciler-deps.js";

/** The part of an informer the expectations read: a lookup by name in the step's namespace. */
type CacheOf = (deps: StepDeps) => { get(name: string, namespace?: string): KubernetesObject | undefined };

export class WriteExpectations {
  /**
   * A config has an entry only while some write of it is not yet in the cache: an entry per config name
   * ever seen would grow without bound, as names come from objects others write (a report's configName).
   */
  private readonly byInformer = new WeakMap<object, Map<string, Map<string, string>>>();

  /** `namespaced`: the objects live in the operator's namespace (deps.render.namespace). */
  constructor(
    private readonly cacheOf: CacheOf,
    private readonly namespaced: boolean,
  ) {}

  private configsOf(deps: StepDeps): Map<string, Map<string, string>> {
    const informer = this.cacheOf(deps);
    let perConfig = this.byInformer.get(informer);
    if (perConfig === undefined) {
      perConfig = new Map();
      this.byInformer.set(informer, perConfig);
    }
    return perConfig;
  }

  /** Records that `name` was written (or met a 409) for `config`, planned from `resourceVersion`. */
  expect(deps: StepDeps, config: string, name: string, resourceVersion: string): void {
    const perConfig = this.configsOf(deps);
    let objects = perConfig.get(config);
    if (objects === undefined) {
      objects = new Map();
      perConfig.set(config, objects);
    }
    objects.set(name, resourceVersion);
  }

  /**
   * The config's written objects the cache still shows as they were before the write (same
   * resourceVersion), object name → that resourceVersion; those it has caught up on, or that are gone,
   * are forgotten, and the config with them once none is left.
   */
  pending(deps: StepDeps, config: string): ReadonlyMap<string, string> {
    // Every config's, not only this one's: a config whose last pass wrote and needed no other (a deleted
    // config's cleanup) is never asked again, and would keep its entry otherwise. The writes not yet in
    // the cache are few, so the sweep costs little.
    const perConfig = this.configsOf(deps);
    const cache = this.cacheOf(deps);
    const namespace = this.namespaced ? deps.render.namespace : undefined;
    for (const [name, objects] of perConfig) {
      for (const [object, plannedFrom] of objects) {
        if (cache.get(object, namespace)?.metadata?.resourceVersion !== plannedFrom) objects.delete(object);
      }
      if (objects.size === 0) perConfig.delete(name);
    }
    return perConfig.get(config) ?? new Map<string, string>();
  }

  /** Drops what is kept for a config that is gone: no pass of it will come to prune it. */
  forget(deps: StepDeps, config: string): void {
    this.configsOf(deps).delete(config);
  }

  /** How many configs have writes the cache has yet to show. */
  configs(deps: StepDeps): number {
    return this.configsOf(deps).size;
  }
}

/** The Nodes each config's passes wrote. */
export class NodeWriteExpectations extends WriteExpectations {
  constructor() {
    super((deps) => deps.nodes, false);
  }
}

/** The plugin DaemonSets each config's passes met a 409 on. */
export class DaemonSetWriteExpectations extends WriteExpectations {
  constructor() {
    super((deps) => deps.daemonSets, true);
  }
}
