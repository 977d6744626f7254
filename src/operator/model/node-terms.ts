// The node selector terms of a config's DaemonSet: its own requirements (spec.nodeSelectorTerm) and, where
// configs of its resource name with a higher priority may select the same nodes, the negation of theirs.
// Pure; the same terms decide the DaemonSet's node affinity and the nodes the status counts.
//
// Node affinity ORs its terms and ANDs the expressions of a term. A higher config's selector is one
// conjunction h1 ∧ … ∧ hn, so "not that config" is ¬h1 ∨ … ∨ ¬hn: one alternative per requirement, each
// a single requirement (In ↔ NotIn, Exists ↔ DoesNotExist) or two (¬(Gt x) = DoesNotExist ∨ Lt x+1). The
// config's terms are its own expressions ANDed with one alternative of every higher config: a product,
// pruned of alternatives its own requirements contradict, and bounded (MAX_TARGETING_TERMS). Nothing
// here grows with the number of nodes.
import type { V1Node, V1NodeSelectorRequirement, V1NodeSelectorTerm } from "@kubernetes/client-node";

export type Requirement = V1NodeSelectorRequirement;

/** The targeting fields of a spec (parsed, or any object of that shape). */
export interface TargetingSpec {
  nodeSelector: Readonly<Record<string, string>>;
  nodeSelectorTerm?: { matchExpressions: readonly Requirement[] } | undefined;
}

/** At most this many terms stand for one config (before the rollout's placement multiplies them by 3). */
export const MAX_TARGETING_TERMS = 16;

/** Every requirement of a spec: each nodeSelector label as `In [value]`, then its matchExpressions. */
export function requirementsOf(spec: TargetingSpec): Requirement[] {
  return [
    ...Object.entries(spec.nodeSelector).map(([key, value]) => ({ key, operator: "In", values: [value] })),
    ...expressionsOf(spec),
  ];
}

export function expressionsOf(spec: TargetingSpec): Requirement[] {
  return (spec.nodeSelectorTerm?.matchExpressions ?? []).map((r) => ({
    key: r.key,
    operator: r.operator,
    ...(r.values !== undefined && r.values.length > 0 ? { values: [...r.values] } : {}),
  }));
}

/** A label value as strconv.ParseInt reads it, or undefined when it is no integer. */
function integer(value: string | undefined): bigint | undefined {
  if (value === undefined || !/^[-+]?[0-9]+$/.test(value)) return undefined;
  return BigInt(value);
}

/** Whether labels meet one requirement, by the rules of node affinity (labels.Selector). */
export function labelsMeet(labels: Readonly<Record<string, string>>, req: Requirement): boolean {
  const has = Object.hasOwn(labels, req.key);
  const value = has ? labels[req.key] : undefined;
  const values = req.values ?? [];
  switch (req.operator) {
    case "In":
      return has && values.includes(value!);
    case "NotIn":
      return !has || !values.includes(value!);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "Gt":
    case "Lt": {
      const actual = integer(value);
      const bound = integer(values[0]);
      if (actual === undefined || bound === undefined || values.length !== 1) return false;
      return req.operator === "Gt" ? actual > bound : actual < bound;
    }
    default:
      return false;
  }
}

export function nodeMeetsAll(node: V1Node, reqs: readonly Requirement[]): boolean {
  const labels = node.metadata?.labels ?? {};
  return reqs.every((r) => labelsMeet(labels, r));
}

/** Whether the node matches one of the terms; undefined terms: no constraint; an empty term matches none. */
export function nodeMatchesTerms(node: V1Node, terms: readonly V1NodeSelectorTerm[] | undefined): boolean {
  if (terms === undefined) return true;
  return terms.some((t) => (t.matchExpressions ?? []).length > 0 && nodeMeetsAll(node, t.matchExpressions!));
}

const ints = (values: readonly string[] | undefined): (bigint | undefined)[] => (values ?? []).map(integer);

/** Every label set meeting `a` meets `b` (same key only; sound, not complete). */
export function implies(a: Requirement, b: Requirement): boolean {
  if (a.key !== b.key) return false;
  const av = a.values ?? [];
  const bv = b.values ?? [];
  const keyPresent =
    a.operator === "In" || a.operator === "Exists" || a.operator === "Gt" || a.operator === "Lt";
  switch (b.operator) {
    case "Exists":
      return keyPresent;
    case "DoesNotExist":
      return a.operator === "DoesNotExist";
    case "In":
      return a.operator === "In" && av.every((v) => bv.includes(v));
    case "NotIn":
      return (
        a.operator === "DoesNotExist" ||
        (a.operator === "NotIn" && bv.every((v) => av.includes(v))) ||
        (a.operator === "In" && av.every((v) => !bv.includes(v)))
      );
    case "Gt":
    case "Lt": {
      const bound = integer(bv[0]);
      if (bound === undefined) return false;
      const beyond = (x: bigint | undefined) =>
        x !== undefined && (b.operator === "Gt" ? x > bound : x < bound);
      if (a.operator === "In") return ints(av).every(beyond);
      const own = integer(av[0]);
      if (a.operator !== b.operator || own === undefined) return false;
      return b.operator === "Gt" ? own >= bound : own <= bound;
    }
    default:
      return false;
  }
}

