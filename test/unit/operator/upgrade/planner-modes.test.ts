// The planner's view of the whole cluster: the mode and problems of each node (device plugins and DRA),
// and a plan that depends on neither the order of the nodes nor changes its input.
import { describe, expect, it } from "vitest";
import { type PlanInput, planRollout } from "../../../../src/operator/upgrade/planner.js";
import { acts, node, NOW, plan, REPLACE_KUBELET, spec, started, updatedNode } from "./planner-support.js";

describe("planRollout, node by node", () => {
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
