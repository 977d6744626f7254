// decideRollout over what older operators left: a DaemonSet from before revisions, and DaemonSets placed by
// node name with the records in their state annotation.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ANNOTATION_UPGRADE_STATE } from "../../../../src/operator/upgrade/daemonset-state.js";
import {
  decide,
  FRESH,
  legacyStored,
  NEW,
  newRev,
  node,
  NOW,
  OLD,
  oldRev,
  pod,
  recordWritten,
  stored,
  written,
} from "./rollout-support.js";

describe("decideRollout", () => {
  it("adopts a DaemonSet from before revisions: OnDelete, so taking nodes off it restarts nothing", () => {
    const legacy: V1DaemonSet = {
      metadata: { name: "dpo-foo", uid: "legacy", resourceVersion: "3", labels: { "dpo.dev/config": "foo" } },
      spec: {
        selector: { matchLabels: { "dpo.dev/config": "foo" } },
        updateStrategy: { type: "RollingUpdate" },
        template: { spec: { containers: [] } },
      },
    };
    const next = stored(NEW, "moving", { from: "", rollingBack: false });
    const d = decide({ config: NEW, daemonSets: [legacy, next], nodes: [node("a", "v1.33.0")] });
    const base = d.writes.find((w) => w.kind === "Update" && w.daemonSet.metadata?.uid === "legacy");
    expect(base?.kind === "Update" && base.daemonSet.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(d.status.currentRevision).toBe("legacy");
  });
});

describe("decideRollout under DaemonSets an older operator placed by node name", () => {
  it("labels every node as the node lists place it, carries the records over, then rewrites both DaemonSets", () => {
    const base = legacyStored(OLD, { except: ["b", "c"] });
    const next = legacyStored(
      NEW,
      { only: ["a", "b"] },
      {
        a: { startedAt: NOW - 1_000, baseline: 4 },
        b: { startedAt: NOW - 2_000, baseline: 4 },
        c: { startedAt: NOW - 3_000, baseline: 4 },
      },
      "2026-11-02T00:00:00Z",
    );
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      // a surges (both), b is on the new one only, c is a Replace in its gap (neither, its old pod still
      // stopping), d is untouched.
      nodes: [node("a"), node("b"), node("c", "v1.34.1"), node("d")],
      pods: [pod(base, "a"), pod(next, "a"), pod(next, "b"), pod(base, "c"), pod(base, "d")],
    });
    const lines = written(d);
    expect(lines).toEqual([
      "Node a surge=NEW +record",
      "Node b revision=NEW +record",
      "Node c revision=none +record",
      "Update NEW moving",
      "Update OLD base",
    ]);
    expect(recordWritten(d, "b")).toEqual({ from: oldRev, to: newRev, startedAt: NOW - 2_000, baseline: 4 });
    // What the state annotation says from now on is the phase alone.
    const moving = d.writes[3]!.kind === "Update" ? d.writes[3]!.daemonSet : undefined;
    expect(JSON.parse(moving!.metadata!.annotations![ANNOTATION_UPGRADE_STATE]!)).toEqual(FRESH);
  });
});