/** No label set meets both `a` and `b` (same key only; sound, not complete). */
export function disjoint(a: Requirement, b: Requirement): boolean {
  return oneWayDisjoint(a, b) || oneWayDisjoint(b, a);
}

function oneWayDisjoint(a: Requirement, b: Requirement): boolean {
  if (a.key !== b.key) return false;
  const av = a.values ?? [];
  const bv = b.values ?? [];
  if (a.operator === "DoesNotExist") return implies(b, { key: b.key, operator: "Exists" });
  if (a.operator === "In") {
    if (b.operator === "In") return av.every((v) => !bv.includes(v));
    if (b.operator === "NotIn") return av.every((v) => bv.includes(v));
    if (b.operator === "Gt" || b.operator === "Lt") return !av.some((v) => labelsMeet({ [a.key]: v }, b));
  }
  if (a.operator === "Gt" && b.operator === "Lt") {
    const x = integer(av[0]);
    const y = integer(bv[0]);
    return x !== undefined && y !== undefined && y <= x + 1n;
  }
  return false;
}

/**
 * The alternatives whose union is every label set not meeting `req`, as requirements. A Gt or Lt bound
 * misses the nodes whose label is there but no integer: such a node is served by neither config.
 */
export function negate(req: Requirement): Requirement[] {
  const { key } = req;
  const values = req.values ?? [];
  switch (req.operator) {
    case "In":
      return [{ key, operator: "NotIn", values: [...values] }];
    case "NotIn":
      return [{ key, operator: "In", values: [...values] }];
    case "Exists":
      return [{ key, operator: "DoesNotExist" }];
    case "DoesNotExist":
      return [{ key, operator: "Exists" }];
    case "Gt":
      return [
        { key, operator: "DoesNotExist" },
        { key, operator: "Lt", values: [String(integer(values[0])! + 1n)] },
      ];
    case "Lt":
      return [
        { key, operator: "DoesNotExist" },
        { key, operator: "Gt", values: [String(integer(values[0])! - 1n)] },
      ];
    default:
      return [];
  }
}

/** No node can meet both sets of requirements (as far as `disjoint` can tell). */
export function selectorsDisjoint(a: readonly Requirement[], b: readonly Requirement[]): boolean {
  return a.some((x) => b.some((y) => disjoint(x, y)));
}

/** Every node meeting `inner` meets `outer` (as far as `implies` can tell); an empty outer holds all. */
export function selectorContains(outer: readonly Requirement[], inner: readonly Requirement[]): boolean {
  return outer.every((o) => inner.some((i) => implies(i, o)));
}

export type TermsResult =
  /** `terms` undefined: no constraint beyond nodeSelector; `[]`: no node at all. */
  | { ok: true; terms: V1NodeSelectorTerm[] | undefined }
  /** The product outgrew MAX_TARGETING_TERMS. */
  | { ok: false; needed: number };

const keyOf = (reqs: readonly Requirement[]): string => JSON.stringify(reqs);

/**
 * The terms of a config whose own requirements are `own` (its nodeSelector labels included: they prune,
 * but stay in the pod's nodeSelector) and `expressions` (rendered), stepping back from every config in
 * `higher` (their requirements).
 */
export function effectiveTerms(
  own: readonly Requirement[],
  expressions: readonly Requirement[],
  higher: readonly (readonly Requirement[])[],
): TermsResult {
  let partial: Requirement[][] = [[...expressions]];
  for (const other of higher) {
    if (selectorsDisjoint(own, other) || selectorsDisjoint(other, other)) continue;
    const alternatives = other.flatMap(negate).filter((alt) => !own.some((o) => disjoint(o, alt)));
    // Every node of this config already escapes the other one: nothing to add.
    if (alternatives.some((alt) => own.some((o) => implies(o, alt)))) continue;
    const next = new Map<string, Requirement[]>();
    for (const term of partial) {
      for (const alt of alternatives) {
        if (term.some((r) => disjoint(r, alt))) continue;
        const grown = term.some((r) => implies(r, alt)) ? term : [...term, alt];
        next.set(keyOf(grown), grown);
      }
    }
    if (next.size > MAX_TARGETING_TERMS) return { ok: false, needed: next.size };
    partial = [...next.values()];
    if (partial.length === 0) return { ok: true, terms: [] };
  }
  if (partial.every((t) => t.length === 0)) return { ok: true, terms: undefined };
  return { ok: true, terms: partial.map((t) => ({ matchExpressions: t })) };
}
