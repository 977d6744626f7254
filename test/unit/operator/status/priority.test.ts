// Configs of one resource name with priorities: the higher serves the nodes both select, the lower steps
// back there, equal priorities on shared nodes still conflict, and status.serving counts who serves what.
import type { V1Node } from "@kubernetes/client-node";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { labelsMeet, requirementsOf, type Requirement } from "../../../../src/operator/model/node-terms.js";
import { placementAffinity } from "../../../../src/operator/model/targeting.js";
import { nodeMatchesTerms } from "../../../../src/operator/model/node-terms.js";
import {
  findResourceNameConflicts,
  resolveResourceNames,
  type ConflictCandidate,
} from "../../../../src/operator/status/conflicts.js";
import { pluginRunsOnNode } from "../../../../src/operator/model/targeting.js";
import { servingStatus } from "../../../../src/operator/status/serving.js";

const RESOURCE = "vendor.example/gpu";
const T = (day: number) => `2025-01-${String(day).padStart(2, "0")}T00:00:00Z`;

function cfg(
  name: string,
  day: number,
  priority: number,
  nodeSelector: Record<string, string>,
  matchExpressions: Requirement[] = [],
): ConflictCandidate {
  return {
    metadata: { name, creationTimestamp: T(day) },
    spec: {
      resourceName: RESOURCE,
      nodeSelector,
      ...(matchExpressions.length > 0 ? { nodeSelectorTerm: { matchExpressions } } : {}),
      priority,
    },
  };
}

function node(name: string, labels: Record<string, string>): V1Node {
  return { metadata: { name, labels } };
}

/** The node's server among the configs, as the DaemonSets' affinity would place them. */
function serversOf(configs: ConflictCandidate[], nodes: V1Node[]): Map<string, string[]> {
  const resolution = resolveResourceNames(configs, nodes);
  const servers = new Map<string, string[]>(nodes.map((n) => [n.metadata!.name!, []]));
  for (const c of configs) {
    const r = resolution.get(c.metadata.name)!;
    if (r.conflictWith !== undefined) continue;
    // The DaemonSet's base placement ANDed with the terms: evaluated as the scheduler would.
    const terms = placementAffinity(c.metadata.name, "r1", "base", r.targeting.terms).nodeAffinity!
      .requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    for (const n of nodes) {
      const spec = { nodeSelector: c.spec.nodeSelector, tolerations: [] };
      if (pluginRunsOnNode(n, spec, { terms: undefined }) && nodeMatchesTerms(n, terms))
        servers.get(n.metadata!.name!)!.push(c.metadata.name);
    }
  }
  return servers;
}

const pool = (v: string): Requirement => ({ key: "pool", operator: "In", values: [v] });

describe("resolveResourceNames: priorities", () => {
  const nodes = [
    node("a1", { gpu: "true", pool: "a" }),
    node("b1", { gpu: "true", pool: "b" }),
    node("b2", { gpu: "true", pool: "b" }),
    node("cpu", {}),
  ];

  it.each<{
    case: string;
    configs: ConflictCandidate[];
    want: Record<string, string[]>;
    conflicts: Record<string, string>;
  }>([
    {
      case: "a default and an override on pool b: disjoint node sets, no conflict",
      configs: [cfg("default", 1, 0, { gpu: "true" }), cfg("big", 2, 10, {}, [pool("b")])],
      want: { a1: ["default"], b1: ["big"], b2: ["big"], cpu: [] },
      conflicts: {},
    },
    {
      case: "the override older than the default changes nothing",
      configs: [cfg("default", 2, 0, { gpu: "true" }), cfg("big", 1, 10, {}, [pool("b")])],
      want: { a1: ["default"], b1: ["big"], b2: ["big"], cpu: [] },
      conflicts: {},
    },
    {
      case: "equal priorities on shared nodes still conflict: the newer yields",
      configs: [cfg("default", 1, 5, { gpu: "true" }), cfg("big", 2, 5, {}, [pool("b")])],
      want: { a1: ["default"], b1: ["default"], b2: ["default"], cpu: [] },
      conflicts: { big: "default" },
    },
    {
      case: "three levels: each node goes to the highest config selecting it",
      configs: [
        cfg("default", 1, 0, { gpu: "true" }),
        cfg("b-pool", 2, 10, {}, [pool("b")]),
        cfg("b2-only", 3, 20, {}, [
          { key: "pool", operator: "In", values: ["b"] },
          { key: "gpu", operator: "Exists" },
        ]),
      ],
      want: { a1: ["default"], b1: ["b2-only"], b2: ["b2-only"], cpu: [] },
      conflicts: {},
    },
    {
      case: "an override that covers the whole default leaves it no node",
      configs: [cfg("default", 1, 0, { gpu: "true" }), cfg("all", 2, 1, {})],
      want: { a1: ["all"], b1: ["all"], b2: ["all"], cpu: ["all"] },
      conflicts: {},
    },
  ])("$case", ({ configs, want, conflicts }) => {
    expect(Object.fromEntries(serversOf(configs, nodes))).toEqual(want);
    expect(Object.fromEntries(findResourceNameConflicts(configs, nodes))).toEqual(conflicts);
  });

  it("names the configs stepped back for and overridden", () => {
    const configs = [cfg("default", 1, 0, { gpu: "true" }), cfg("big", 2, 10, {}, [pool("b")])];
    const r = resolveResourceNames(configs, nodes);
    expect(r.get("default")!.stepsBackFor.map((h) => h.name)).toEqual(["big"]);
    expect(r.get("big")!.overrides.map((l) => l.name)).toEqual(["default"]);
    expect(r.get("default")!.targeting.terms).toEqual([
      { matchExpressions: [{ key: "pool", operator: "NotIn", values: ["b"] }] },
    ]);
  });

  it("gives up on a product of more than 16 terms with a ResourceNameConflict naming why", () => {
    const overrides = Array.from({ length: 5 }, (_, i) =>
      cfg(`o${i}`, 2 + i, 10 + i, {}, [
        { key: `a${i}`, operator: "Exists" },
        { key: `b${i}`, operator: "Exists" },
      ]),
    );
    const r = resolveResourceNames([cfg("default", 1, 0, {}), ...overrides], []).get("default")!;
    expect(r.conflictWith).toBe("o4");
    expect(r.conflictMessage).toMatch(/takes 32 node selector terms, more than 16/);
  });
});

