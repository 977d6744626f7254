// spec.nodeLabels: whether the operator labels the nodes a config serves from its plugin's report
// (ADR 0011). The same member in both API versions.
import { z } from "zod";

export const NODE_LABELS_DESCRIPTION =
  "The labels the operator puts on each node the config serves, from its plugin's report: GPU Feature Discovery's nvidia.com/gpu.*, nvidia.com/cuda.* and nvidia.com/mig.capable for the NVIDIA backend, and <attribute>.device.dpo.dev/<config> (count, replicas, product) for every backend. A label another labeller owns is left as it is.";

export const NodeLabelsSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe(
        "false: the operator writes no labels for this config and takes off those it wrote (set it where GPU Feature Discovery labels the nodes).",
      ),
  })
  .strict();
export type NodeLabels = z.infer<typeof NodeLabelsSchema>;
export const NODE_LABELS_DEFAULTS: NodeLabels = { enabled: true };
