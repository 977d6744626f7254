// What a Node says about a config's upgrade (ADR 0004), and the patches that change it: pure.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { nodeKeys, NO_REVISION } from "../../../../src/operator/model/targeting.js";
import {
  encodeMembership,
  nodeLabels,
  nodePatch,
  parseNodeRecord,
  runsRevision,
  serializeNodeRecord,
  stripPatch,
  type Membership,
  type NodeLabels,
} from "../../../../src/operator/upgrade/node-labels.js";

const KEYS = nodeKeys("gpu");

function node(labels: Record<string, string> = {}, annotations: Record<string, string> = {}): V1Node {
  return { metadata: { name: "n1", resourceVersion: "42", labels, annotations } };
}

describe("encodeMembership", () => {
  const u = undefined;
  it.each<{ current: NodeLabels; want: Membership; out: NodeLabels; case: string }>([
    {
      case: "untouched stays unlabelled",
      current: { revision: u, surge: u },
      want: { old: true, new: false },
      out: { revision: u, surge: u },
    },
    {
      case: "surge from untouched",
      current: { revision: u, surge: u },
      want: { old: true, new: true },
      out: { revision: u, surge: "new" },
    },
    {
      case: "surge from labelled base",
      current: { revision: "old", surge: u },
      want: { old: true, new: true },
      out: { revision: "old", surge: "new" },
    },
    {
      case: "surge done",
      current: { revision: u, surge: "new" },
      want: { old: false, new: true },
      out: { revision: "new", surge: u },
    },
    {
      case: "replace gap",
      current: { revision: u, surge: u },
      want: { old: false, new: false },
      out: { revision: NO_REVISION, surge: u },
    },
    {
      case: "replace done",
      current: { revision: NO_REVISION, surge: u },
      want: { old: false, new: true },
      out: { revision: "new", surge: u },
    },
    {
      case: "rollback beside",
      current: { revision: "new", surge: u },
      want: { old: true, new: true },
      out: { revision: "new", surge: "old" },
    },
    {
      case: "rollback done",
      current: { revision: "new", surge: "old" },
      want: { old: true, new: false },
      out: { revision: "old", surge: u },
    },
    {
      case: "a third revision goes to the base",
      current: { revision: "other", surge: u },
      want: { old: true, new: false },
      out: { revision: "old", surge: u },
    },
  ])("$case", ({ current, want, out }) => {
    const labels = encodeMembership(current, want, "old", "new");
    expect(labels).toEqual(out);
    // The labels say what was wanted, as each DaemonSet's affinity reads them.
    expect(runsRevision(labels, "old", true)).toBe(want.old);
    expect(runsRevision(labels, "new", false)).toBe(want.new);
  });
});

describe("node records and patches", () => {
  it("reads a record only for the upgrade it was written for, and never throws on a bad one", () => {
    const text = serializeNodeRecord({ from: "a", to: "b", startedAt: 5, baseline: 4 });
    expect(parseNodeRecord(node({}, { [KEYS.upgrade]: text }), KEYS, "a", "b")).toEqual({
      from: "a",
      to: "b",
      startedAt: 5,
      baseline: 4,
    });
    expect(parseNodeRecord(node({}, { [KEYS.upgrade]: text }), KEYS, "b", "c")).toBeUndefined();
    for (const bad of ["{", "null", "[]", '"x"', '{"from":"a","to":"b","startedAt":"soon"}']) {
      const parsed = parseNodeRecord(node({}, { [KEYS.upgrade]: bad }), KEYS, "a", "b");
      expect(parsed === undefined || parsed.startedAt === undefined, bad).toBe(true);
    }
  });

  it("keeps when the fence went on, and drops a fence time that is not a number", () => {
    const text = serializeNodeRecord({ from: "a", to: "b", startedAt: 5, baseline: 4, fencedAt: 7 });
    expect(text).toBe('{"from":"a","to":"b","startedAt":5,"baseline":4,"fencedAt":7}');
    expect(parseNodeRecord(node({}, { [KEYS.upgrade]: text }), KEYS, "a", "b")?.fencedAt).toBe(7);
    const bad = '{"from":"a","to":"b","fencedAt":"now"}';
    expect(parseNodeRecord(node({}, { [KEYS.upgrade]: bad }), KEYS, "a", "b")).toEqual({
      from: "a",
      to: "b",
    });
  });

  it("patches only what changes, with the resourceVersion it was planned from, or nothing", () => {
    const n = node({ [KEYS.surge]: "new", "other/label": "x" });
    expect(nodePatch(n, KEYS, nodeLabels(n, KEYS), undefined)).toBeUndefined();
    expect(nodePatch(n, KEYS, { revision: "new", surge: undefined }, undefined)).toEqual({
      node: "n1",
      resourceVersion: "42",
      body: { metadata: { resourceVersion: "42", labels: { [KEYS.revision]: "new", [KEYS.surge]: null } } },
    });
  });

  it("takes a config's keys off a node and leaves everything else", () => {
    const n = node(
      { [KEYS.revision]: "a", [KEYS.surge]: "b", [nodeKeys("other").revision]: "c", zone: "z" },
      { [KEYS.upgrade]: "{}", note: "x" },
    );
    expect(stripPatch(n, KEYS)?.body).toEqual({
      metadata: {
        resourceVersion: "42",
        labels: { [KEYS.revision]: null, [KEYS.surge]: null },
        annotations: { [KEYS.upgrade]: null },
      },
    });
    expect(stripPatch(node({ zone: "z" }), KEYS)).toBeUndefined();
  });
});