describe("servingStatus", () => {
  it("counts the nodes each config serves and yields, never names them", () => {
    const nodes = [
      node("a1", { gpu: "true", pool: "a" }),
      node("b1", { gpu: "true", pool: "b" }),
      node("b2", { gpu: "true", pool: "b" }),
    ];
    const configs = [cfg("default", 1, 0, { gpu: "true" }), cfg("big", 2, 10, {}, [pool("b")])];
    const r = resolveResourceNames(configs, nodes);
    const spec = (c: ConflictCandidate) => ({ ...c.spec, tolerations: [], priority: c.spec.priority ?? 0 });
    expect(servingStatus({ spec: spec(configs[0]!), nodes, resolution: r.get("default")! })).toEqual({
      priority: 0,
      served: 1,
      yielded: 2,
      yieldedTo: [{ config: "big", priority: 10, nodes: 2 }],
      summary: "1/3",
    });
    expect(servingStatus({ spec: spec(configs[1]!), nodes, resolution: r.get("big")! })).toEqual({
      priority: 10,
      served: 2,
      yielded: 0,
      overrides: [{ config: "default", priority: 0, nodes: 2 }],
      summary: "2/2",
    });
  });
  it("is absent for a config sharing nothing", () => {
    const configs = [cfg("only", 1, 0, {})];
    const r = resolveResourceNames(configs, []).get("only")!;
    expect(
      servingStatus({
        spec: { ...configs[0]!.spec, tolerations: [], priority: 0 },
        nodes: [],
        resolution: r,
      }),
    ).toBeUndefined();
  });
});

describe("property: every node is served by at most one config per resource name", () => {
  const KEYS = ["pool", "mem", "zone"];
  const VALUES = ["a", "b", "1", "5", "80", "x"];
  const requirement: fc.Arbitrary<Requirement> = fc
    .record({
      key: fc.constantFrom(...KEYS),
      operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
      values: fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 2 }),
      bound: fc.constantFrom("1", "5", "80", "-2"),
    })
    .map(({ key, operator, values, bound }) =>
      operator === "Exists" || operator === "DoesNotExist"
        ? { key, operator }
        : operator === "Gt" || operator === "Lt"
          ? { key, operator, values: [bound] }
          : { key, operator, values },
    );
  const config = fc.record({
    priority: fc.integer({ min: 0, max: 3 }),
    day: fc.integer({ min: 1, max: 28 }),
    selector: fc.dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 1 }),
    expressions: fc.array(requirement, { maxLength: 3 }),
  });
  const nodeLabels = fc.dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 3 });

  it("and, Gt/Lt on labels that are no integers aside, by the highest-priority config selecting it", () => {
    fc.assert(
      fc.property(
        fc.array(config, { minLength: 1, maxLength: 5 }),
        fc.array(nodeLabels, { minLength: 1, maxLength: 8 }),
        (specs, labelSets) => {
          const configs = specs.map((s, i) => cfg(`c${i}`, s.day, s.priority, s.selector, s.expressions));
          const nodes = labelSets.map((l, i) => node(`n${i}`, l));
          const servers = serversOf(configs, nodes);
          const conflicts = findResourceNameConflicts(configs, nodes);
          for (const [nodeName, serving] of servers) {
            expect(serving.length, `${nodeName}: ${serving.join(", ")}`).toBeLessThanOrEqual(1);
            const labels = nodes.find((n) => n.metadata!.name === nodeName)!.metadata!.labels!;
            const running = configs.filter((c) => !conflicts.has(c.metadata.name));
            const selecting = running.filter((c) =>
              requirementsOf(c.spec).every((r) => labelsMeet(labels, r)),
            );
            if (selecting.length === 0) {
              expect(serving).toEqual([]);
              continue;
            }
            const top = Math.max(...selecting.map((c) => c.spec.priority ?? 0));
            const gap = Object.values(labels).some((v) => !/^-?[0-9]+$/.test(v));
            if (serving.length === 0 && gap) continue;
            const server = configs.find((c) => c.metadata.name === serving[0]);
            expect(server?.spec.priority, `${nodeName} ${JSON.stringify(labels)}`).toBe(top);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
