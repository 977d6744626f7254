// The marks of a config that no longer exists come off the Nodes that carry them through the delete path's
// cleanup, counted by place, with an Event on each Node whose fence came off (ADR 0009).
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { configLabelValue } from "../../../../../src/contract/names.js";
import type { StepDeps } from "../../../../../src/operator/controllers/reconciler-deps.js";
import { removeOrphanedMarks } from "../../../../../src/operator/controllers/steps/orphaned-marks.js";
import { OperatorMetrics } from "../../../../../src/operator/metrics.js";
import { nodeKeys } from "../../../../../src/operator/model/targeting.js";
import { configsMarkedOn } from "../../../../../src/operator/upgrade/node-marks.js";

const GONE = "gone";
const keys = nodeKeys(GONE);

const fenced: V1Node = {
  metadata: { name: "fenced", uid: "u1", resourceVersion: "1", annotations: { [keys.upgrade]: "{}" } },
  spec: { taints: [{ key: keys.replace, value: "r2", effect: "NoSchedule" }] },
};
const labelled: V1Node = {
  metadata: { name: "labelled", resourceVersion: "1", labels: { [keys.revision]: "r2", [keys.surge]: "r1" } },
};
const other: V1Node = { metadata: { name: "other", resourceVersion: "1", labels: { zone: "z" } } };

function fakeDeps(nodes: V1Node[]) {
  const patches: { name: string; body: unknown }[] = [];
  const events: { node: string; uid: string | undefined; reason: string; message: string }[] = [];
  const metrics = new OperatorMetrics();
  const deps = {
    nodes: {
      list: () => nodes,
      byIndex: (_index: string, value: string) => nodes.filter((n) => configsMarkedOn(n).includes(value)),
    },
    objects: {
      patch: (_ref: unknown, id: { name: string }, _type: string, body: unknown) => {
        patches.push({ name: id.name, body });
        return Promise.resolve({});
      },
    },
    events: {
      record: (
        obj: { metadata: { name: string; uid?: string } },
        _type: string,
        reason: string,
        message: string,
      ) => {
        events.push({ node: obj.metadata.name, uid: obj.metadata.uid, reason, message });
        return Promise.resolve();
      },
    },
    metrics,
    logger: { info: () => undefined },
  } as unknown as StepDeps;
  return { deps, patches, events, metrics };
}

async function removed(metrics: OperatorMetrics): Promise<Record<string, number>> {
  const metric = await metrics.orphanedMarksRemoved.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels["mark"]), v.value]));
}

describe("removeOrphanedMarks", () => {
  it("takes a gone config's fence, record and labels off the Nodes carrying them, and counts each", async () => {
    const { deps, patches, events, metrics } = fakeDeps([fenced, labelled, other]);
    expect(await removeOrphanedMarks(deps, GONE)).toBeUndefined();
    expect(patches.map((p) => p.name)).toEqual(["fenced", "labelled"]);
    expect(patches[0]!.body).toMatchObject({
      metadata: { annotations: { [keys.upgrade]: null } },
      spec: { taints: [] },
    });
    expect(await removed(metrics)).toEqual({ taint: 1, annotation: 1, label: 2 });
    expect(events).toEqual([
      {
        node: "fenced",
        uid: "u1",
        reason: "OrphanedFenceRemoved",
        message: `took the Replace fence ${keys.replace} off: DevicePluginConfig gone no longer exists`,
      },
    ]);
  });

  it("counts nothing and writes nothing where no Node carries the config", async () => {
    const { deps, patches, events, metrics } = fakeDeps([other]);
    expect(configLabelValue(GONE)).toBe(GONE);
    await removeOrphanedMarks(deps, GONE);
    expect(patches).toEqual([]);
    expect(events).toEqual([]);
    expect(await removed(metrics)).toEqual({});
  });
});
