// Step 2b, the node labels (ADR 0011): once every plugin has reported, how long the operator takes to label
// every node the config serves and how many Node applies it sends for it, so the idle step after it
// measures a fleet with nothing left to label.
import type { CoreV1Api } from "@kubernetes/client-node";
import { waitFor } from "../../tools/cluster/wait.js";
import { metric } from "./metrics.js";
import type { Row } from "./targets.js";

/** dpo's count label of the bench's capacity config (src/operator/node-labels/keys.ts). */
const COUNT_LABEL = "count.device.dpo.dev/bench-capacity";

export async function measureNodeLabels(
  core: CoreV1Api,
  nodeCount: number,
  port: number,
  rows: Row[],
): Promise<void> {
  const from = Date.now();
  const appliesBefore = await metric(port, "dpo_operator_applies_total");
  const total = (await core.listNode()).items.length;
  await waitFor(
    `${nodeCount} nodes: every node labelled by the operator`,
    async (observe) => {
      const labelled = (await core.listNode({ labelSelector: COUNT_LABEL })).items.length;
      observe({ labelled, total });
      return labelled === total;
    },
    { timeoutMs: 300_000, intervalMs: 1_000 },
  );
  const seconds = (Date.now() - from) / 1000;
  const applies = (await metric(port, "dpo_operator_applies_total")) - appliesBefore;
  rows.push({
    metric: `${nodeCount} nodes: node labels written after the reports`,
    value: `${seconds.toFixed(1)} s, ${applies} applies for ${total} nodes`,
    target: "(reported)",
  });
}
