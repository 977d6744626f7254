// The upgrade planner: each transition of the node life cycle as a table, then whole rollouts
// simulated against a model cluster with random kubelets, gate outcomes, failures and restarts.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  kubeletTooOld,
  parseKubeletVersion,
  supportsSurge,
} from "../../../../src/operator/model/kubelet-version.js";
import {
  type Action,
  type NodeObservation,
  type Plan,
  type PlanInput,
  planRollout,
  resolveMaxUnavailable,
} from "../../../../src/operator/upgrade/planner.js";
import type { RolloutSpec, UpgradeMode } from "../../../../src/operator/model/rollout.js";

const RUNS = 500;
const NOW = 1_000_000;
const SURGE_KUBELET = "v1.37.0";
const REPLACE_KUBELET = "v1.36.5";

/** An untouched node on a kubelet that can surge, with 4 healthy devices served by the old plugin. */
function node(name: string, over: Partial<NodeObservation> = {}): NodeObservation {
  return {
    name,
    kubeletVersion: SURGE_KUBELET,
    inOld: true,
    inNew: false,
    oldPodPresent: true,
    newRegistered: false,
    oldRegistered: true,
    allocatable: 4,
    unhealthy: 0,
    ...over,
  };
}

/** A node first touched `ago` ms before NOW, with its baseline recorded. */
function started(name: string, over: Partial<NodeObservation> = {}, ago = 1000): NodeObservation {
  return node(name, { startedAt: NOW - ago, baseline: 4, ...over });
}

/** Done on the new revision. */
function updatedNode(name: string, over: Partial<NodeObservation> = {}): NodeObservation {
  return started(name, {
    inOld: false,
    inNew: true,
    oldPodPresent: false,
    newRegistered: true,
    oldRegistered: false,
    ...over,
  });
}

function spec(over: Partial<RolloutSpec> = {}): RolloutSpec {
  return {
    strategy: "Auto",
    maxUnavailable: 1,
    progressDeadlineSeconds: 600,
    paused: false,
    autoRollback: false,
    ...over,
  };
}

function plan(nodes: NodeObservation[], over: Partial<RolloutSpec> = {}, rollingBack = false): Plan {
  return planRollout({ nodes, spec: spec(over), now: NOW, rollingBack });
}

/** Actions as "node:Kind" strings, which read better in a table. */
function acts(p: Plan): string[] {
  return p.actions.map((a) => `${a.node}:${a.kind}`);
}

const EXPIRED = 601_000;

