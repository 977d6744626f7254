// Mutations of a valid manifest: each breaks one thing the schema or a CEL rule says, at one place in the
// spec, or the name, or v1alpha1's conversion annotation.
import type { StructuralSchema } from "../../../src/api/crd.js";
import { LOST_FIELDS_ANNOTATION } from "../../../src/api/conversion/convert.js";
import { rulesOf } from "./cel-rules.js";
import type { Generator } from "./generator.js";
import { clone, isObject, showPath, type Json, type JsonObject, type Path } from "./json.js";
import { anyString, patternEntry } from "./patterns.js";
import { allPropertyNames } from "./schemas.js";

/** A place in the manifest: the value at `container[key]` and the schema that governs it. */
export interface Site {
  path: Path;
  schema: StructuralSchema;
  container: JsonObject | Json[];
  key: string | number;
}

function siteValue(site: Site): Json | undefined {
  return (site.container as Record<string | number, Json | undefined>)[site.key];
}

function setSite(site: Site, value: Json): void {
  (site.container as Record<string | number, Json>)[site.key] = value;
}

/** Every present value under `site` whose schema is known (not inside unknown fields). */
export function sitesUnder(site: Site, out: Site[] = []): Site[] {
  out.push(site);
  const value = siteValue(site);
  const { schema } = site;
  if (Array.isArray(value) && schema.items) {
    value.forEach((_, i) =>
      sitesUnder({ path: [...site.path, i], schema: schema.items!, container: value, key: i }, out),
    );
  } else if (isObject(value)) {
    for (const key of Object.keys(value)) {
      const child = schema.properties?.[key] ?? schema.additionalProperties;
      if (child) sitesUnder({ path: [...site.path, key], schema: child, container: value, key }, out);
    }
  }
  return out;
}

export interface Mutator {
  name: string;
  applies(site: Site): boolean;
  /** Mutates the manifest at `site`; returns what it did, or undefined when it could not. */
  apply(site: Site, g: Generator): string | undefined;
}

const typeOfSchema = (s: StructuralSchema): string =>
  s["x-kubernetes-int-or-string"] ? "int-or-string" : (s.type ?? "?");

/** Values of every JSON type, for wrong-type mutations; null is among them (the API server prunes it). */
const WRONG_TYPED: { type: string; values: Json[] }[] = [
  { type: "string", values: ["x", "", "1", "true", "null"] },
  { type: "integer", values: [0, 7, -3] },
  { type: "number", values: [1.5, -0.25, 1e20] },
  { type: "boolean", values: [true, false] },
  { type: "object", values: [{}, { a: 1 }] },
  { type: "array", values: [[], [1], ["x"]] },
  { type: "null", values: [null] },
];

function acceptsType(schema: StructuralSchema, type: string): boolean {
  const t = typeOfSchema(schema);
  if (t === "int-or-string") return type === "integer" || type === "string";
  if (t === "number") return type === "number" || type === "integer";
  return t === type;
}

