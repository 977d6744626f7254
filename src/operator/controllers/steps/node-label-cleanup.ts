// Reconcile step: a config's revision labels and upgrade record taken off the Nodes it no longer runs on,
// or off every Node once the config is gone (ADR 0004). A bounded batch per pass, so a deleted config on
// 5000 nodes does not hold the work queue; the rest comes back soon.
import type { V1Node } from "@kubernetes/client-node";
import { isConflict, isNotFound, NODES } from "../../../kube/index.js";
import { nodeKeys } from "../../render/index.js";
import { stripPatch } from "../../upgrade/node-labels.js";
import { CLEANUP_RETRY_MS, type StepDeps } from "../reconciler-deps.js";

/** Node patches one pass sends at most. */
export const NODE_CLEANUP_BATCH = 100;

/**
 * Takes the config's keys off every cached Node that carries them and is not to `keep` them. Returns
 * when to come back: soon if a batch was not enough or a write lost a race, never otherwise.
 */
export async function stripNodeLabels(
  deps: StepDeps,
  configName: string,
  keep: (node: V1Node) => boolean,
): Promise<number | undefined> {
  const keys = nodeKeys(configName);
  const patches = deps.nodes
    .list()
    .filter((n) => !keep(n))
    .flatMap((n) => {
      const patch = stripPatch(n, keys);
      return patch === undefined ? [] : [patch];
    });
  let retry = patches.length > NODE_CLEANUP_BATCH ? CLEANUP_RETRY_MS : undefined;
  for (const patch of patches.slice(0, NODE_CLEANUP_BATCH)) {
    try {
      await deps.objects.patch(NODES, { name: patch.node }, "merge", patch.body);
      deps.metrics.applies.inc({ kind: "Node" });
    } catch (err) {
      if (!isConflict(err) && !isNotFound(err)) throw err;
      if (isConflict(err)) retry = CLEANUP_RETRY_MS;
    }
  }
  if (patches.length > 0) {
    deps.logger.info(
      { config: configName, nodes: Math.min(patches.length, NODE_CLEANUP_BATCH) },
      "took the config's revision labels off nodes it no longer runs on",
    );
  }
  return retry;
}