describe("planRollout, node by node", () => {
  it.each<{
    name: string;
    nodes: NodeObservation[];
    spec?: Partial<RolloutSpec>;
    rollingBack?: boolean;
    actions: string[];
    phase: Plan["phase"];
    inFlight?: string[];
    failed?: string[];
    updated?: number;
  }>([
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
  ])("$name", (c) => {
    const p = plan(c.nodes, c.spec, c.rollingBack ?? false);
    expect(acts(p)).toEqual(c.actions);
    expect(p.phase).toBe(c.phase);
    if (c.inFlight !== undefined) expect(p.inFlight).toEqual(c.inFlight);
    if (c.failed !== undefined) expect(p.failed).toEqual(c.failed);
    if (c.updated !== undefined) expect(p.updated).toBe(c.updated);
  });

  it("reports modes and problems per node", () => {
    const p = plan(
      [
        node("auto-surge"),
        node("auto-replace", { kubeletVersion: "v1.37.0-rc.1" }),
        node("old", { kubeletVersion: "v1.28.9" }),
        node("junk", { kubeletVersion: "1.30" }),
        node("vendor", { kubeletVersion: "v1.38.1-eks-1234" }),
      ],
      { strategy: "Surge", maxUnavailable: 0 },
    );
    expect(p.modes).toEqual({ "auto-replace": "Replace", "auto-surge": "Surge", vendor: "Surge" });
    expect(p.total).toBe(3);
    expect(p.problems.map((q) => [q.node, q.reason])).toEqual([
      ["auto-replace", "SurgeUnsupported"],
      ["junk", "KubeletTooOld"],
      ["old", "KubeletTooOld"],
    ]);
    expect(p.problems.find((q) => q.node === "old")?.message).toMatch(/v1\.28\.9 is older than v1\.29\.0/);
    expect(p.problems.find((q) => q.node === "junk")?.message).toMatch(/"1\.30" cannot be parsed/);
    // maxUnavailable 0 would never move; it counts as 1.
    expect(p.inFlight).toEqual(["auto-replace"]);
  });

  it("in DRA mode, surges from v1.33.0 (seamless driver upgrades) and needs v1.32.0", () => {
    const nodes = [
      node("v1-31", { kubeletVersion: "v1.31.9" }),
      node("v1-32", { kubeletVersion: "v1.32.13" }),
      node("v1-33", { kubeletVersion: "v1.33.0" }),
      node("v1-33-rc", { kubeletVersion: "v1.33.0-rc.2" }),
      node("v1-34-eks", { kubeletVersion: "v1.34.4-eks-1234" }),
      node("v1-36", { kubeletVersion: "v1.36.3" }),
    ];
    const dra = planRollout({
      nodes,
      spec: spec({ strategy: "Surge" }),
      now: NOW,
      rollingBack: false,
      publish: "DRA",
    });
    expect(dra.modes).toEqual({
      "v1-32": "Replace",
      "v1-33": "Surge",
      "v1-33-rc": "Replace",
      "v1-34-eks": "Surge",
      "v1-36": "Surge",
    });
    expect(dra.problems.map((q) => [q.node, q.reason])).toEqual([
      ["v1-31", "KubeletTooOld"],
      ["v1-32", "SurgeUnsupported"],
      ["v1-33-rc", "SurgeUnsupported"],
    ]);
    expect(dra.problems[0]?.message).toBe(
      "kubelet v1.31.9 is older than v1.32.0, which DRA plugins (the kubelet's v1beta1.DRAPlugin service) need",
    );
    expect(dra.problems[1]?.message).toMatch(/two instances of a DRA driver side by side/);
    // The same kubelets with device plugins: surge only from 1.37, and 1.31 is new enough.
    const dp = planRollout({ nodes, spec: spec({ strategy: "Auto" }), now: NOW, rollingBack: false });
    expect(Object.values(dp.modes)).toEqual(Array(6).fill("Replace"));
    expect(dp.problems).toEqual([]);
  });

  it("Auto and Replace report no SurgeUnsupported", () => {
    for (const strategy of ["Auto", "Replace"] as const) {
      expect(plan([node("a", { kubeletVersion: REPLACE_KUBELET })], { strategy }).problems).toEqual([]);
    }
  });

  it("gives the same plan whatever order the nodes come in", () => {
    const nodes = [
      updatedNode("n3"),
      started("n1", { inNew: true, newRegistered: true }),
      node("n2"),
      node("n0"),
    ];
    const want = plan(nodes, { maxUnavailable: 3 });
    expect(plan([...nodes].reverse(), { maxUnavailable: 3 })).toEqual(want);
    expect(acts(want)).toEqual([
      "n0:RecordBaseline",
      "n0:RecordStart",
      "n0:AddToNew",
      "n1:RemoveFromOld",
      "n2:RecordBaseline",
      "n2:RecordStart",
      "n2:AddToNew",
    ]);
  });

  it("does not modify its input", () => {
    const input: PlanInput = { nodes: [node("b"), node("a")], spec: spec(), now: NOW, rollingBack: false };
    const before = structuredClone(input);
    planRollout(input);
    expect(input).toStrictEqual(before);
  });
});

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

// ---------------------------------------------------------------------------------------------
// Simulated rollouts. The model cluster below is the test's own account of what the node lists do
// to pods and plugins; the planner sees it only through NodeObservation, as the operator would.

/** One plugin pod of a revision on a node. */
interface SimPod {
  /** Terminating pods have stopped serving but still exist (oldPodPresent stays true). */
  state: "running" | "terminating";
  /** Step at which the plugin registers; Infinity for a plugin that never does. */
  registersAt: number;
  /** Step at which a terminating pod is gone. */
  goneAt: number;
  /** What the plugin advertises once registered. */
  advertises: number;
}

/** What a new plugin does on a node: register after a delay, never, or register advertising too little. */
type Fate = { kind: "ok" | "short"; delay: number } | { kind: "never" };

interface SimNodeSpec {
  kubelet: string;
  devices: number;
  unhealthy: number;
  fate: Fate;
  oldDelay: number;
  termDelay: number;
}

interface SimNode extends SimNodeSpec {
  name: string;
  targeted: boolean;
  mode?: UpgradeMode;
  inOld: boolean;
  inNew: boolean;
  oldPod?: SimPod;
  newPod?: SimPod;
  startedAt?: number;
  baseline?: number;
  failed?: boolean;
  /** Test bookkeeping: RecordStart actions applied, whether any list edit ever was, and whether a rollback edit was. */
  starts: number;
  edited: boolean;
  rolledBack: boolean;
}