export const MUTATORS: Mutator[] = [
  {
    name: "wrong type",
    applies: (site) => site.path.length > 1,
    apply(site, g) {
      const choices = WRONG_TYPED.filter((w) => !acceptsType(site.schema, w.type));
      const { values } = g.rng.pick(choices);
      const value = clone(g.rng.pick(values));
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (wrong type for ${typeOfSchema(site.schema)})`;
    },
  },
  {
    name: "integer out of range",
    applies: (site) => site.schema.type === "integer" || site.schema["x-kubernetes-int-or-string"] === true,
    apply(site, g) {
      const { minimum, maximum } = site.schema;
      const candidates: number[] = [1.5, -0.5, 1e20, -1e20, 2 ** 63, 2 ** 53];
      if (minimum !== undefined) candidates.push(minimum - 1, minimum - 1000, -(2 ** 53));
      if (maximum !== undefined) candidates.push(maximum + 1, maximum * 2 + 7);
      const value = g.rng.pick(candidates);
      setSite(site, value);
      return `${showPath(site.path)}: ${value} (range ${minimum ?? "-"}..${maximum ?? "-"})`;
    },
  },
  {
    name: "bad enum",
    applies: (site) => site.schema.enum !== undefined,
    apply(site, g) {
      const values = (site.schema.enum ?? []).map(String);
      const sample = g.rng.pick(values);
      const candidates = [
        "",
        sample.toLowerCase(),
        sample.toUpperCase(),
        `${sample} `,
        `${sample}x`,
        // The other version's spellings.
        "packed",
        "Spread",
        "balanced",
        "numa",
        "devfs",
        "GPU",
      ].filter((c) => !values.includes(c));
      const value = g.rng.pick(candidates);
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (not in ${values.join("|")})`;
    },
  },
  {
    name: "pattern mismatch",
    applies: (site) => site.schema.pattern !== undefined,
    apply(site, g) {
      const { pattern } = site.schema;
      const value = g.rng.pick(patternEntry(pattern!, site.path).invalid);
      if (new RegExp(pattern!).test(value))
        throw new Error(`config-gen: invalid sample ${value} matches ${pattern}`);
      setSite(site, value);
      return `${showPath(site.path)}: ${JSON.stringify(value)} (does not match ${pattern})`;
    },
  },
  {
    name: "string too long",
    applies: (site) => site.schema.type === "string" && site.schema.maxLength !== undefined,
    apply(site, g) {
      const n = site.schema.maxLength! + 1;
      // Matching the pattern where one of that length can: only the length is wrong then.
      const value =
        site.schema.pattern === undefined
          ? anyString(g.rng, n)
          : (patternEntry(site.schema.pattern, site.path).valid(g.rng, n) ?? "a".repeat(n));
      setSite(site, value);
      return `${showPath(site.path)}: ${n} characters (max ${site.schema.maxLength})`;
    },
  },
  {
    name: "string too short",
    applies: (site) => (site.schema.minLength ?? 0) > 0,
    apply(site) {
      setSite(site, "");
      return `${showPath(site.path)}: "" (min ${site.schema.minLength} characters)`;
    },
  },
  {
    name: "too many items",
    applies: (site) => site.schema.type === "array" && site.schema.maxItems !== undefined,
    apply(site, g) {
      const n = site.schema.maxItems! + 1;
      setSite(
        site,
        Array.from({ length: n }, (_, i) => g.gen(site.schema.items!, [...site.path, i])),
      );
      return `${showPath(site.path)}: ${n} items (max ${site.schema.maxItems})`;
    },
  },
  {
    name: "too few items",
    applies: (site) => (site.schema.minItems ?? 0) > 0,
    apply(site) {
      setSite(site, []);
      return `${showPath(site.path)}: [] (min ${site.schema.minItems} items)`;
    },
  },
  {
    name: "missing required",
    applies: (site) => (site.schema.required?.length ?? 0) > 0 && isObject(siteValue(site)),
    apply(site, g) {
      const key = g.rng.pick(site.schema.required!);
      const value = siteValue(site) as JsonObject;
      if (value[key] === undefined) return undefined;
      delete value[key];
      return `${showPath([...site.path, key])}: removed (required)`;
    },
  },
  {
    name: "unknown field",
    applies: (site) => site.schema.properties !== undefined && isObject(siteValue(site)),
    apply(site, g) {
      const value = siteValue(site) as JsonObject;
      const known = Object.keys(site.schema.properties!);
      const near = allPropertyNames().filter((n) => !known.includes(n));
      const sibling = g.rng.pick(known);
      const candidates = [
        ...near,
        "extra",
        `${sibling[0]!.toUpperCase()}${sibling.slice(1)}`,
        `${sibling}s`,
        "status",
        "apiVersion",
        "\u00fcnknown",
        "x-y",
      ].filter((n) => !known.includes(n));
      const key = g.rng.pick(candidates);
      value[key] = g.rng.pick<Json>(["x", 1, true, {}, [], { devices: 1 }]);
      return `${showPath([...site.path, key])}: unknown field`;
    },
  },
  {
    name: "CEL rule broken",
    applies: (site) =>
      (site.schema["x-kubernetes-validations"] ?? []).some(
        (r) => r.rule !== "self == oldSelf" && !r.rule.includes("oldSelf"),
      ),
    apply(site, g) {
      const rules = rulesOf(site.schema, site.path).filter((r) => r.handler.violate !== undefined);
      if (rules.length === 0) return undefined;
      const { handler, match } = g.rng.pick(rules);
      const result = handler.violate!(
        siteValue(site) ?? null,
        match,
        g.ruleContext(site.schema, site.path, rules),
      );
      if (!result) return undefined;
      setSite(site, result.value);
      return `${showPath(site.path)}: ${result.what}`;
    },
  },
];

