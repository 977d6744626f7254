// The planner with Replace fenced: the fence goes on before the old revision leaves and comes off once the
// new plugin advertises, and the old revision leaves only once the fence has settled.
import { describe, expect, it } from "vitest";
import { type NodeObservation, planRollout } from "../../../../src/operator/upgrade/planner.js";
import { acts, node, NOW, REPLACE_KUBELET, spec, started, updatedNode } from "./planner-support.js";

describe("planRollout with Replace fenced (fenceReplace)", () => {
  const R = { kubeletVersion: REPLACE_KUBELET };
  it.each<{ name: string; nodes: NodeObservation[]; rollingBack?: boolean; actions: string[] }>([
    {
      name: "an untouched Replace node is fenced first, with its records, and keeps the old plugin",
      nodes: [node("a", R)],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence"],
    },
    {
      name: "once fenced, the old revision leaves",
      nodes: [started("a", { ...R, fenced: true })],
      actions: ["a:RemoveFromOld"],
    },
    {
      name: "the new revision comes once the old pod is gone, still fenced",
      nodes: [started("a", { ...R, fenced: true, inOld: false, oldPodPresent: false, oldRegistered: false })],
      actions: ["a:AddToNew"],
    },
    {
      name: "no unfence while the Node does not advertise the new plugin's devices yet",
      nodes: [updatedNode("a", { ...R, fenced: true, allocatable: 0 })],
      actions: [],
    },
    {
      name: "unfenced once the Node advertises them",
      nodes: [updatedNode("a", { ...R, fenced: true })],
      actions: ["a:Unfence"],
    },
    {
      name: "a surge node is never fenced",
      nodes: [node("a")],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:AddToNew"],
    },
    {
      name: "a fence an earlier rollout left on an untouched node comes off when the node is not started",
      nodes: [started("a", { ...R, fenced: true }), node("b", { ...R, fenced: true })],
      actions: ["a:RemoveFromOld", "b:Unfence"],
    },
    {
      name: "a node rolled back onto the old revision is unfenced",
      nodes: [started("a", { ...R, fenced: true, failed: true })],
      rollingBack: true,
      actions: ["a:Unfence"],
    },
  ])("$name", ({ nodes, rollingBack, actions }) => {
    const p = planRollout({
      nodes,
      spec: spec(),
      now: NOW,
      rollingBack: rollingBack ?? false,
      fenceReplace: true,
    });
    expect(acts(p)).toEqual(actions);
  });
});

describe("planRollout: the old revision leaves a fenced node only once the fence has settled (fenceSettleMs)", () => {
  const R = { kubeletVersion: REPLACE_KUBELET };
  const SETTLE = 3000;
  // Issue 23: with the fence only just in the operator's cache, the scheduler still bound pods that ask
  // for the resource to the node, and the kubelet rejected them once the old plugin was gone.
  it.each<{ name: string; nodes: NodeObservation[]; actions: string[]; settlesAt?: number }>([
    {
      name: "fenced this moment (the record's fencedAt): the old revision stays",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW })],
      actions: [],
      settlesAt: NOW + SETTLE,
    },
    {
      name: "fenced 100 ms ago, as the cache shows its own patch: the old revision stays",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW - 100 })],
      actions: [],
      settlesAt: NOW - 100 + SETTLE,
    },
    {
      name: "fenced 1 ms short of the settle: the old revision stays",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW - SETTLE + 1 })],
      actions: [],
      settlesAt: NOW + 1,
    },
    {
      name: "fenced exactly the settle ago: the old revision leaves",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW - SETTLE })],
      actions: ["a:RemoveFromOld"],
    },
    {
      name: "a record without fencedAt (an older operator fenced at the start): measured from startedAt",
      nodes: [started("a", { ...R, fenced: true }, 1000), started("b", { ...R, fenced: true }, SETTLE)],
      actions: ["b:RemoveFromOld"],
      settlesAt: NOW - 1000 + SETTLE,
    },
    {
      name: "fencedAt is newer than startedAt (fenced again later): fencedAt counts",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW - 10 }, 60_000)],
      actions: [],
      settlesAt: NOW - 10 + SETTLE,
    },
    {
      name: "a fence with no time on a node moved outside the planner (no records): stamped, and it waits",
      nodes: [node("a", { ...R, fenced: true, inNew: true, inOld: true })],
      actions: ["a:RecordStart", "a:Fence"],
    },
    {
      name: "a fence time ahead of this clock (another leader's): stamped again, so the wait is bounded",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW + 3_600_000 })],
      actions: ["a:Fence"],
    },
    {
      name: "the soonest of several waiting fences is when to plan again",
      nodes: [
        started("a", { ...R, fenced: true, fencedAt: NOW - 500 }),
        started("b", { ...R, fenced: true, fencedAt: NOW - 2500 }),
      ],
      actions: [],
      settlesAt: NOW - 2500 + SETTLE,
    },
    {
      name: "a fence left by an earlier rollout on a node this one starts: fenced again, its age unknown",
      nodes: [node("a", { ...R, fenced: true })],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence"],
    },
    {
      name: "the settle does not hold up a node whose old revision already left",
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW, inOld: false, oldPodPresent: false })],
      actions: ["a:AddToNew"],
    },
  ])("$name", ({ nodes, actions, settlesAt }) => {
    const p = planRollout({
      nodes,
      spec: spec({ maxUnavailable: 2 }),
      now: NOW,
      rollingBack: false,
      fenceReplace: true,
      fenceSettleMs: SETTLE,
    });
    expect(acts(p)).toEqual(actions);
    expect(p.fenceSettlesAt).toBe(settlesAt);
  });

  it("a switch waits for the settle too", () => {
    const p = planRollout({
      nodes: [started("a", { ...R, fenced: true, fencedAt: NOW - 100, oldAdvertises: true })],
      spec: spec(),
      now: NOW,
      rollingBack: false,
      fenceReplace: true,
      fenceSettleMs: SETTLE,
      switching: true,
      publish: "DRA",
    });
    expect(acts(p)).toEqual([]);
  });
});
