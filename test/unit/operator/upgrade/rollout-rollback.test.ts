// decideRollout taking nodes back: a node past its deadline fails and rolls back, an upgraded node gets the
// old revision beside the new one, and a revision the spec moved past gives its nodes back to the base.
import { describe, expect, it } from "vitest";
import { parseUpgradeState } from "../../../../src/operator/upgrade/daemonset-state.js";
import {
  config,
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
  it("fails a node past its deadline and rolls it back: the old revision returns beside the new one", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [
        node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW - 301_000, baseline: 4 } }),
        node("b"),
      ],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod, false)],
    });
    // The failure lands on the node first; the rollback's phase on the moving revision after.
    expect(written(d)).toEqual(["Node a +record", "Update NEW moving"]);
    expect(recordWritten(d, "a")).toMatchObject({ failed: true });
    // The failure lands before anything sent with it: its patch is ordered.
    expect(d.writes[0]).toMatchObject({ kind: "PatchNode", ordered: true });
    const update = d.writes[1]!.kind === "Update" ? d.writes[1]!.daemonSet : undefined;
    expect(parseUpgradeState(update, oldRev)).toMatchObject({ rollingBack: true });
    expect(d.status.phase).toBe("RollingBack");
    expect(d.problems).toEqual([expect.objectContaining({ node: "a", reason: "UpgradeFailed" })]);
    expect(d.events.map((e) => e.reason)).toEqual(["NodeUpgradeFailed"]);
  });

  it("rolls back an upgraded node beside the new revision, then takes the new one off", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", { ...FRESH, rollingBack: true }, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const done = { startedAt: NOW - 5_000, baseline: 4 };
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: done })],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a surge=OLD"]);
    const oldPod = pod(base, "a");
    const after = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, surge: oldRev, record: done })],
      pods: [newPod, oldPod],
      reports: [report(NEW, newPod), report(OLD, oldPod)],
    });
    expect(written(after)).toEqual(["Node a revision=OLD surge=-"]);
  });

  it("returns the nodes of a revision the spec moved past to the base before anything else, then deletes it", () => {
    const third = config({ plugin: { logLevel: "warn" } });
    const base = stored(OLD, "base");
    const abandoned = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const record = { startedAt: NOW - 5_000, baseline: 4 };
    const d = decide({
      config: third,
      daemonSets: [base, abandoned],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record })],
      pods: [pod(abandoned, "a")],
    });
    expect(written(d)).toEqual(["Node a surge=OLD", "Update NEW moving"]);
    expect(d.status.phase).toBe("RollingBack");

    const oldPod = pod(base, "a");
    const after = decide({
      config: third,
      daemonSets: [base, stored(NEW, "moving", { ...FRESH, rollingBack: true }, "2026-11-02T00:00:00Z")],
      nodes: [node("a", "v1.37.0", 4, { revision: oldRev, record })],
      pods: [oldPod],
      reports: [report(OLD, oldPod)],
    });
    expect(written(after)).toEqual(["Delete NEW"]);
  });
});