/** Adds a valid value for one absent optional property somewhere, so mutations reach absent blocks too. */
export function materializeOptional(root: Site, g: Generator): string | undefined {
  const candidates = sitesUnder(root).flatMap((site) => {
    const value = siteValue(site);
    if (!isObject(value) || !site.schema.properties) return [];
    return Object.entries(site.schema.properties)
      .filter(([key]) => value[key] === undefined)
      .map(([key, schema]) => ({ site, key, schema }));
  });
  if (candidates.length === 0) return undefined;
  const { site, key, schema } = g.rng.pick(candidates);
  (siteValue(site) as JsonObject)[key] = g.gen(schema, [...site.path, key]);
  return `${showPath([...site.path, key])}: added`;
}

export const BAD_NAMES = ["Upper", "a_b", "-a", "a-", "a..b", "", "a".repeat(254), "a b", "\u00e4"];

function parseJsonObject(text: string): JsonObject | undefined {
  try {
    const value = JSON.parse(text) as Json;
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Mutations of the v1alpha1 conversion annotation (the fields v1alpha1 cannot express). */
export function mutateAnnotation(manifest: JsonObject, g: Generator): string {
  const metadata = manifest.metadata as JsonObject;
  const annotations = isObject(metadata.annotations) ? metadata.annotations : {};
  metadata.annotations = annotations;
  const current = annotations[LOST_FIELDS_ANNOTATION];
  const choices: [string, () => void][] = [
    ["not JSON", () => (annotations[LOST_FIELDS_ANNOTATION] = "{not json")],
    ["not an object", () => (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick(["[1]", '"x"', "null", "3"]))],
    [
      "restores an invalid field",
      () =>
        (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick([
          '{"spec":{"cdi":{"kind":"x"}}}',
          '{"spec":{"bogus":1}}',
          '{"spec":{"plugin":{"priorityClassName":5}}}',
          '{"spec":{"sharing":{"failRequestsGreaterThanOne":"yes"}}}',
        ])),
    ],
    [
      "contradicts the v1alpha1 fields",
      () =>
        (annotations[LOST_FIELDS_ANNOTATION] = g.rng.pick([
          '{"spec":{"resourceName":"other.example/x"}}',
          '{"spec":{"topology":{"allocationPolicy":"NUMAAligned"}}}',
          '{"spec":{"sharing":{"replicas":7,"strategy":"TimeSlicing"}}}',
        ])),
    ],
    ["removed", () => delete annotations[LOST_FIELDS_ANNOTATION]],
  ];
  const parsed = typeof current === "string" ? parseJsonObject(current) : undefined;
  if (parsed) {
    choices.push([
      "not canonical",
      () => (annotations[LOST_FIELDS_ANNOTATION] = JSON.stringify(parsed, null, 1)),
    ]);
  }
  const [what, apply] = g.rng.pick(choices);
  apply();
  return `metadata.annotations[${LOST_FIELDS_ANNOTATION}]: ${what}`;
}
