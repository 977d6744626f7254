// The planner, node by node: what holds a rollout back (pause, maxUnavailable), the kubelets it does not
// target, and records that went missing; then how maxUnavailable resolves.
import { describe, expect, it } from "vitest";
import { resolveMaxUnavailable } from "../../../../src/operator/upgrade/planner.js";
import type { RolloutSpec } from "../../../../src/operator/model/rollout.js";
import { expectPlan, node, NOW, started, updatedNode, type NodeCase } from "./planner-support.js";

describe("planRollout, node by node", () => {
  it.each<NodeCase>([
    // Pause.
    {
      name: "paused: no node starts, nodes in flight carry on",
      nodes: [started("a", { inNew: true, newRegistered: true }), node("b")],
      spec: { paused: true, maxUnavailable: 2 },
      actions: ["a:RemoveFromOld"],
      phase: "Paused",
      inFlight: ["a"],
    },
    {
      name: "paused: a rollout with every node done is Complete",
      nodes: [updatedNode("a")],
      spec: { paused: true },
      actions: [],
      phase: "Complete",
    },
    // Kubelets the rollout does not target.
    {
      name: "a kubelet too old is not targeted, counted or failed",
      nodes: [node("a", { kubeletVersion: "v1.28.9" }), updatedNode("b")],
      actions: [],
      phase: "Complete",
      inFlight: [],
      failed: [],
      updated: 1,
    },
    {
      name: "a kubelet version that cannot be parsed is not targeted",
      nodes: [node("a", { kubeletVersion: "not-a-version", inNew: true, startedAt: 0 })],
      spec: { autoRollback: true },
      actions: [],
      phase: "Complete",
      inFlight: [],
    },
    // maxUnavailable.
    {
      name: "maxUnavailable: starts up to the limit, in name order",
      nodes: [node("c"), node("a"), node("b")],
      spec: { maxUnavailable: 2 },
      actions: [
        "a:RecordBaseline",
        "a:RecordStart",
        "a:AddToNew",
        "b:RecordBaseline",
        "b:RecordStart",
        "b:AddToNew",
      ],
      phase: "Progressing",
      inFlight: ["a", "b"],
    },
    {
      name: "maxUnavailable: nodes in flight take slots",
      nodes: [started("a", { inNew: true }), node("b"), node("c")],
      spec: { maxUnavailable: 2 },
      actions: ["b:RecordBaseline", "b:RecordStart", "b:AddToNew"],
      phase: "Progressing",
      inFlight: ["a", "b"],
    },
    {
      name: "maxUnavailable: a percentage rounds down (10 nodes, 25% → 2)",
      nodes: "abcdefghij".split("").map((n) => node(n)),
      spec: { maxUnavailable: "25%" },
      actions: [
        "a:RecordBaseline",
        "a:RecordStart",
        "a:AddToNew",
        "b:RecordBaseline",
        "b:RecordStart",
        "b:AddToNew",
      ],
      phase: "Progressing",
    },
    {
      name: "maxUnavailable: a percentage is at least 1 (3 nodes, 10%)",
      nodes: [node("a"), node("b"), node("c")],
      spec: { maxUnavailable: "10%" },
      actions: ["a:RecordBaseline", "a:RecordStart", "a:AddToNew"],
      phase: "Progressing",
    },
    {
      name: "maxUnavailable: lowered below what is in flight, nothing starts and the nodes in flight carry on",
      nodes: [
        started("a", { inNew: true, newRegistered: true }),
        started("b", { inNew: true }),
        started("c", { inNew: true }),
        node("d"),
      ],
      spec: { maxUnavailable: 1 },
      actions: ["a:RemoveFromOld"],
      phase: "Progressing",
      inFlight: ["a", "b", "c"],
    },
    {
      name: "a done or failed node is never started again",
      nodes: [updatedNode("a"), started("b", { failed: true, inNew: false })],
      spec: { maxUnavailable: 5 },
      actions: [],
      phase: "Failed",
    },
    // Records that went missing.
    {
      name: "a node moved without its records is in flight, and gets a start time but no baseline",
      nodes: [node("a", { inOld: false, inNew: true }), node("b")],
      actions: ["a:RecordStart"],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "a start recorded without its list edit continues, and takes the baseline it missed",
      nodes: [node("a", { startedAt: NOW })],
      actions: ["a:RecordBaseline", "a:AddToNew"],
      phase: "Progressing",
    },
    {
      name: "no nodes: Complete",
      nodes: [],
      actions: [],
      phase: "Complete",
      updated: 0,
    },
  ])("$name", expectPlan);
});

describe("resolveMaxUnavailable", () => {
  it.each<[RolloutSpec["maxUnavailable"], number, number]>([
    [1, 10, 1],
    [3, 10, 3],
    [3, 2, 3],
    [0, 10, 1],
    [-2, 10, 1],
    [2.7, 10, 2],
    ["25%", 10, 2],
    ["30%", 10, 3],
    ["33%", 100, 33],
    ["12.5%", 40, 5],
    ["10%", 3, 1],
    ["0%", 10, 1],
    ["100%", 7, 7],
    ["50%", 0, 1],
    ["x%" as `${number}%`, 10, 1],
  ])("%s of %i nodes → %i", (value, targeted, want) => {
    expect(resolveMaxUnavailable(value, targeted)).toBe(want);
  });
});
