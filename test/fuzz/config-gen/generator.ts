// Valid values from a structural schema: every type, bound and length, patterns from PATTERNS, CEL rules
// satisfied through CEL_RULES.
import type { StructuralSchema } from "../../../src/api/crd.js";
import { rulesOf, type BoundRule, type RuleContext } from "./cel-rules.js";
import type { FuzzRng } from "./fuzz-rng.js";
import { clone, codePoints, showPath, type Json, type JsonObject, type Path } from "./json.js";
import { ALNUM, anyString, dnsSubdomain, edged, patternEntry } from "./patterns.js";

/** Integers for a field without bounds: the API server takes any int64. */
const UNBOUNDED_INTEGERS = [
  0,
  1,
  -1,
  42,
  3600,
  2 ** 31,
  -(2 ** 31),
  2 ** 53 - 1,
  -(2 ** 53 - 1),
  2 ** 62,
  -(2 ** 62),
];

export class Generator {
  constructor(readonly rng: FuzzRng) {}

  /** A valid value for `schema`, its CEL rules satisfied. */
  gen(schema: StructuralSchema, path: Path): Json {
    const rules = rulesOf(schema, path);
    let value = this.raw(schema, path, rules);
    for (const { handler, match } of rules)
      value = handler.satisfy(value, match, this.ruleContext(schema, path, rules));
    return value;
  }

  ruleContext(schema: StructuralSchema, path: Path, rules: BoundRule[]): RuleContext {
    return {
      rng: this.rng,
      schema,
      path,
      gen: (s, p) => this.gen(s, p),
      fresh: () => this.raw(schema, path, rules),
    };
  }

  private raw(schema: StructuralSchema, path: Path, rules: BoundRule[]): Json {
    const { rng } = this;
    if (schema["x-kubernetes-int-or-string"]) {
      const source = rules.find((r) => r.handler.generate !== undefined);
      if (!source)
        throw new Error(`config-gen: int-or-string at ${showPath(path)} has no generating CEL rule`);
      return source.handler.generate!(source.match, this.ruleContext(schema, path, rules));
    }
    if (schema.enum) return clone(rng.pick(schema.enum) as Json);
    switch (schema.type) {
      case "string":
        return this.string(schema, path, rng.length(schema.minLength ?? 0, schema.maxLength ?? 40));
      case "integer":
        return this.integer(schema);
      case "number":
        return rng.intIn(schema.minimum ?? -1000, schema.maximum ?? 1000) + (rng.chance(0.5) ? 0.5 : 0);
      case "boolean":
        return rng.chance(0.5);
      case "array": {
        const min = schema.minItems ?? 0;
        const n = rng.intIn(min, Math.min(schema.maxItems ?? min + 3, min + 3));
        const items = Array.from({ length: n }, (_, i) => this.gen(schema.items!, [...path, i]));
        return uniqueByMapKeys(schema, items);
      }
      case "object":
        return this.object(schema, path);
      default:
        throw new Error(`config-gen: no type at ${showPath(path)}`);
    }
  }

  /** A valid string of exactly n code points where the pattern allows that length, else of another valid length. */
  string(schema: StructuralSchema, path: Path, n: number): string {
    if (schema.pattern === undefined) return anyString(this.rng, n);
    const entry = patternEntry(schema.pattern, path);
    const re = new RegExp(schema.pattern);
    const min = schema.minLength ?? 0;
    const max = schema.maxLength ?? 64;
    // The length asked for first, then every other length the schema allows, in a random order.
    const others = Array.from({ length: Math.min(max, 80) - min + 1 }, (_, i) => min + i);
    for (let i = others.length - 1; i > 0; i--) {
      const j = this.rng.int(i + 1);
      [others[i], others[j]] = [others[j]!, others[i]!];
    }
    for (const len of [n, ...others]) {
      const s = entry.valid(this.rng, len);
      if (s === undefined) continue;
      if (!re.test(s) || codePoints(s) < min || codePoints(s) > max) {
        throw new Error(
          `config-gen: PATTERNS gave ${JSON.stringify(s)} for ${schema.pattern} at ${showPath(path)}`,
        );
      }
      return s;
    }
    throw new Error(`config-gen: no valid string for ${schema.pattern} at ${showPath(path)}`);
  }

  integer(schema: StructuralSchema): number {
    const { rng } = this;
    if (schema.minimum === undefined && schema.maximum === undefined) return rng.pick(UNBOUNDED_INTEGERS);
    const lo = (schema.minimum ?? -(2 ** 53 - 1)) + (schema.exclusiveMinimum ? 1 : 0);
    const hi = (schema.maximum ?? 2 ** 53 - 1) - (schema.exclusiveMaximum ? 1 : 0);
    // A window near the bounds when they are far apart, so values are not all huge.
    if (hi - lo > 1_000_000 && rng.chance(0.7)) {
      return rng.chance(0.5) ? rng.intIn(lo, lo + 1000) : rng.intIn(hi - 1000, hi);
    }
    return rng.intIn(lo, hi);
  }

  private object(schema: StructuralSchema, path: Path): JsonObject {
    const { rng } = this;
    const out: JsonObject = {};
    if (schema.properties) {
      const required = new Set(schema.required ?? []);
      for (const [key, child] of Object.entries(schema.properties)) {
        if (required.has(key) || rng.chance(0.5)) out[key] = this.gen(child, [...path, key]);
      }
      return out;
    }
    if (schema.additionalProperties) {
      const keyMax = keyBound(schema) ?? 40;
      for (let i = rng.int(4); i > 0; i--) {
        const key = mapKey(rng, keyMax);
        out[key] = this.gen(schema.additionalProperties, [...path, key]);
      }
    }
    return out;
  }
}

/** The bound a `self.all(k, size(k) <= N)` rule puts on a map's keys. */
function keyBound(schema: StructuralSchema): number | undefined {
  for (const rule of schema["x-kubernetes-validations"] ?? []) {
    const m = /^self\.all\(k, size\(k\) <= (\d+)\)$/.exec(rule.rule);
    if (m) return Number(m[1]);
  }
  return undefined;
}

/** A map key: label-like most of the time (`feature.example/foo`), any text of a valid length otherwise. */
function mapKey(rng: FuzzRng, max: number): string {
  const r = rng.next();
  if (r < 0.6)
    return `${dnsSubdomain(rng, 3 + rng.int(12))}/${edged(rng, 1 + rng.int(10), ALNUM, `${ALNUM}-_.`)}`.slice(
      0,
      max,
    );
  if (r < 0.8) return edged(rng, 1 + rng.int(12), ALNUM, `${ALNUM}-_.`);
  if (r < 0.9) return anyString(rng, max);
  return anyString(rng, rng.int(Math.min(max, 20) + 1));
}

/** A list of type map holds each key once (the API server refuses a repeat): later repeats are dropped. */
function uniqueByMapKeys(schema: StructuralSchema, items: Json[]): Json[] {
  const keys = schema["x-kubernetes-list-map-keys"];
  if (schema["x-kubernetes-list-type"] !== "map" || keys === undefined) return items;
  const seen = new Set<string>();
  return items.filter((item) => {
    const key = JSON.stringify(keys.map((k) => (item as JsonObject)[k]));
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
