// The planner, node by node: a node past its progress deadline fails, and a rollback takes the touched
// nodes back to the old revision.
import { describe, it } from "vitest";
import {
  EXPIRED,
  expectPlan,
  node,
  NOW,
  REPLACE_KUBELET,
  started,
  updatedNode,
  type NodeCase,
} from "./planner-support.js";

describe("planRollout, node by node", () => {
  it.each<NodeCase>([
    // Deadlines and failure.
    {
      name: "deadline: a node past its deadline without the gate fails, and the rollout stops starting nodes",
      nodes: [
        started("a", { inNew: true }, EXPIRED),
        started("b", { inNew: true, newRegistered: true }),
        node("c"),
      ],
      spec: { maxUnavailable: 3 },
      actions: ["a:MarkFailed", "b:RemoveFromOld"],
      phase: "Failed",
      inFlight: ["a", "b"],
      failed: ["a"],
    },
    {
      name: "deadline: exactly at the deadline is not past it",
      nodes: [started("a", { inNew: true }, 600_000)],
      actions: [],
      phase: "Progressing",
    },
    {
      name: "deadline: a node whose gate holds does not fail while its old pod terminates",
      nodes: [started("a", { inOld: false, inNew: true, newRegistered: true }, EXPIRED)],
      actions: [],
      phase: "Progressing",
    },
    {
      name: "deadline: a replace node stuck behind its old pod fails",
      nodes: [
        started(
          "a",
          { kubeletVersion: REPLACE_KUBELET, inOld: false, oldRegistered: false, allocatable: 0 },
          EXPIRED,
        ),
      ],
      actions: ["a:MarkFailed"],
      phase: "Failed",
      failed: ["a"],
    },
    {
      name: "a failed node gets no more actions, even once its gate holds, and nothing new starts",
      nodes: [started("a", { inNew: true, newRegistered: true, failed: true }), node("b")],
      spec: { maxUnavailable: 2 },
      actions: [],
      phase: "Failed",
      inFlight: ["a"],
      failed: ["a"],
    },
    {
      name: "failures are marked before any other action, so a rollback never runs ahead of its cause",
      nodes: [updatedNode("a"), started("z", { inNew: true }, EXPIRED)],
      spec: { autoRollback: true, maxUnavailable: 2 },
      actions: ["z:MarkFailed", "a:AddToOld", "z:RemoveFromNew"],
      phase: "RollingBack",
      inFlight: ["a", "z"],
      failed: ["z"],
    },
    // Rollback.
    {
      name: "rollback of a surge node: it leaves the new list at once while the old plugin still serves",
      nodes: [started("a", { inNew: true }, EXPIRED), node("b")],
      spec: { autoRollback: true },
      actions: ["a:MarkFailed", "a:RemoveFromNew"],
      phase: "RollingBack",
      inFlight: ["a"],
    },
    {
      name: "rollback of a surge node that left the old list: back to the old list",
      nodes: [started("a", { inOld: false, inNew: true, failed: true, oldRegistered: false })],
      spec: { autoRollback: true },
      actions: ["a:AddToOld"],
      phase: "RollingBack",
    },
    {
      name: "rollback: waits for the old plugin to register before leaving the new list",
      nodes: [started("a", { inNew: true, oldRegistered: false, failed: true })],
      spec: { autoRollback: true },
      actions: [],
      phase: "RollingBack",
      inFlight: ["a"],
    },
    {
      name: "rollback: a new plugin that advertises too little does not keep the node on it",
      nodes: [started("a", { inNew: true, newRegistered: true, allocatable: 1, failed: true })],
      spec: { autoRollback: true },
      actions: ["a:RemoveFromNew"],
      phase: "RollingBack",
    },
    {
      name: "rollback: a node is not back until the old plugin alone advertises what it did",
      nodes: [started("a", { allocatable: 1, failed: true })],
      spec: { autoRollback: true },
      actions: [],
      phase: "RollingBack",
      inFlight: ["a"],
    },
    {
      name: "rollback of a done node: old first, beside the new one",
      nodes: [updatedNode("a"), node("b", { failed: true, startedAt: NOW - EXPIRED, baseline: 4 })],
      spec: { autoRollback: true, maxUnavailable: 2 },
      actions: ["a:AddToOld"],
      phase: "RollingBack",
      inFlight: ["a"],
    },
    {
      name: "rollback of a replace node that lost its old pod: back to the old list",
      nodes: [
        started("a", {
          kubeletVersion: REPLACE_KUBELET,
          inOld: false,
          oldPodPresent: false,
          oldRegistered: false,
          allocatable: 0,
          failed: true,
        }),
      ],
      spec: { autoRollback: true },
      actions: ["a:AddToOld"],
      phase: "RollingBack",
    },
    {
      name: "rollback of a replace-done node: leaves the new list once the old plugin serves again",
      nodes: [
        updatedNode("a", {
          kubeletVersion: REPLACE_KUBELET,
          inOld: true,
          oldPodPresent: true,
          oldRegistered: true,
        }),
      ],
      rollingBack: true,
      actions: ["a:RemoveFromNew"],
      phase: "RollingBack",
    },
    {
      name: "rollback keeps to maxUnavailable and leaves untouched nodes alone",
      nodes: [updatedNode("a"), updatedNode("b"), updatedNode("c"), node("d")],
      rollingBack: true,
      actions: ["a:AddToOld"],
      phase: "RollingBack",
      inFlight: ["a"],
      updated: 3,
    },
    {
      name: "rollback: a paused rollout starts no node back but carries on with those in flight",
      nodes: [started("a", { inNew: true, failed: true }), updatedNode("b")],
      spec: { paused: true, maxUnavailable: 2 },
      rollingBack: true,
      actions: ["a:RemoveFromNew"],
      phase: "RollingBack",
      inFlight: ["a"],
    },
    {
      name: "rolled back once every touched node is back on the old revision",
      nodes: [started("a", { failed: true }), started("b"), node("c")],
      spec: { autoRollback: true },
      actions: [],
      phase: "RolledBack",
      inFlight: [],
      failed: ["a"],
    },
    {
      name: "a persisted rollback carries on when autoRollback is turned off",
      nodes: [started("a", { inNew: true, failed: true })],
      rollingBack: true,
      actions: ["a:RemoveFromNew"],
      phase: "RollingBack",
    },
    {
      name: "no deadline during a rollback",
      nodes: [started("a", { inNew: true, oldRegistered: false }, EXPIRED)],
      rollingBack: true,
      actions: [],
      phase: "RollingBack",
      failed: [],
    },
  ])("$name", expectPlan);
});
