// decideRollout replacing a node: fenced first, the old revision off once the fence has settled, under an
// explicit Replace; and under Auto on an older kubelet, the new plugin standing by beside the old one.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { FENCE_SETTLE_MS } from "../../../../src/operator/upgrade/rollout.js";
import {
  decide,
  FRESH,
  KEYS,
  NEW,
  NEW_REPLACE,
  newRev,
  node,
  NOW,
  OLD,
  pod,
  recordWritten,
  report,
  stored,
  written,
} from "./rollout-support.js";

describe("decideRollout", () => {
  it("replaces under strategy Replace: the old revision leaves first", () => {
    // spec.upgrade is no part of the revision: the same DaemonSets, an explicit Replace.
    const NEW = NEW_REPLACE;
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.34.1")],
      pods: [pod(base, "a")],
    });
    // Fenced first: the scheduler places no new pod there before the old plugin stops. The record
    // carries when the fence went on.
    expect(written(d)).toEqual(["Node a +record +fence"]);
    const fencePatch = d.writes[0]!.kind === "PatchNode" ? d.writes[0]!.patch : undefined;
    expect(JSON.parse(fencePatch?.body.metadata.annotations?.[KEYS.upgrade] ?? "{}")).toMatchObject({
      startedAt: NOW,
      fencedAt: NOW,
    });
    expect(d.modes).toEqual({ a: "Replace" });
    const fenced = (n: V1Node): V1Node => {
      n.spec = {
        taints: [
          { key: "other", effect: "NoExecute" },
          { key: KEYS.replace, effect: "NoSchedule" },
        ],
      };
      return n;
    };
    // The fence in the cache is not enough: the old plugin stays until it has been on FENCE_SETTLE_MS,
    // and the pass comes back when it has (issue 23: a scheduler further behind still bound pods there).
    const young = { startedAt: NOW - 1_000, fencedAt: NOW - (FENCE_SETTLE_MS - 500), baseline: 4 };
    const settling = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { record: young }))],
      pods: [pod(base, "a")],
    });
    expect(written(settling)).toEqual([]);
    expect(settling.requeueAfterMs).toBe(500);
    // The operator's --fence-settle sets the wait: shorter, the same fence has settled; 0, none.
    for (const fenceSettleMs of [FENCE_SETTLE_MS - 1_000, 0]) {
      const settled = decide({
        config: NEW,
        daemonSets: [base, next],
        nodes: [fenced(node("a", "v1.34.1", 4, { record: young }))],
        pods: [pod(base, "a")],
        fenceSettleMs,
      });
      expect(written(settled), `fenceSettleMs ${fenceSettleMs}`).toEqual(["Node a revision=none"]);
    }
    const record = { startedAt: NOW - FENCE_SETTLE_MS, fencedAt: NOW - FENCE_SETTLE_MS, baseline: 4 };
    const oldGoes = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { record }))],
      pods: [pod(base, "a")],
    });
    expect(written(oldGoes)).toEqual(["Node a revision=none"]);
    // Once the old pod is gone, the new revision comes.
    const after = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 0, { revision: "none", record }))],
      pods: [],
    });
    expect(written(after)).toEqual(["Node a revision=NEW"]);
    // Once the Node advertises the new plugin's devices, the fence comes off; other taints stay.
    const newPod = pod(next, "a");
    const back = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { revision: newRev, record }))],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(back)).toEqual(["Node a -fence"]);
    const patch = back.writes[0]!.kind === "PatchNode" ? back.writes[0]!.patch : undefined;
    expect(patch?.body.spec?.taints).toEqual([{ key: "other", effect: "NoExecute" }]);
  });

  it("replaces under Auto on a kubelet before per-socket endpoints with the new plugin standing by", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const oldPod = pod(base, "a");
    const v = "v1.35.4";
    // Fenced, and the new revision joins in the same patch: its plugin starts while the fence settles,
    // and the record tells it to stand by.
    const d = decide({ config: NEW, daemonSets: [base, next], nodes: [node("a", v)], pods: [oldPod] });
    expect(written(d)).toEqual(["Node a surge=NEW +record +fence"]);
    expect(recordWritten(d, "a")).toMatchObject({ startedAt: NOW, fencedAt: NOW, standby: true });
    expect(d.modes).toEqual({ a: "Replace" });
    const fenced = (n: V1Node): V1Node => {
      n.spec = { taints: [{ key: KEYS.replace, effect: "NoSchedule" }] };
      return n;
    };
    const settled = {
      startedAt: NOW - FENCE_SETTLE_MS,
      fencedAt: NOW - FENCE_SETTLE_MS,
      baseline: 4,
      standby: true,
    };
    const both = (record: object) => fenced(node("a", v, 4, { surge: newRev, record }));
    const newPod = pod(next, "a");
    // The fence has settled but the new plugin has not reported yet: the old one stays.
    const starting = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
    });
    expect(written(starting)).toEqual([]);
    const standingBy = {
      ...report(NEW, newPod, false),
      status: {
        ...report(NEW, newPod).status!,
        registration: { state: "StandingBy" as const, since: "2026-11-23T11:00:00Z" },
      },
    };
    // Standing by, the fence not settled yet: the old one stays, and the pass comes back when it has.
    const young = { ...settled, fencedAt: NOW - (FENCE_SETTLE_MS - 700) };
    const waiting = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(young)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(waiting)).toEqual([]);
    expect(waiting.requeueAfterMs).toBe(700);
    // Standing by and settled: the old revision leaves.
    const go = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(go)).toEqual(["Node a revision=NEW surge=-"]);
    // A standby report of a pod that is gone says nothing.
    const gonePod = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(gonePod)).toEqual([]);
    // A new plugin that registered anyway (an image from before standby) also lets the old one go.
    const registered = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), report(NEW, newPod)],
    });
    expect(written(registered)).toEqual(["Node a revision=NEW surge=-"]);
    // Once the old pod is gone and the new plugin's devices are in the Node: the fence comes off.
    const back = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", v, 4, { revision: newRev, record: settled }))],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(back)).toEqual(["Node a -fence"]);
  });
});
