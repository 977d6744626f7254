// Node selector requirements as node affinity evaluates them, their negation, and the terms a config of
// lower priority gets so that it steps back from the nodes of higher ones.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  disjoint,
  effectiveTerms,
  implies,
  labelsMeet,
  MAX_TARGETING_TERMS,
  negate,
  nodeMatchesTerms,
  type Requirement,
} from "../../../../src/operator/model/node-terms.js";
import { placementAffinity, targetingOfAffinity } from "../../../../src/operator/model/targeting.js";

const req = (key: string, operator: string, ...values: string[]): Requirement => ({
  key,
  operator,
  ...(values.length > 0 ? { values } : {}),
});
const node = (labels: Record<string, string>): V1Node => ({ metadata: { name: "n", labels } });

describe("labelsMeet: node affinity's rules", () => {
  it.each<{ labels: Record<string, string>; r: Requirement; want: boolean }>([
    { labels: { gpu: "a" }, r: req("gpu", "In", "a", "b"), want: true },
    { labels: { gpu: "c" }, r: req("gpu", "In", "a", "b"), want: false },
    { labels: {}, r: req("gpu", "In", "a"), want: false },
    { labels: { gpu: "a" }, r: req("gpu", "NotIn", "a"), want: false },
    { labels: { gpu: "c" }, r: req("gpu", "NotIn", "a"), want: true },
    { labels: {}, r: req("gpu", "NotIn", "a"), want: true },
    { labels: { gpu: "" }, r: req("gpu", "Exists"), want: true },
    { labels: {}, r: req("gpu", "Exists"), want: false },
    { labels: {}, r: req("gpu", "DoesNotExist"), want: true },
    { labels: { gpu: "a" }, r: req("gpu", "DoesNotExist"), want: false },
    { labels: { mem: "81" }, r: req("mem", "Gt", "80"), want: true },
    { labels: { mem: "80" }, r: req("mem", "Gt", "80"), want: false },
    { labels: { mem: "-3" }, r: req("mem", "Gt", "-4"), want: true },
    { labels: { mem: "79" }, r: req("mem", "Lt", "80"), want: true },
    { labels: { mem: "80" }, r: req("mem", "Lt", "80"), want: false },
    // A value that is no integer meets neither Gt nor Lt, and an absent label neither.
    { labels: { mem: "80Gi" }, r: req("mem", "Gt", "1"), want: false },
    { labels: { mem: "80Gi" }, r: req("mem", "Lt", "1000"), want: false },
    { labels: {}, r: req("mem", "Lt", "1000"), want: false },
    // Beyond 2^53: compared as integers, not as floating point.
    { labels: { n: "9007199254740993" }, r: req("n", "Gt", "9007199254740992"), want: true },
    { labels: { gpu: "a" }, r: req("gpu", "Unknown", "a"), want: false },
  ])("$labels $r.operator $r.values → $want", ({ labels, r, want }) => {
    expect(labelsMeet(labels, r)).toBe(want);
  });
});

describe("negate: its alternatives meet exactly the label sets the requirement does not", () => {
  const samples: Record<string, string>[] = [
    {},
    { k: "a" },
    { k: "b" },
    { k: "" },
    { k: "-5" },
    { k: "4" },
    { k: "5" },
    { k: "6" },
    { k: "100" },
  ];
  it.each<Requirement>([
    req("k", "In", "a", "b"),
    req("k", "NotIn", "a"),
    req("k", "Exists"),
    req("k", "DoesNotExist"),
    req("k", "Gt", "5"),
    req("k", "Lt", "5"),
    req("k", "Gt", "-6"),
  ])("$operator $values", (r) => {
    for (const labels of samples) {
      const isInteger = labels.k !== undefined && /^-?[0-9]+$/.test(labels.k);
      // The one gap, documented: a label that is there but no integer meets neither Gt/Lt nor its negation.
      if ((r.operator === "Gt" || r.operator === "Lt") && labels.k !== undefined && !isInteger) continue;
      const negated = negate(r).some((alt) => labelsMeet(labels, alt));
      expect(negated, JSON.stringify(labels)).toBe(!labelsMeet(labels, r));
    }
  });
});

describe("implies and disjoint are sound over sample label sets", () => {
  const values = ["a", "b", "1", "5", "9"];
  const all: Requirement[] = [
    req("k", "In", "a"),
    req("k", "In", "a", "b"),
    req("k", "In", "1", "9"),
    req("k", "NotIn", "a"),
    req("k", "NotIn", "a", "b"),
    req("k", "Exists"),
    req("k", "DoesNotExist"),
    req("k", "Gt", "1"),
    req("k", "Gt", "5"),
    req("k", "Lt", "5"),
    req("k", "Lt", "9"),
    req("k", "Lt", "2"),
    req("j", "Exists"),
  ];
  const labelSets: Record<string, string>[] = [
    {},
    { j: "x" },
    ...values.map((v) => ({ k: v })),
    ...values.map((v) => ({ k: v, j: "x" })),
  ];
  it("no counterexample among every pair", () => {
    for (const a of all) {
      for (const b of all) {
        for (const labels of labelSets) {
          const both = labelsMeet(labels, a) && labelsMeet(labels, b);
          if (implies(a, b) && labelsMeet(labels, a)) expect(labelsMeet(labels, b)).toBe(true);
          if (disjoint(a, b))
            expect(both, `${JSON.stringify(a)} ${JSON.stringify(b)} ${JSON.stringify(labels)}`).toBe(false);
        }
      }
    }
  });
  it.each<{ a: Requirement; b: Requirement; implies: boolean; disjoint: boolean }>([
    { a: req("k", "In", "a"), b: req("k", "In", "a", "b"), implies: true, disjoint: false },
    { a: req("k", "In", "a"), b: req("k", "In", "b"), implies: false, disjoint: true },
    { a: req("k", "In", "a"), b: req("k", "NotIn", "a"), implies: false, disjoint: true },
    { a: req("k", "DoesNotExist"), b: req("k", "NotIn", "a"), implies: true, disjoint: false },
    { a: req("k", "Gt", "5"), b: req("k", "Gt", "1"), implies: true, disjoint: false },
    { a: req("k", "Gt", "5"), b: req("k", "Lt", "7"), implies: false, disjoint: false },
    { a: req("k", "Gt", "5"), b: req("k", "Lt", "6"), implies: false, disjoint: true },
    { a: req("k", "Gt", "1"), b: req("k", "Exists"), implies: true, disjoint: false },
    { a: req("k", "Exists"), b: req("j", "Exists"), implies: false, disjoint: false },
  ])("$a.operator $a.values vs $b.operator $b.values", (c) => {
    expect(implies(c.a, c.b)).toBe(c.implies);
    expect(disjoint(c.a, c.b)).toBe(c.disjoint);
  });
});

