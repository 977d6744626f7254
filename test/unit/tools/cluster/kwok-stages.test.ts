// The KWOK configuration the local cluster starts with: paced for thousands of nodes only when asked.
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  NODE_HEARTBEAT_INTERVAL_MS,
  renderKwokConfig,
  simulatedKubeletStages,
} from "../../../../tools/cluster/kwok-stages.js";

type Doc = { kind: string; metadata?: { name?: string }; options?: unknown; spec?: { delay?: unknown } };

function docs(text: string): Doc[] {
  return parseAllDocuments(text).map((d) => d.toJS() as Doc);
}

describe("renderKwokConfig", () => {
  it("is the stages alone by default, with the kubelet's heartbeat", () => {
    const rendered = docs(renderKwokConfig(simulatedKubeletStages()));
    expect(rendered.every((d) => d.kind === "Stage")).toBe(true);
    expect(rendered.find((d) => d.metadata?.name === "dpo-node-heartbeat")?.spec?.delay).toEqual({
      durationMilliseconds: NODE_HEARTBEAT_INTERVAL_MS,
      jitterDurationMilliseconds: NODE_HEARTBEAT_INTERVAL_MS * 1.2,
    });
  });

  it("paces heartbeats and sets KWOK's parallelism when asked", () => {
    const rendered = docs(
      renderKwokConfig(simulatedKubeletStages({ heartbeatIntervalMs: 120_000 }), { parallelism: 16 }),
    );
    expect(rendered[0]).toEqual({
      apiVersion: "config.kwok.x-k8s.io/v1alpha1",
      kind: "KwokConfiguration",
      options: { nodeLeaseParallelism: 16, nodePlayStageParallelism: 16, podPlayStageParallelism: 16 },
    });
    expect(rendered.find((d) => d.metadata?.name === "dpo-node-heartbeat")?.spec?.delay).toEqual({
      durationMilliseconds: 120_000,
      jitterDurationMilliseconds: 144_000,
    });
  });
});
