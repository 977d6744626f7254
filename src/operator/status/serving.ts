// Which config serves which nodes where configs of one resource name and different priorities select the
// same nodes (status.serving): counts per config, never node names. Pure.
import type { V1Node } from "@kubernetes/client-node";
import { MAX_SERVING_CONFIGS, type ServingStatus } from "../../api/v1beta1/status.js";
import { nodeMeetsAll } from "../model/node-terms.js";
import type { HigherConfig, Resolution } from "./conflicts.js";
import { pluginRunsOnNode, type SelectionSpec } from "../model/targeting.js";

export interface ServingInput {
  spec: SelectionSpec & { priority: number };
  nodes: readonly V1Node[];
  resolution: Pick<Resolution, "targeting" | "stepsBackFor" | "overrides">;
}

function listed(counts: Map<HigherConfig, number>): ServingStatus["yieldedTo"] {
  return [...counts]
    .filter(([, nodes]) => nodes > 0)
    .slice(0, MAX_SERVING_CONFIGS)
    .map(([c, nodes]) => ({ config: c.name, priority: c.priority, nodes }));
}

/**
 * The serving status of a config that shares nodes with configs of other priorities; undefined where it
 * shares none (no config of another priority could select its nodes). A node the config selects (its
 * nodeSelector, nodeSelectorTerm and tolerations) is served by it, or yielded to the highest config above
 * it that selects the node (by labels: a higher config claims a node even where its pods do not tolerate
 * the node's taints). Overrides count, per lower config, the nodes this config serves that it selects too.
 */
export function servingStatus(input: ServingInput): ServingStatus | undefined {
  const { spec, resolution } = input;
  if (resolution.stepsBackFor.length === 0 && resolution.overrides.length === 0) return undefined;
  const yieldedTo = new Map<HigherConfig, number>(resolution.stepsBackFor.map((h) => [h, 0]));
  const overrides = new Map<HigherConfig, number>(resolution.overrides.map((l) => [l, 0]));
  let served = 0;
  let yielded = 0;
  for (const node of input.nodes) {
    if (!pluginRunsOnNode(node, spec)) continue;
    if (pluginRunsOnNode(node, spec, resolution.targeting)) {
      served++;
      for (const lower of resolution.overrides) {
        if (nodeMeetsAll(node, lower.requirements)) overrides.set(lower, overrides.get(lower)! + 1);
      }
      continue;
    }
    const winner = resolution.stepsBackFor.find((h) => nodeMeetsAll(node, h.requirements));
    if (winner === undefined) continue;
    yielded++;
    yieldedTo.set(winner, yieldedTo.get(winner)! + 1);
  }
  const yieldedList = listed(yieldedTo);
  const overridesList = listed(overrides);
  return {
    priority: spec.priority,
    served,
    yielded,
    ...(yieldedList!.length > 0 ? { yieldedTo: yieldedList } : {}),
    ...(overridesList!.length > 0 ? { overrides: overridesList } : {}),
    summary: `${served}/${served + yielded}`,
  };
}
