// The spec schemas of both served versions, from the CRD, and the check that the generator can write
// every node of them.
import { devicePluginConfigCrd, type StructuralSchema } from "../../../src/api/crd.js";
import { mulberry32 } from "../rng.js";
import { rulesOf } from "./cel-rules.js";
import { FuzzRng } from "./fuzz-rng.js";
import { Generator } from "./generator.js";
import { showPath, type Path } from "./json.js";

export const GROUP = "dpo.dev";
export const FUZZ_VERSIONS = ["v1beta1", "v1alpha1"] as const;
export type FuzzVersion = (typeof FUZZ_VERSIONS)[number];

const SPEC_SCHEMAS = new Map<FuzzVersion, StructuralSchema>();

/** The spec schema of a served version, from the CRD exactly as `make manifests` writes it. */
export function specSchema(version: FuzzVersion): StructuralSchema {
  let schema = SPEC_SCHEMAS.get(version);
  if (!schema) {
    const served = devicePluginConfigCrd().spec.versions.find((v) => v.name === version);
    schema = served?.schema.openAPIV3Schema.properties?.spec;
    if (!schema) throw new Error(`config-gen: the CRD serves no ${version} spec`);
    SPEC_SCHEMAS.set(version, schema);
  }
  return schema;
}

/**
 * Checks that the generator can write every node of both spec schemas: a valid string for every
 * `pattern` (PATTERNS), a way to satisfy every CEL rule (CEL_RULES) and values for every int-or-string.
 * Throws naming the first node it cannot; returns how many patterns and rules it saw.
 */
export function checkSchemaCoverage(): { patterns: number; rules: number } {
  const rng = new FuzzRng(mulberry32(1));
  const patterns = new Set<string>();
  let rules = 0;
  const walk = (s: StructuralSchema | undefined, path: Path): void => {
    if (!s) return;
    const bound = rulesOf(s, path);
    rules += bound.length;
    if (s.pattern !== undefined) {
      patterns.add(s.pattern);
      new Generator(rng).string(s, path, s.minLength ?? 1);
    }
    if (s["x-kubernetes-int-or-string"] && !bound.some((r) => r.handler.generate !== undefined)) {
      throw new Error(`config-gen: int-or-string at ${showPath(path)} has no generating CEL rule`);
    }
    for (const [k, child] of Object.entries(s.properties ?? {})) walk(child, [...path, k]);
    walk(s.items, [...path, 0]);
    walk(s.additionalProperties, [...path, "*"]);
  };
  for (const v of FUZZ_VERSIONS) walk(specSchema(v), ["spec"]);
  return { patterns: patterns.size, rules };
}

/** Every property name either version knows, for near-miss unknown fields (`devfs` in v1beta1). */
export function allPropertyNames(): string[] {
  const names = new Set<string>();
  const walk = (s: StructuralSchema | undefined): void => {
    if (!s) return;
    for (const [k, child] of Object.entries(s.properties ?? {})) {
      names.add(k);
      walk(child);
    }
    walk(s.items);
    walk(s.additionalProperties);
  };
  for (const v of FUZZ_VERSIONS) walk(specSchema(v));
  return [...names].sort();
}
