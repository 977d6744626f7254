// decideRollout moving an upgrade forward by surge: the new revision created on no node, one node at a
// time beside the old one, the old revision off once the gate holds, and the end of the upgrade.
import { describe, expect, it } from "vitest";
import {
  ANNOTATION_UPGRADE_STATE,
  parseUpgradeState,
} from "../../../../src/operator/upgrade/daemonset-state.js";
import {
  decide,
  FRESH,
  NEW,
  newRev,
  node,
  NOW,
  OLD,
  oldRev,
  pod,
  recordWritten,
  report,
  stored,
  written,
} from "./rollout-support.js";

describe("decideRollout", () => {
  it("starts an upgrade with the new revision on no node, its state naming the base", () => {
    const ds = stored(OLD, "base");
    const d = decide({ config: NEW, daemonSets: [ds], nodes: [node("a"), node("b")] });
    expect(written(d)).toEqual(["Create NEW moving"]);
    const created = d.writes[0]!.kind === "Create" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(created, oldRev)).toEqual({ ...FRESH, legacyNodes: {} });
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeStarted"]);
    expect(d.status).toMatchObject({ phase: "Progressing", summary: "0/2" });
  });

  it("surges one node at a time: one patch adds the new revision and the node's record, the old one stays", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const p = pod(base, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a"), node("b")],
      pods: [p, pod(base, "b")],
      reports: [report(OLD, p)],
    });
    expect(written(d)).toEqual(["Node a surge=NEW +record"]);
    expect(recordWritten(d, "a")).toEqual({ from: oldRev, to: newRev, startedAt: NOW, baseline: 4 });
    // Planned from what the cache showed: the patch carries that resourceVersion, so a stale cache
    // gets a conflict instead of starting the node twice.
    const patch = d.writes[0]!.kind === "PatchNode" ? d.writes[0]!.patch : undefined;
    expect(patch?.body.metadata.resourceVersion).toBe("rv-a");
    expect(d.status).toMatchObject({ phase: "Progressing", inFlight: ["a"], updated: 0 });
  });

  it("takes the old revision off a surged node once the kubelet advertises the new one", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [
        node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } }),
        node("b"),
      ],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a revision=NEW surge=-"]);
  });

  it("ends the upgrade: the old revision is deleted, then the new one becomes the base; no node is written", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } })],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Delete OLD", "Update NEW base"]);
    const promoted = d.writes[1]!.kind === "Update" ? d.writes[1]!.daemonSet : undefined;
    expect(promoted?.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE]).toBeUndefined();
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeComplete"]);
    // The status of the pass that promotes names the new revision as the current one.
    expect(d.status).toMatchObject({ phase: "Complete", currentRevision: newRev, updateRevision: newRev });
  });

  it("is not Complete while the old revision's pod is still on an upgraded node", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } })],
      pods: [newPod, pod(base, "a", "Running")],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual([]);
    expect(d.status).toMatchObject({
      phase: "Progressing",
      currentRevision: oldRev,
      updateRevision: newRev,
      total: 1,
    });
    expect(d.requeueAfterMs).toBeDefined();
  });
});