describe("effectiveTerms", () => {
  const gpu = req("gpu", "In", "true");
  it.each<{
    case: string;
    own: Requirement[];
    expressions: Requirement[];
    higher: Requirement[][];
    want: Requirement[][] | undefined;
  }>([
    {
      case: "no expressions, nothing higher: no constraint",
      own: [gpu],
      expressions: [],
      higher: [],
      want: undefined,
    },
    { case: "own expressions only", own: [gpu], expressions: [gpu], higher: [], want: [[gpu]] },
    {
      case: "a default steps back from one override: NotIn its label",
      own: [],
      expressions: [],
      higher: [[req("pool", "In", "big")]],
      want: [[req("pool", "NotIn", "big")]],
    },
    {
      case: "an override of two requirements: two alternatives (ORed terms)",
      own: [gpu],
      expressions: [gpu],
      higher: [[req("pool", "In", "big"), req("mem", "Gt", "80")]],
      want: [
        [gpu, req("pool", "NotIn", "big")],
        [gpu, req("mem", "DoesNotExist")],
        [gpu, req("mem", "Lt", "81")],
      ],
    },
    {
      case: "an alternative the config's own requirements contradict is left out",
      own: [gpu],
      expressions: [gpu],
      higher: [[gpu, req("pool", "In", "big")]],
      want: [[gpu, req("pool", "NotIn", "big")]],
    },
    {
      case: "a higher config provably disjoint from this one adds nothing",
      own: [req("pool", "In", "small")],
      expressions: [],
      higher: [[req("pool", "In", "big")]],
      want: undefined,
    },
    {
      case: "a higher config containing this one leaves it no node",
      own: [req("pool", "In", "big"), gpu],
      expressions: [],
      higher: [[req("pool", "In", "big")]],
      want: [],
    },
    {
      case: "two overrides: one alternative of each, contradicting pairs dropped",
      own: [],
      expressions: [],
      higher: [[req("pool", "In", "a")], [req("zone", "Exists")]],
      want: [[req("pool", "NotIn", "a"), req("zone", "DoesNotExist")]],
    },
  ])("$case", ({ own, expressions, higher, want }) => {
    const result = effectiveTerms(own, expressions, higher);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.terms?.map((t) => t.matchExpressions)).toEqual(want);
  });

  it("refuses a product beyond MAX_TARGETING_TERMS instead of growing", () => {
    // Five overrides of two requirements each: 2^5 = 32 alternatives.
    const higher = Array.from({ length: 5 }, (_, i) => [req(`a${i}`, "Exists"), req(`b${i}`, "Exists")]);
    const result = effectiveTerms([], [], higher);
    expect(result).toEqual({ ok: false, needed: 32 });
    expect(32).toBeGreaterThan(MAX_TARGETING_TERMS);
  });
});

describe("placementAffinity with targeting terms", () => {
  const revisionKey = "revision.dpo.dev/c";
  const targeting = [
    { matchExpressions: [req("pool", "NotIn", "big")] },
    { matchExpressions: [req("mem", "DoesNotExist")] },
  ];
  it("ANDs the targeting into every placement term, and targetingOfAffinity reads it back", () => {
    const affinity = placementAffinity("c", "r1", "base", targeting);
    const terms = affinity.nodeAffinity!.requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    expect(terms).toHaveLength(6);
    expect(targetingOfAffinity(affinity)).toEqual(targeting);
    expect(targetingOfAffinity(placementAffinity("c", "r1", "moving"))).toBeUndefined();
    expect(targetingOfAffinity(placementAffinity("c", "r1", "moving", []))).toEqual([]);
  });
  it.each<{ labels: Record<string, string>; want: boolean }>([
    { labels: {}, want: true },
    { labels: { pool: "big" }, want: true }, // mem absent: the second term
    { labels: { pool: "big", mem: "1" }, want: false },
    { labels: { pool: "big", [revisionKey]: "r1" }, want: true },
    { labels: { pool: "small", [revisionKey]: "r0" }, want: false }, // placement: another revision
  ])("base of r1 on $labels → $want", ({ labels, want }) => {
    const terms = placementAffinity("c", "r1", "base", targeting).nodeAffinity!
      .requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    expect(nodeMatchesTerms(node(labels), terms)).toBe(want);
  });
  it("no node at all when the targeting is empty", () => {
    const terms = placementAffinity("c", "r1", "base", []).nodeAffinity!
      .requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
    expect(nodeMatchesTerms(node({}), terms)).toBe(false);
    expect(nodeMatchesTerms(node({ "dpo.dev/served-by-higher-priority": "x" }), terms)).toBe(false);
  });
});
