// decideRollout switching spec.publish between DevicePlugin and DRA: every node replaced, one at a time,
// DRA only once ExtendedResourceMapping allows it, and a node's slices gone before the device plugin returns.
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { pluginRevision } from "../../../../src/operator/render/index.js";
import { serializeNodeRecord } from "../../../../src/operator/upgrade/node-labels.js";
import type { RolloutDecision } from "../../../../src/operator/upgrade/rollout.js";
import { config, ctx, decide, KEYS, node, NOW, pod, stored } from "./rollout-support.js";

describe("decideRollout: a publish switch (DevicePlugin and DRA)", () => {
  const DP = config({ upgrade: { strategy: "Surge", maxUnavailable: 1 } });
  const DRA = config({
    publish: "DRA",
    dra: { driverName: "foo.example.com" },
    upgrade: { strategy: "Surge", maxUnavailable: 1 },
  });
  const dpRev = pluginRevision(DP, ctx);
  const draRev = pluginRevision(DRA, ctx);
  const mapped = {
    switchToDraMayStart: true,
    status: "True",
    reason: "ExtendedResourceMapped",
    message: "mapped",
  };
  const unsupported = {
    switchToDraMayStart: false,
    status: "False",
    reason: "ExtendedResourceUnsupported",
    message: "the API server drops DeviceClass spec.extendedResourceName",
  };
  const fenced = (n: V1Node): V1Node => ({
    ...n,
    spec: { taints: [{ key: KEYS.replace, value: draRev, effect: "NoSchedule" }] },
  });
  const labelled = (n: V1Node, revision: string, from: string, to: string, baseline = 4): V1Node => ({
    ...n,
    metadata: {
      ...n.metadata,
      labels: { [KEYS.revision]: revision },
      annotations: {
        [KEYS.upgrade]: serializeNodeRecord({ from, to, startedAt: NOW - 1000, baseline }),
      },
    },
  });
  const patchOf = (d: RolloutDecision, name: string) =>
    d.writes.find((w) => w.kind === "PatchNode" && w.patch.node === name);

  it("starts with an event that says it is a switch, whatever the strategy", () => {
    const d = decide({
      config: DRA,
      daemonSets: [stored(DP, "base")],
      nodes: [node("a"), node("b")],
      mapping: mapped,
    });
    expect(d.writes.map((w) => w.kind)).toEqual(["Create"]);
    expect(d.events[0]?.message).toMatch(
      /^switching spec.publish from DevicePlugin to DRA .* node by node, each node replaced whatever the strategy/,
    );
  });

  it("replaces every node under Surge (fence first), one at a time, and says which node is where", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const d = decide({
      config: DRA,
      daemonSets: [base, moving],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), pod(base, "b")],
      sliceDevices: new Map(),
      mapping: mapped,
    });
    expect(d.modes).toEqual({ a: "Replace", b: "Replace" });
    expect(d.problems).toEqual([]);
    const a = patchOf(d, "a");
    expect(a?.kind === "PatchNode" && a.patch.body.spec?.taints?.[0]?.key).toBe(KEYS.replace);
    expect(patchOf(d, "b")).toBeUndefined();
    expect(d.status.message).toMatch(/switching spec.publish from DevicePlugin to DRA .*in flight.*: a$/);
  });

  it("waits while ExtendedResourceMapping does not allow the switch, and the device plugin keeps its nodes", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const d = decide({
      config: DRA,
      daemonSets: [base, moving],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), pod(base, "b")],
      sliceDevices: new Map(),
      mapping: unsupported,
    });
    expect(d.writes.filter((w) => w.kind === "PatchNode")).toEqual([]);
    expect(d.status.phase).toBe("Progressing");
    expect(d.status.message).toContain(
      "the switch to DRA waits for ExtendedResourceMapping (now False, ExtendedResourceUnsupported",
    );
  });

  it("assigns DRA to a node only once its device plugin pod is gone and its allocatable is 0", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const stopped = fenced(labelled(node("a", "v1.37.0", 4), "none", dpRev, draRev));
    const cases: { name: string; n: V1Node; pods: V1Pod[]; assigned: boolean }[] = [
      { name: "pod still there", n: stopped, pods: [pod(base, "a")], assigned: false },
      { name: "pod gone, allocatable 4", n: stopped, pods: [], assigned: false },
      {
        name: "pod gone, allocatable 0",
        n: fenced(labelled(node("a", "v1.37.0", 0), "none", dpRev, draRev)),
        pods: [],
        assigned: true,
      },
    ];
    for (const c of cases) {
      const d = decide({
        config: DRA,
        daemonSets: [base, moving],
        nodes: [c.n],
        pods: c.pods,
        sliceDevices: new Map(),
        mapping: mapped,
      });
      const p = patchOf(d, "a");
      const revision = p?.kind === "PatchNode" ? p.patch.body.metadata.labels?.[KEYS.revision] : undefined;
      expect(revision, c.name).toBe(c.assigned ? draRev : undefined);
      expect(
        d.events.some((e) => e.reason === "SwitchNodeStarting"),
        c.name,
      ).toBe(c.assigned);
    }
  });

  it("back to the device plugin: deletes the node's slices once its DRA pod is gone, then assigns the device plugin", () => {
    const base = stored(DRA, "base");
    const moving = stored(DP, "moving", { from: draRev, rollingBack: false });
    const n = fenced(labelled(node("a", "v1.37.0", 0), "none", draRev, dpRev));
    const withPod = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      pods: [pod(base, "a")],
      sliceDevices: new Map([["a", 4]]),
    });
    expect(withPod.writes.filter((w) => w.kind === "DeleteSlices" || w.kind === "PatchNode")).toEqual([]);
    const podGone = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      sliceDevices: new Map([["a", 4]]),
    });
    expect(podGone.writes.filter((w) => w.kind === "DeleteSlices")).toEqual([
      { kind: "DeleteSlices", node: "a" },
    ]);
    expect(patchOf(podGone, "a")).toBeUndefined();
    const slicesGone = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      sliceDevices: new Map(),
    });
    const p = patchOf(slicesGone, "a");
    expect(p?.kind === "PatchNode" && p.patch.body.metadata.labels?.[KEYS.revision]).toBe(dpRev);
  });
});
