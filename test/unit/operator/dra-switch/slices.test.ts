// nodesToClearOfSlices: the nodes whose ResourceSlices a switch deletes, and when.
import { describe, expect, it } from "vitest";
import { nodesToClearOfSlices, type SliceNodeView } from "../../../../src/operator/dra-switch/slices.js";

describe("nodesToClearOfSlices", () => {
  const base: SliceNodeView = {
    name: "n",
    inOld: false,
    inNew: false,
    oldPodPresent: false,
    newPodPresent: false,
    oldAdvertises: true,
    newAdvertises: false,
  };
  const cases: { name: string; view: Partial<SliceNodeView>; leavingIsOld: boolean; cleared: boolean }[] = [
    { name: "forward: pod gone, slice left", view: {}, leavingIsOld: true, cleared: true },
    {
      name: "forward: the old DRA pod still there",
      view: { oldPodPresent: true },
      leavingIsOld: true,
      cleared: false,
    },
    {
      name: "forward: still assigned the old revision",
      view: { inOld: true },
      leavingIsOld: true,
      cleared: false,
    },
    {
      name: "forward: the new path already assigned",
      view: { inNew: true },
      leavingIsOld: true,
      cleared: false,
    },
    { name: "forward: no slice left", view: { oldAdvertises: false }, leavingIsOld: true, cleared: false },
    {
      name: "rollback: the new DRA pod gone, its slice left",
      view: { oldAdvertises: false, newAdvertises: true },
      leavingIsOld: false,
      cleared: true,
    },
    {
      name: "rollback: the new DRA pod still there",
      view: { newAdvertises: true, newPodPresent: true },
      leavingIsOld: false,
      cleared: false,
    },
    {
      name: "rollback: pod presence unknown",
      view: { newAdvertises: true, newPodPresent: undefined },
      leavingIsOld: false,
      cleared: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const view = { ...base, ...c.view };
      if ("newPodPresent" in c.view && c.view.newPodPresent === undefined) delete view.newPodPresent;
      expect(nodesToClearOfSlices([view], c.leavingIsOld)).toEqual(c.cleared ? ["n"] : []);
    });
  }
});
