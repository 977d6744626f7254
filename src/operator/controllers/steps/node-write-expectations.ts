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
  private readonly byInformer = new WeakMap<object, Map<string, Map<string, string>>>();

  /** `namespaced`: the objects live in the operator's namespace (deps.render.namespace). */
  constructor(
    private readonly cacheOf: CacheOf,
    private readonly namespaced: boolean,
  ) {}

  /** Object name → the resourceVersion its last write was planned from, for `config`. */
  of(deps: StepDeps, config: string): Map<string, string> {
    const informer = this.cacheOf(deps);
    let perConfig = this.byInformer.get(informer);
    if (perConfig === undefined) {
      perConfig = new Map();
      this.byInformer.set(informer, perConfig);
    }
    let objects = perConfig.get(config);
    if (objects === undefined) {
      objects = new Map();
      perConfig.set(config, objects);
    }
    return objects;
  }

  /**
   * The config's written objects the cache still shows as they were before the write (same
   * resourceVersion); those it has caught up on, or that are gone, are forgotten.
   */
  pending(deps: StepDeps, config: string): Map<string, string> {
    const objects = this.of(deps, config);
    const cache = this.cacheOf(deps);
    const namespace = this.namespaced ? deps.render.namespace : undefined;
    for (const [name, plannedFrom] of objects) {
      if (cache.get(name, namespace)?.metadata?.resourceVersion !== plannedFrom) objects.delete(name);
    }
    return objects;
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
