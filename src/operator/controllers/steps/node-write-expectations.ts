// The Nodes a step's passes wrote, with the resourceVersion each write was planned from, per operator
// (keyed by its Node informer) and config: the expectations of client-go's controllers. A pass that
// comes back before the cache shows its last writes must not plan those Nodes again.
import type { StepDeps } from "../reconciler-deps.js";

export class NodeWriteExpectations {
  private readonly byInformer = new WeakMap<object, Map<string, Map<string, string>>>();

  /** Node name → the resourceVersion its last write was planned from, for `config`. */
  of(deps: StepDeps, config: string): Map<string, string> {
    let perConfig = this.byInformer.get(deps.nodes);
    if (perConfig === undefined) {
      perConfig = new Map();
      this.byInformer.set(deps.nodes, perConfig);
    }
    let nodes = perConfig.get(config);
    if (nodes === undefined) {
      nodes = new Map();
      perConfig.set(config, nodes);
    }
    return nodes;
  }

  /**
   * The config's written Nodes the cache still shows as they were before the write (same
   * resourceVersion); those it has caught up on, or that are gone, are forgotten.
   */
  pending(deps: StepDeps, config: string): Map<string, string> {
    const nodes = this.of(deps, config);
    for (const [node, plannedFrom] of nodes) {
      if (deps.nodes.get(node)?.metadata?.resourceVersion !== plannedFrom) nodes.delete(node);
    }
    return nodes;
  }
}