const STEP_MS = 1000;

const KUBELETS = [
  "v1.37.0",
  "v1.37.2",
  "v1.38.1-eks-1234",
  "v1.37.0-rc.1",
  "v1.36.5",
  "v1.33.4-gke.1000",
  "v1.29.0",
  "v1.28.9",
  "v1.29.0-rc.0",
  "garbage",
  "",
];

function up(pod: SimPod | undefined, step: number): boolean {
  return pod !== undefined && pod.state === "running" && step >= pod.registersAt;
}

/** Node allocatable: the plugin that registered last wins, as the kubelet's per-socket endpoints do. */
function allocatable(n: SimNode, step: number): number {
  const oldUp = up(n.oldPod, step);
  const newUp = up(n.newPod, step);
  if (oldUp && newUp)
    return n.oldPod!.registersAt > n.newPod!.registersAt ? n.oldPod!.advertises : n.newPod!.advertises;
  if (newUp) return n.newPod!.advertises;
  if (oldUp) return n.oldPod!.advertises;
  return 0;
}

function healthy(n: SimNode): number {
  return n.devices - n.unhealthy;
}

function observe(n: SimNode, step: number): NodeObservation {
  return {
    name: n.name,
    kubeletVersion: n.kubelet,
    inOld: n.inOld,
    inNew: n.inNew,
    oldPodPresent: n.oldPod !== undefined,
    newRegistered: up(n.newPod, step),
    oldRegistered: up(n.oldPod, step),
    allocatable: allocatable(n, step),
    unhealthy: n.unhealthy,
    ...(n.baseline !== undefined ? { baseline: n.baseline } : {}),
    ...(n.startedAt !== undefined ? { startedAt: n.startedAt } : {}),
    ...(n.failed !== undefined ? { failed: n.failed } : {}),
  };
}

/** Serving fully on one revision, as the spec of the gates says; anything else holds a slot. */
function settled(n: SimNode, step: number): boolean {
  const enough = n.baseline !== undefined && allocatable(n, step) >= n.baseline - n.unhealthy;
  const onOld = n.inOld && !n.inNew && up(n.oldPod, step) && enough;
  const onNew = n.inNew && !n.inOld && n.oldPod === undefined && up(n.newPod, step) && enough;
  return onOld || onNew;
}

function touched(n: SimNode): boolean {
  return n.starts > 0 || n.edited;
}

function simInFlight(nodes: SimNode[], step: number): number {
  return nodes.filter((n) => n.targeted && touched(n) && !settled(n, step)).length;
}

function stopPod(pod: SimPod | undefined, step: number, termDelay: number): void {
  if (pod?.state === "running") {
    pod.state = "terminating";
    pod.goneAt = step + termDelay;
  }
}

/** Applies one action the way the operator would: an edit of a node list, or a persisted record. */
function apply(n: SimNode, a: Action, step: number): void {
  switch (a.kind) {
    case "RecordStart":
      n.starts++;
      n.startedAt = step * STEP_MS;
      return;
    case "RecordBaseline":
      n.baseline = allocatable(n, step);
      return;
    case "MarkFailed":
      n.failed = true;
      return;
    case "AddToNew":
      n.inNew = true;
      break;
    case "AddToOld":
      n.inOld = true;
      n.rolledBack = true;
      break;
    case "RemoveFromOld":
      n.inOld = false;
      stopPod(n.oldPod, step, n.termDelay);
      break;
    case "RemoveFromNew":
      n.inNew = false;
      n.rolledBack = true;
      stopPod(n.newPod, step, n.termDelay);
      break;
  }
  n.edited = true;
}

/** Time passes: terminating pods go, and each revision's DaemonSet starts a pod on a listed node without one. */
function advance(n: SimNode, step: number): void {
  if (n.oldPod?.state === "terminating" && step >= n.oldPod.goneAt) delete n.oldPod;
  if (n.newPod?.state === "terminating" && step >= n.newPod.goneAt) delete n.newPod;
  if (n.inOld && n.oldPod === undefined) {
    n.oldPod = { state: "running", registersAt: step + n.oldDelay, goneAt: Infinity, advertises: healthy(n) };
  }
  if (n.inNew && n.newPod === undefined) {
    const f = n.fate;
    n.newPod = {
      state: "running",
      registersAt: f.kind === "never" ? Infinity : step + f.delay,
      goneAt: Infinity,
      // Short of the gate by one device: devices - 2·unhealthy is what the gate asks for.
      advertises: f.kind === "short" ? n.devices - 2 * n.unhealthy - 1 : healthy(n),
    };
  }
}

