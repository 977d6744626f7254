// The planner with the new plugin standing by: a Replace node gets the new revision beside the old one,
// which leaves once the new plugin stands by and the fence has settled.
import { describe, expect, it } from "vitest";
import { type NodeObservation, planRollout } from "../../../../src/operator/upgrade/planner.js";
import type { RolloutSpec } from "../../../../src/operator/model/rollout.js";
import { acts, node, NOW, REPLACE_KUBELET, spec, started, updatedNode } from "./planner-support.js";

describe("planRollout with the new plugin standing by (standby)", () => {
  const R = { kubeletVersion: REPLACE_KUBELET };
  const SETTLE = 3000;
  const settled = { fenced: true, fencedAt: NOW - SETTLE };
  const both = { inNew: true, oldRegistered: true };
  it.each<{
    name: string;
    nodes: NodeObservation[];
    strategy?: RolloutSpec["strategy"];
    publish?: "DevicePlugin" | "DRA";
    switching?: boolean;
    rollingBack?: boolean;
    actions: string[];
    standby: string[];
    settlesAt?: number;
  }>([
    {
      name: "an untouched Replace node under Auto is fenced and gets the new revision in one pass",
      nodes: [node("a", R)],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence", "a:AddToNew"],
      standby: ["a"],
    },
    {
      name: "under Surge on a kubelet that cannot surge, the same",
      nodes: [node("a", R)],
      strategy: "Surge",
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence", "a:AddToNew"],
      standby: ["a"],
    },
    {
      name: "an explicit Replace stops the old plugin first: no standby",
      nodes: [node("a", R)],
      strategy: "Replace",
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence"],
      standby: [],
    },
    {
      name: "a surge node never stands by",
      nodes: [node("a")],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:AddToNew"],
      standby: [],
    },
    {
      name: "a DRA driver under an explicit Replace: no standby (its instances hand over on their own)",
      nodes: [node("a", { kubeletVersion: "v1.34.1" })],
      publish: "DRA",
      strategy: "Replace",
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence"],
      standby: [],
    },
    {
      name: "a switch of spec.publish never runs two instances",
      nodes: [node("a", R)],
      switching: true,
      actions: ["a:RecordBaseline", "a:RecordStart", "a:Fence"],
      standby: [],
    },
    {
      name: "a node fenced before (an older operator's order) gets the new revision",
      nodes: [started("a", { ...R, ...settled })],
      actions: ["a:AddToNew"],
      standby: ["a"],
    },
    {
      name: "the new plugin has not said it stands by: the old revision stays",
      nodes: [started("a", { ...R, ...settled, ...both })],
      actions: [],
      standby: ["a"],
    },
    {
      name: "standing by and settled: the old revision leaves",
      nodes: [started("a", { ...R, ...settled, ...both, newStandingBy: true })],
      actions: ["a:RemoveFromOld"],
      standby: ["a"],
    },
    {
      name: "registered anyway (a plugin from before standby): the old revision leaves",
      nodes: [started("a", { ...R, ...settled, ...both, newRegistered: true })],
      actions: ["a:RemoveFromOld"],
      standby: ["a"],
    },
    {
      name: "standing by, the fence not settled: the old revision stays until it has",
      nodes: [started("a", { ...R, ...both, newStandingBy: true, fenced: true, fencedAt: NOW - 1000 })],
      actions: [],
      standby: ["a"],
      settlesAt: NOW + 2000,
    },
    {
      name: "the old pod gone, the new plugin registered and advertised: unfenced",
      nodes: [updatedNode("a", { ...R, fenced: true })],
      actions: ["a:Unfence"],
      standby: ["a"],
    },
    {
      name: "a rollback takes the standing-by revision off; the old plugin never stopped",
      nodes: [started("a", { ...R, ...settled, ...both, newStandingBy: true, failed: true })],
      rollingBack: true,
      actions: ["a:RemoveFromNew"],
      standby: ["a"],
    },
  ])("$name", ({ nodes, strategy, publish, switching, rollingBack, actions, standby, settlesAt }) => {
    const p = planRollout({
      nodes,
      spec: spec(strategy !== undefined ? { strategy } : {}),
      now: NOW,
      rollingBack: rollingBack ?? false,
      fenceReplace: true,
      fenceSettleMs: SETTLE,
      standby: true,
      ...(publish !== undefined ? { publish } : {}),
      ...(switching === true ? { switching } : {}),
    });
    expect(acts(p)).toEqual(actions);
    expect(p.standby).toEqual(standby);
    expect(p.fenceSettlesAt).toBe(settlesAt);
  });
});
