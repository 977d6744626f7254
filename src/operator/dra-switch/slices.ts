// The one write of a switch that is not a label: the ResourceSlices a stopped DRA plugin leaves (a plugin
// never deletes its own pool, so that a restart or upgrade never empties it). On a node leaving DRA, once
// the DRA plugin pod is gone, its slices are deleted; only then does the device plugin start there. Pure.

/** A node as the rollout observed it, as far as this rule reads it (planner.ts' NodeObservation). */
export interface SliceNodeView {
  name: string;
  inOld: boolean;
  inNew: boolean;
  oldPodPresent: boolean;
  newPodPresent?: boolean;
  oldAdvertises?: boolean;
  newAdvertises?: boolean;
}

/**
 * The nodes whose slices of the driver go now: the DRA path is the one being left (forward: the old
 * revision publishes through DRA; rolling back: the new one does), the node runs neither revision, the
 * leaving path's pod is gone (a running one would publish again), and a slice still exists.
 */
export function nodesToClearOfSlices(nodes: readonly SliceNodeView[], leavingIsOld: boolean): string[] {
  return nodes
    .filter((n) => {
      if (n.inOld || n.inNew) return false;
      const podPresent = leavingIsOld ? n.oldPodPresent : (n.newPodPresent ?? true);
      const advertises = leavingIsOld ? n.oldAdvertises : n.newAdvertises;
      return !podPresent && advertises === true;
    })
    .map((n) => n.name);
}
