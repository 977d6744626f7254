// Reconcile step: a config's revision labels and upgrade record taken off the Nodes it no longer runs on,
// or off every Node once the config is gone (ADR 0004). A bounded batch per pass, so a deleted config on
// 5000 nodes does not hold the work queue; the rest comes back soon.
import type { V1Node } from "@kubernetes/client-node";
import { isConflict, isNotFound, NODES } from "../../../kube/index.js";
import { nodeKeys } from "../../model/targeting.js";
import { stripPatch } from "../../upgrade/node-labels.js";
import { CLEANUP_RETRY_MS, type StepDeps } from "../reconciler-deps.js";
import { NodeWriteExpectations } from "./node-write-expectations.js";

/** Node patches one pass sends at most. */
export const NODE_CLEANUP_BATCH = 100;

/**
 * The Nodes each config's cleanup passes stripped. Until the cache shows a newer version of such a Node, the
 * next pass leaves it alone: without that, a pass that comes back before the cache caught up writes the same
 * Node again (bench-upgrade at 1000 nodes: 1,421 patches for 1000 nodes).
 */
const stripped = new NodeWriteExpectations();

/**
 * Takes the config's keys off every cached Node (or every one of `nodes`) that carries them and is not
 * to `keep` them. Returns
 * when to come back: soon if a batch was not enough, a write lost a race or the cache has yet to show
 * this pass's writes; never otherwise.
 */
export async function stripNodeLabels(
  deps: StepDeps,
  configName: string,
  keep: (node: V1Node) => boolean,
  nodes: readonly V1Node[] = deps.nodes.list(),
  /** Called with each Node (as it was) whose patch the API server took. */
  onStripped?: (node: V1Node) => void,
): Promise<number | undefined> {
  const keys = nodeKeys(configName);
  // Forgets the Nodes the cache has caught up on (or that carry nothing of the config any more).
  const pending = stripped.pending(deps, configName);
  let waiting = 0;
  const patches = nodes
    .filter((n) => !keep(n))
    .flatMap((n) => {
      const patch = stripPatch(n, keys);
      if (patch === undefined) return [];
      if (pending.get(patch.node) === n.metadata?.resourceVersion) {
        waiting++;
        return [];
      }
      return [{ ...patch, was: n }];
    });
  let retry = patches.length > NODE_CLEANUP_BATCH || waiting > 0 ? CLEANUP_RETRY_MS : undefined;
  let written = 0;
  for (const patch of patches.slice(0, NODE_CLEANUP_BATCH)) {
    try {
      await deps.objects.patch(NODES, { name: patch.node }, "merge", patch.body);
      if (patch.resourceVersion !== undefined)
        stripped.expect(deps, configName, patch.node, patch.resourceVersion);
      deps.metrics.applies.inc({ kind: "Node" });
      written++;
      onStripped?.(patch.was);
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      if (isConflict(err)) retry = CLEANUP_RETRY_MS;
    }
  }
  if (written > 0) {
    deps.logger.info(
      { config: configName, nodes: written },
      "took the config's revision labels off nodes it no longer runs on",
    );
  }
  return retry;
}

/** Configs whose cleanup writes the Node cache has yet to show (the state kept per config, for its bound). */
export function cleanupWritesPending(deps: StepDeps): number {
  return stripped.configs(deps);
}
