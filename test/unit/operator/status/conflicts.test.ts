// Two configs advertising one resource on overlapping nodes: the older runs, the newer yields; an older
// config whose stored spec does not validate keeps its plugins, so the newer yields to it too.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  type CdiKindCandidate,
  cdiKindConflict,
  type ConflictCandidate,
  findResourceNameConflicts,
  type InvalidConfig,
  resolveResourceNames,
} from "../../../../src/operator/status/conflicts.js";

function cfg(
  name: string,
  created: string | Date | undefined,
  nodeSelector: Record<string, string>,
  resourceName = "vendor.example/foo",
): ConflictCandidate {
  return { metadata: { name, creationTimestamp: created }, spec: { resourceName, nodeSelector } };
}

function node(name: string, labels: Record<string, string>): V1Node {
  return { metadata: { name, labels } };
}

const T1 = "2025-01-01T00:00:00Z";
const T2 = "2025-01-02T00:00:00Z";
const T3 = "2025-01-03T00:00:00Z";

describe("findResourceNameConflicts", () => {
  it("reads no node when no two configs share a resource name or their selectors decide", () => {
    // At 5000 nodes and many configs, every reconcile used to filter every node for every config.
    const untouchable = new Proxy([] as V1Node[], {
      get: (target, key) => {
        if (key === "filter" || key === Symbol.iterator || key === "length")
          throw new Error("nodes were read");
        return Reflect.get(target, key) as unknown;
      },
    });
    const configs = [
      ...Array.from({ length: 50 }, (_, i) => cfg(`c${i}`, T1, { pool: `p${i}` }, `vendor.example/r${i}`)),
      cfg("same-a", T1, { pool: "x" }),
      cfg("same-b", T2, { pool: "x" }),
    ];
    expect(Object.fromEntries(findResourceNameConflicts(configs, untouchable))).toEqual({
      "same-b": "same-a",
    });
  });

  it.each<{ case: string; configs: ConflictCandidate[]; nodes: V1Node[]; want: Record<string, string> }>([
    {
      case: "different resource names never conflict",
      configs: [cfg("a", T1, {}), cfg("b", T2, {}, "vendor.example/bar")],
      nodes: [node("n1", {})],
      want: {},
    },
    {
      case: "same resource, empty selectors, no nodes at all: the newer yields",
      configs: [cfg("b", T2, {}), cfg("a", T1, {})],
      nodes: [],
      want: { b: "a" },
    },
    {
      case: "identical selectors without matching nodes still conflict",
      configs: [cfg("a", T1, { pool: "x" }), cfg("b", T2, { pool: "x" })],
      nodes: [],
      want: { b: "a" },
    },
    {
      case: "a selector contained in the other conflicts before any node exists",
      configs: [cfg("a", T1, { pool: "x", gpu: "1" }), cfg("b", T2, { pool: "x" })],
      nodes: [],
      want: { b: "a" },
    },
    {
      case: "disjoint selectors on disjoint nodes do not conflict",
      configs: [cfg("a", T1, { pool: "x" }), cfg("b", T2, { pool: "y" })],
      nodes: [node("n1", { pool: "x" }), node("n2", { pool: "y" })],
      want: {},
    },
    {
      case: "unrelated selectors conflict once one node matches both",
      configs: [cfg("a", T1, { pool: "x" }), cfg("b", T2, { gpu: "1" })],
      nodes: [node("n1", { pool: "x" }), node("n2", { pool: "x", gpu: "1" })],
      want: { b: "a" },
    },
    {
      case: "unrelated selectors without a common node do not conflict",
      configs: [cfg("a", T1, { pool: "x" }), cfg("b", T2, { gpu: "1" })],
      nodes: [node("n1", { pool: "x" }), node("n2", { gpu: "1" })],
      want: {},
    },
    {
      case: "same creation time: the name decides",
      configs: [cfg("zeta", T1, {}), cfg("alpha", T1, {})],
      nodes: [],
      want: { zeta: "alpha" },
    },
    {
      case: "Date and string timestamps compare alike",
      configs: [cfg("a", new Date(T2), {}), cfg("b", T1, {})],
      nodes: [],
      want: { a: "b" },
    },
    {
      case: "a config without a creation time counts as newest",
      configs: [cfg("a", undefined, {}), cfg("b", T3, {})],
      nodes: [],
      want: { a: "b" },
    },
    {
      case: "everyone yields to the oldest of a group",
      configs: [cfg("c", T3, {}), cfg("b", T2, {}), cfg("a", T1, {})],
      nodes: [],
      want: { b: "a", c: "a" },
    },
    {
      case: "a config that yields blocks nobody: first and third run when only neighbours overlap",
      configs: [cfg("a", T1, { pool: "x" }), cfg("b", T2, { gpu: "1" }), cfg("c", T3, { pool: "y" })],
      nodes: [node("n1", { pool: "x", gpu: "1" }), node("n2", { pool: "y", gpu: "1" })],
      want: { b: "a" },
    },
  ])("$case", ({ configs, nodes, want }) => {
    expect(Object.fromEntries(findResourceNameConflicts(configs, nodes))).toEqual(want);
  });
});

