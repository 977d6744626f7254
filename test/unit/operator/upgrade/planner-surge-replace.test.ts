// The planner, node by node: the surge path, the replace path, and which one spec.upgrade.strategy picks.
import { describe, it } from "vitest";
import { expectPlan, node, REPLACE_KUBELET, started, updatedNode, type NodeCase } from "./planner-support.js";

describe("planRollout, node by node", () => {
  it.each<NodeCase>([
    // Surge path.
    {
      name: "surge: an untouched node records its baseline and start, then joins the new list",
      nodes: [node("a")],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:AddToNew"],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "surge: waits while the new plugin has not registered",
      nodes: [started("a", { inNew: true })],
      actions: [],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "surge: waits while the node advertises less than before (the zero-allocatable handover)",
      nodes: [started("a", { inNew: true, newRegistered: true, allocatable: 0 })],
      actions: [],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "surge: devices the plugin reports unhealthy do not hold the gate",
      nodes: [started("a", { inNew: true, newRegistered: true, allocatable: 3, unhealthy: 1 })],
      actions: ["a:RemoveFromOld"],
      phase: "Progressing",
    },
    {
      name: "surge: once the gate holds the node leaves the old list",
      nodes: [started("a", { inNew: true, newRegistered: true })],
      actions: ["a:RemoveFromOld"],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "surge: still in flight while the old pod terminates",
      nodes: [started("a", { inOld: false, inNew: true, newRegistered: true })],
      actions: [],
      phase: "Progressing",
      inFlight: ["a"],
      updated: 0,
    },
    {
      name: "surge: done once the old pod is gone",
      nodes: [updatedNode("a")],
      actions: [],
      phase: "Complete",
      inFlight: [],
      updated: 1,
    },
    // Replace path.
    {
      name: "replace: an untouched node on a kubelet that cannot surge leaves the old list first",
      nodes: [node("a", { kubeletVersion: REPLACE_KUBELET })],
      actions: ["a:RecordBaseline", "a:RecordStart", "a:RemoveFromOld"],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "replace: waits for the old pod to go before adding the node to the new list",
      nodes: [
        started("a", { kubeletVersion: REPLACE_KUBELET, inOld: false, oldRegistered: false, allocatable: 0 }),
      ],
      actions: [],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "replace: joins the new list once the old pod is gone",
      nodes: [
        started("a", {
          kubeletVersion: REPLACE_KUBELET,
          inOld: false,
          oldPodPresent: false,
          oldRegistered: false,
          allocatable: 0,
        }),
      ],
      actions: ["a:AddToNew"],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "replace: in flight until the gate holds",
      nodes: [updatedNode("a", { kubeletVersion: REPLACE_KUBELET, newRegistered: false, allocatable: 0 })],
      actions: [],
      phase: "Progressing",
      inFlight: ["a"],
    },
    {
      name: "replace: done once the gate holds",
      nodes: [updatedNode("a", { kubeletVersion: REPLACE_KUBELET })],
      actions: [],
      phase: "Complete",
      updated: 1,
    },
    {
      name: "strategy Replace replaces even where surge would work",
      nodes: [node("a")],
      spec: { strategy: "Replace" },
      actions: ["a:RecordBaseline", "a:RecordStart", "a:RemoveFromOld"],
      phase: "Progressing",
    },
    {
      name: "strategy Surge surges where it can",
      nodes: [node("a")],
      spec: { strategy: "Surge" },
      actions: ["a:RecordBaseline", "a:RecordStart", "a:AddToNew"],
      phase: "Progressing",
    },
    {
      name: "strategy Surge on a kubelet that cannot: replaced",
      nodes: [node("a", { kubeletVersion: REPLACE_KUBELET })],
      spec: { strategy: "Surge" },
      actions: ["a:RecordBaseline", "a:RecordStart", "a:RemoveFromOld"],
      phase: "Progressing",
    },
  ])("$name", expectPlan);
});
