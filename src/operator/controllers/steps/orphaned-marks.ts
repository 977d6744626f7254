// Reconcile step of a config that no longer exists: its marks (NODE_MARKS: revision and surge labels, the
// upgrade record, the Replace fence) taken off the Nodes that carry them, through the same cleanup a config
// that stops targeting a node gets, and counted, logged and, for a fence, told on the Node (ADR 0009).
import type { V1Node } from "@kubernetes/client-node";
import { configLabelValue } from "../../../contract/names.js";
import { marksOf, type MarkPlace } from "../../upgrade/node-marks.js";
import { INDEX_BY_CONFIG, type StepDeps } from "../reconciler-deps.js";
import { stripNodeLabels } from "./node-label-cleanup.js";

/**
 * Takes the gone config's marks off the Nodes that carry any (the Node cache's INDEX_BY_CONFIG: a name
 * that never was a config costs no visit of every Node). Returns when to come back, as stripNodeLabels.
 */
export async function removeOrphanedMarks(deps: StepDeps, name: string): Promise<number | undefined> {
  const marked = deps.nodes.byIndex(INDEX_BY_CONFIG, configLabelValue(name));
  const removed: Record<MarkPlace, number> = { label: 0, annotation: 0, taint: 0 };
  let nodes = 0;
  const onStripped = (node: V1Node): void => {
    nodes++;
    for (const mark of marksOf(node, name)) {
      removed[mark.place]++;
      deps.metrics.orphanedMarksRemoved.inc({ mark: mark.place });
      if (mark.place !== "taint") continue;
      // A fence is on at most maxUnavailable nodes at once, and is what keeps pods off the node: worth an
      // Event where `kubectl describe node` shows it. Labels and records (on every node an upgrade
      // touched) only count.
      const involved = {
        apiVersion: "v1",
        kind: "Node",
        metadata: {
          name: node.metadata?.name ?? "",
          ...(node.metadata?.uid !== undefined ? { uid: node.metadata.uid } : {}),
        },
      };
      void deps.events.record(
        involved,
        "Normal",
        "OrphanedFenceRemoved",
        `took the Replace fence ${mark.key} off: DevicePluginConfig ${name} no longer exists`,
      );
    }
  };
  const retry = await stripNodeLabels(deps, name, () => false, marked, onStripped);
  if (nodes > 0) {
    deps.logger.info(
      { config: name, nodes, removed },
      "took the marks of a config that no longer exists off nodes",
    );
  }
  return retry;
}