describe("cdiKindConflict", () => {
  const writer = (
    name: string,
    created: string,
    resourceName: string,
    cdi: { enabled: boolean; kind?: string },
    extra: { nodeSelector?: Record<string, string>; priority?: number; publish?: string } = {},
  ): CdiKindCandidate => ({
    metadata: { name, creationTimestamp: created },
    spec: { resourceName, nodeSelector: extra.nodeSelector ?? {}, cdi, ...extra },
  });
  const kind = { enabled: true, kind: "vendor.example/gpu" };

  it.each([
    {
      case: "an older config of another resource with the kind",
      other: writer("a", T1, "v.example/a", kind),
      yields: "a",
    },
    { case: "a newer one", other: writer("a", T3, "v.example/a", kind), yields: undefined },
    {
      case: "a higher priority, newer",
      other: writer("a", T3, "v.example/a", kind, { priority: 5 }),
      yields: "a",
    },
    {
      case: "an older one whose kind defaults to its resource name",
      other: writer("a", T1, "vendor.example/gpu", { enabled: true }),
      yields: "a",
    },
    {
      case: "an older one with CDI off",
      other: writer("a", T1, "v.example/a", { ...kind, enabled: false }),
      yields: undefined,
    },
    {
      case: "an older one publishing DRA",
      other: writer("a", T1, "v.example/a", kind, { publish: "DRA" }),
      yields: undefined,
    },
    {
      case: "an older one on disjoint nodes",
      other: writer("a", T1, "v.example/a", kind, { nodeSelector: { pool: "other" } }),
      yields: undefined,
    },
    {
      case: "an older one of the same resource (resolveResourceNames' job)",
      other: writer("a", T1, "v.example/b", kind),
      yields: undefined,
    },
  ])("$case: yields to $yields", ({ other, yields }) => {
    const self = writer("b", T2, "v.example/b", kind, { nodeSelector: { pool: "gpu" } });
    expect(cdiKindConflict(self, [self, other])?.conflictWith).toBe(yields);
  });

  it("names the field, the kind and the other config, and says when the kind was defaulted", () => {
    const older = writer("a", T1, "v.example/a", { enabled: true, kind: "v.example/b" });
    const conflict = cdiKindConflict(writer("b", T2, "v.example/b", { enabled: true }), [older]);
    expect(conflict).toEqual({
      conflictWith: "a",
      conflictReason: "CDIKindConflict",
      conflictMessage: expect.stringMatching(
        /^spec\.cdi\.kind \(defaulted to spec\.resourceName\): CDI kind v\.example\/b is already the kind of DevicePluginConfig a,/,
      ) as unknown,
    });
  });
});