/** mulberry32: the simulation's own dice, seeded by fast-check so runs replay and shrink by seed. */
function dice(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(items: readonly T[], roll: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(roll() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const maxUnavailableArb: fc.Arbitrary<RolloutSpec["maxUnavailable"]> = fc.oneof(
  fc.integer({ min: 0, max: 6 }),
  fc.constantFrom<`${number}%`>("0%", "10%", "25%", "33%", "50%", "100%"),
);

interface Scenario {
  nodes: SimNodeSpec[];
  strategy: RolloutSpec["strategy"];
  maxUnavailable: RolloutSpec["maxUnavailable"];
  /** A lowered (or raised) maxUnavailable from some step on, as an operator restarted with a new spec sees it. */
  newMaxUnavailable?: { at: number; value: RolloutSpec["maxUnavailable"] };
  autoRollback: boolean;
  /** Whether new plugins may fail at all; without it every node's gate eventually holds. */
  flaky: boolean;
  deadlineSteps: number;
  pause?: { from: number; steps: number };
  /** Probability per step that the operator stops part-way through applying a plan. */
  restartRate: number;
  seed: number;
}

function scenarioArb(): fc.Arbitrary<Scenario> {
  return fc.boolean().chain((flaky) =>
    fc.record(
      {
        nodes: fc.array(
          fc.record({
            kubelet: fc.constantFrom(...KUBELETS),
            devices: fc.integer({ min: 3, max: 8 }),
            unhealthy: fc.integer({ min: 0, max: 1 }),
            fate: flaky
              ? fc.oneof(
                  { weight: 6, arbitrary: fc.record({ kind: fc.constant("ok" as const), delay: fc.nat(3) }) },
                  {
                    weight: 1,
                    arbitrary: fc.record({ kind: fc.constant("short" as const), delay: fc.nat(3) }),
                  },
                  { weight: 1, arbitrary: fc.constant({ kind: "never" as const }) },
                )
              : fc.record({ kind: fc.constant("ok" as const), delay: fc.nat(3) }),
            oldDelay: fc.nat(3),
            termDelay: fc.nat(4),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        strategy: fc.constantFrom("Auto", "Replace", "Surge"),
        maxUnavailable: maxUnavailableArb,
        newMaxUnavailable: fc.option(fc.record({ at: fc.nat(30), value: maxUnavailableArb }), {
          nil: undefined,
        }),
        autoRollback: fc.boolean(),
        flaky: fc.constant(flaky),
        // Without failures the deadline never bites, so a run is Complete whatever the restarts cost.
        deadlineSteps: flaky ? fc.integer({ min: 4, max: 15 }) : fc.constant(1_000_000),
        pause: fc.option(fc.record({ from: fc.nat(20), steps: fc.integer({ min: 1, max: 20 }) }), {
          nil: undefined,
        }),
        restartRate: fc.constantFrom(0, 0.1, 0.3),
        seed: fc.integer(),
      },
      {
        requiredKeys: [
          "nodes",
          "strategy",
          "maxUnavailable",
          "autoRollback",
          "flaky",
          "deadlineSteps",
          "restartRate",
          "seed",
        ],
      },
    ),
  );
}

/** The model's own reading of a kubelet, independent of the planner's. */
function simTarget(kubelet: string, strategy: RolloutSpec["strategy"]): UpgradeMode | undefined {
  const v = parseKubeletVersion(kubelet);
  if (v === undefined || kubeletTooOld(v) !== undefined) return undefined;
  return strategy !== "Replace" && supportsSurge(v) ? "Surge" : "Replace";
}

function simLimit(value: RolloutSpec["maxUnavailable"], targeted: number): number {
  const raw = typeof value === "number" ? value : Math.floor((targeted * Number(value.slice(0, -1))) / 100);
  return Math.max(1, Math.floor(raw));
}

interface Outcome {
  phase: Plan["phase"];
  nodes: SimNode[];
  markedFailed: boolean;
  step: number;
  lastPlan: Plan;
}

/**
 * Runs a rollout to its end (Complete, RolledBack, or a Failed rollout that has stopped moving) and
 * checks the step invariants on the way; the end-state properties are for the callers.
 */
function simulate(sc: Scenario, stopAt = Infinity): Outcome {
  const roll = dice(sc.seed);
  const nodes: SimNode[] = sc.nodes.map((s, i) => {
    const mode = simTarget(s.kubelet, sc.strategy);
    return {
      ...s,
      name: `node-${String(i).padStart(2, "0")}`,
      targeted: mode !== undefined,
      ...(mode !== undefined ? { mode } : {}),
      inOld: true,
      inNew: false,
      // Every node starts served by the old plugin, registered long ago.
      oldPod: { state: "running", registersAt: -1, goneAt: Infinity, advertises: s.devices - s.unhealthy },
      starts: 0,
      edited: false,
      rolledBack: false,
    };
  });
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const targeted = nodes.filter((n) => n.targeted).length;
  let rollingBack = false;
  let markedFailed = false;
  let previousInFlight = 0;
  let quiet = 0;
  const cap = 100 + 40 * nodes.length;
  let lastPlan: Plan | undefined;

  for (let step = 0; step < Math.min(cap, stopAt); step++) {
    const maxUnavailable =
      sc.newMaxUnavailable !== undefined && step >= sc.newMaxUnavailable.at
        ? sc.newMaxUnavailable.value
        : sc.maxUnavailable;
    const paused = sc.pause !== undefined && step >= sc.pause.from && step < sc.pause.from + sc.pause.steps;
    const spec: RolloutSpec = {
      strategy: sc.strategy,
      maxUnavailable,
      progressDeadlineSeconds: sc.deadlineSteps,
      paused,
      autoRollback: sc.autoRollback,
    };
    // The caller lists nodes in whatever order its cache has them.
    const observed = shuffle(
      nodes.map((n) => observe(n, step)),
      roll,
    );
    const p = planRollout({ nodes: observed, spec, now: step * STEP_MS, rollingBack });
    lastPlan = p;
    const limit = simLimit(maxUnavailable, targeted);

    expect(p.total).toBe(targeted);
    expect(p.modes).toEqual(Object.fromEntries(nodes.filter((n) => n.targeted).map((n) => [n.name, n.mode])));
    // (1) The planner never grows the in-flight set past the limit; it may only be above it when it
    // already was (a lowered maxUnavailable), and then it does not grow.
    expect(p.inFlight.length).toBeLessThanOrEqual(Math.max(limit, previousInFlight));

    for (const a of p.actions) {
      const n = byName.get(a.node)!;
      expect(n.targeted, `${a.kind} on untargeted ${n.name}`).toBe(true);
      if (a.kind === "MarkFailed") {
        // Only a node past its deadline without its gate fails.
        const o = observe(n, step);
        expect(o.startedAt).toBeDefined();
        expect(step * STEP_MS - o.startedAt!).toBeGreaterThan(sc.deadlineSteps * 1000);
        expect(o.newRegistered && o.allocatable >= o.baseline! - o.unhealthy).toBe(false);
      }
    }

    // An operator restart stops part-way through the plan and loses the phase it had not persisted.
    const restart = roll() < sc.restartRate;
    const applied = restart ? p.actions.slice(0, Math.floor(roll() * p.actions.length)) : p.actions;
    const before = simInFlight(nodes, step);
    for (const a of applied) {
      const n = byName.get(a.node)!;
      const edit = !a.kind.startsWith("Record") && a.kind !== "MarkFailed";
      // (4, second half) Nothing moves a node whose start was not recorded first.
      if (edit) expect(n.startedAt, `${a.kind} on ${n.name} before RecordStart`).toBeDefined();
      // No new node starts once a failure is known, or while paused.
      if (a.kind === "RecordStart") expect(markedFailed || rollingBack || paused).toBe(false);
      // A failed node moves only back to the old revision.
      if (n.failed === true && edit) expect(["AddToOld", "RemoveFromNew"]).toContain(a.kind);
      apply(n, a, step);
      if (a.kind === "MarkFailed") markedFailed = true;
      // (2) No node is started twice.
      expect(n.starts, `${n.name} started twice`).toBeLessThanOrEqual(1);
    }
    if (!restart && (p.phase === "RollingBack" || p.phase === "RolledBack")) rollingBack = true;

    // (1) In the model too, whatever the planner believes.
    const after = simInFlight(nodes, step);
    expect(after).toBeLessThanOrEqual(Math.max(limit, before, previousInFlight));
    if (sc.newMaxUnavailable === undefined) expect(after).toBeLessThanOrEqual(limit);
    previousInFlight = p.inFlight.length;

    const surgeSafe = (s: number): void => {
      for (const n of nodes) {
        // (3) A surge node always has a plugin serving: never an allocatable-zero window.
        if (n.mode === "Surge") {
          expect(up(n.oldPod, s) || up(n.newPod, s), `${n.name} has no plugin at step ${s}`).toBe(true);
        }
        // And going forward a replaced node never runs the two side by side, which is what its
        // kubelet cannot take. (Rolling back brings the old one back beside the new one on every
        // node, as the design says; see the planner.)
        if (n.mode === "Replace" && !n.rolledBack) {
          expect(n.oldPod !== undefined && n.newPod !== undefined, `${n.name} runs both at step ${s}`).toBe(
            false,
          );
        }
      }
    };
    surgeSafe(step);
    for (const n of nodes) advance(n, step + 1);
    surgeSafe(step + 1);

    if (!restart && (p.phase === "Complete" || p.phase === "RolledBack")) {
      return { phase: p.phase, nodes, markedFailed, step, lastPlan: p };
    }
    // A Failed rollout without rollback ends when nothing has moved for a while.
    quiet = p.phase === "Failed" && p.actions.length === 0 ? quiet + 1 : 0;
    if (quiet > 10) return { phase: p.phase, nodes, markedFailed, step, lastPlan: p };
  }
  return { phase: lastPlan!.phase, nodes, markedFailed, step: Math.min(cap, stopAt), lastPlan: lastPlan! };
}

describe("planRollout, simulated rollouts", () => {
  it("keeps every invariant and ends Complete, RolledBack, or Failed as its failures say", () => {
    const seen = { complete: 0, rolledBack: 0, failed: 0 };
    fc.assert(
      fc.property(scenarioArb(), (sc) => {
        const out = simulate(sc);
        const targets = out.nodes.filter((n) => n.targeted);
        for (const n of out.nodes.filter((m) => !m.targeted)) {
          expect(n.edited || n.starts > 0, `untargeted ${n.name} was touched`).toBe(false);
        }
        if (!out.markedFailed) {
          // (5) Without failures the rollout completes, every targeted node on the new revision.
          expect(out.phase).toBe("Complete");
          expect(out.lastPlan.updated).toBe(targets.length);
          for (const n of targets) {
            expect(n.inNew && !n.inOld && n.oldPod === undefined && up(n.newPod, out.step)).toBe(true);
            expect(n.starts).toBe(1);
          }
          seen.complete++;
        } else if (sc.autoRollback) {
          // (4) After a rollback every touched node is back on the old revision, and the others were never touched.
          expect(out.phase).toBe("RolledBack");
          for (const n of targets) {
            if (touched(n)) {
              expect(n.inOld && !n.inNew && up(n.oldPod, out.step), `${n.name} is not back`).toBe(true);
              expect(n.starts).toBe(1);
            } else {
              expect(n.inOld && !n.inNew).toBe(true);
            }
          }
          seen.rolledBack++;
        } else {
          expect(out.phase).toBe("Failed");
          expect(out.lastPlan.failed.length).toBeGreaterThan(0);
          seen.failed++;
        }
      }),
      { numRuns: RUNS },
    );
    // Every ending is reached often enough that the properties above are not vacuous.
    expect(seen.complete).toBeGreaterThan(RUNS / 10);
    expect(seen.rolledBack).toBeGreaterThan(RUNS / 20);
    expect(seen.failed).toBeGreaterThan(RUNS / 20);
  });

  it("plans the same from the same cluster, whatever order its nodes are listed in", () => {
    fc.assert(
      fc.property(scenarioArb(), fc.integer({ min: 1, max: 60 }), (sc, stopAt) => {
        // Part-way through a rollout, a restarted operator has nothing but the cluster, listed in
        // whatever order its cache fills; it must decide what the running one would have.
        const out = simulate(sc, stopAt);
        const observed = out.nodes.map((n) => observe(n, out.step));
        const input: PlanInput = {
          nodes: observed,
          spec: {
            strategy: sc.strategy,
            maxUnavailable: sc.maxUnavailable,
            progressDeadlineSeconds: sc.deadlineSteps,
            paused: false,
            autoRollback: sc.autoRollback,
          },
          now: out.step * STEP_MS,
          rollingBack: false,
        };
        const want = planRollout(input);
        expect(planRollout({ ...input, nodes: [...observed].reverse() })).toEqual(want);
        expect(planRollout({ ...input, nodes: shuffle(observed, dice(sc.seed)) })).toEqual(want);
      }),
      { numRuns: RUNS },
    );
  });
});

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