describe("resolveResourceNames with configs whose stored spec does not validate", () => {
  function invalid(name: string, created: string, spec: Record<string, unknown>): InvalidConfig {
    return {
      metadata: { name, creationTimestamp: created },
      spec: { resourceName: "vendor.example/foo", backend: { type: "Unknown" }, ...spec },
    };
  }
  const withPriority = (c: ConflictCandidate, priority: number): ConflictCandidate => ({
    ...c,
    spec: { ...c.spec, priority },
  });
  const nodes = [node("n1", { pool: "a" }), node("n2", { pool: "b" })];

  it.each<{
    name: string;
    configs: ConflictCandidate[];
    invalid: InvalidConfig[];
    want: Record<string, string | undefined>;
  }>([
    {
      name: "an older invalid config holds the name against a younger one",
      configs: [cfg("young", T2, {})],
      invalid: [invalid("old", T1, {})],
      want: { young: "old" },
    },
    {
      name: "whatever the younger one's priority: the invalid one cannot step back",
      configs: [withPriority(cfg("young", T2, {}), 100)],
      invalid: [invalid("old", T1, {})],
      want: { young: "old" },
    },
    {
      name: "an unreadable selector may reach every node",
      configs: [cfg("young", T2, { pool: "b" })],
      invalid: [invalid("old", T1, { nodeSelector: { pool: 7 } })],
      want: { young: "old" },
    },
    {
      name: "a readable selector provably apart from the younger one's holds nothing against it",
      configs: [cfg("young", T2, { pool: "b" })],
      invalid: [invalid("old", T1, { nodeSelector: { pool: "a" } })],
      want: { young: undefined },
    },
    {
      name: "a younger invalid config takes nothing from an older one",
      configs: [cfg("old", T1, {})],
      invalid: [invalid("young", T2, {})],
      want: { old: undefined },
    },
    {
      name: "an invalid config of another resource name holds nothing, nor one without a spec",
      configs: [cfg("young", T2, {})],
      invalid: [
        { ...invalid("other", T1, {}), spec: { resourceName: "vendor.example/bar" } },
        { metadata: { name: "bare", creationTimestamp: T1 }, spec: null },
      ],
      want: { young: undefined },
    },
    {
      name: "the oldest of two holders is named",
      configs: [cfg("young", T3, {})],
      invalid: [invalid("middle", T2, {}), invalid("old", T1, {})],
      want: { young: "old" },
    },
    {
      name: "a valid peer's conflict is said first",
      configs: [cfg("first", T1, {}), cfg("second", T3, {})],
      invalid: [invalid("middle", T2, {})],
      want: { first: undefined, second: "first" },
    },
  ])("$name", ({ configs, invalid: invalidConfigs, want }) => {
    const resolved = resolveResourceNames(configs, nodes, invalidConfigs);
    expect(Object.fromEntries([...resolved].map(([name, r]) => [name, r.conflictWith]))).toEqual(want);
    for (const [name, r] of resolved) {
      if (r.conflictWith === undefined || !invalidConfigs.some((c) => c.metadata.name === r.conflictWith))
        continue;
      expect(r.conflictMessage, name).toContain(
        `DevicePluginConfig ${r.conflictWith} holds vendor.example/foo`,
      );
      expect(r.conflictMessage, name).toContain("its stored spec does not validate");
    }
  });

  it("a lower priority does not step back for a config that yields to an invalid one", () => {
    const resolved = resolveResourceNames(
      [withPriority(cfg("high", T2, {}), 10), cfg("low", T3, { pool: "b" })],
      nodes,
      [invalid("old", T1, { nodeSelector: { pool: "a" } })],
    );
    expect(resolved.get("high")?.conflictWith).toBe("old");
    expect(resolved.get("low")?.conflictWith).toBeUndefined();
    expect(resolved.get("low")?.stepsBackFor).toEqual([]);
    expect(resolved.get("low")?.targeting.terms).toBeUndefined();
  });
});
