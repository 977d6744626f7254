// Seeded DevicePluginConfig manifests for config fuzzing, derived from the CRD's structural schemas (the
// schemas the API server enforces, generated from the zod schemas in src/api), in both served versions,
// then mutated. Pure: one (seed, index) pair always gives the same manifest, so a failing case replays.
//
// The structural schema says types, enums, bounds, lengths, list sizes and required members; what it
// cannot say in a form a generator can use is kept in two tables keyed by the schema's own text:
// PATTERNS (how to write a string that matches, and some that do not, for every `pattern`) and
// CEL_RULES (how to satisfy and how to break every `x-kubernetes-validations` rule). A schema that gains
// a pattern or a rule neither table knows makes the generator throw, so it never silently stops covering
// part of the API.
//
// This file makes the cases; config-gen/ holds the parts: patterns.ts (PATTERNS and the strings),
// cel-rules.ts (CEL_RULES), generator.ts (valid values from a schema), schemas.ts (the schemas and the
// check that both tables cover them) and mutations.ts (what breaks a valid manifest).
import { toV1alpha1, type BetaObject } from "../../src/api/conversion/convert.js";
import { mulberry32 } from "./rng.js";
import { FuzzRng } from "./config-gen/fuzz-rng.js";
import { Generator } from "./config-gen/generator.js";
import { isObject, text, type JsonObject } from "./config-gen/json.js";
import {
  BAD_NAMES,
  materializeOptional,
  MUTATORS,
  mutateAnnotation,
  sitesUnder,
  type Site,
} from "./config-gen/mutations.js";
import { GROUP, specSchema, type FuzzVersion } from "./config-gen/schemas.js";

export { codePoints, showPath, type Json, type JsonObject } from "./config-gen/json.js";
export {
  checkSchemaCoverage,
  FUZZ_VERSIONS,
  GROUP,
  specSchema,
  type FuzzVersion,
} from "./config-gen/schemas.js";

/** One generated manifest and how it was made. */
export interface ConfigCase {
  seed: number;
  index: number;
  version: FuzzVersion;
  manifest: JsonObject;
  /** How the valid base was made, then one entry per mutation (empty when none). */
  origin: string;
  mutations: string[];
}

/** The names of generated objects: unique per seed and index, so cases never collide on a cluster. */
export function caseName(seed: number, index: number): string {
  return `cf-${seed.toString(36)}-${index}`;
}

/** One random stream per case, so any case regenerates alone from (seed, index). */
function caseRng(seed: number, index: number): FuzzRng {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return new FuzzRng(mulberry32((h ^ (h >>> 16)) >>> 0));
}

function manifestOf(version: FuzzVersion, name: string, spec: JsonObject): JsonObject {
  return { apiVersion: `${GROUP}/${version}`, kind: "DevicePluginConfig", metadata: { name }, spec };
}

/** A valid v1beta1 spec; `type` pins the backend. */
function betaSpec(g: Generator, type?: string): JsonObject {
  const schema = specSchema("v1beta1");
  for (;;) {
    const spec = g.gen(schema, ["spec"]) as JsonObject;
    if (type === undefined || (spec.backend as JsonObject).type === type) return spec;
  }
}

/**
 * A valid base manifest. v1alpha1 comes two ways: from its own schema (Mock, DevFS, PCI), or as the
 * conversion of a valid v1beta1 manifest, which carries what v1alpha1 cannot say (NVIDIA settings, cdi,
 * plugin resources, ...) in the conversion annotation; v1alpha1 NVIDIA configs exist only that way.
 */
function base(g: Generator, version: FuzzVersion, name: string): { manifest: JsonObject; origin: string } {
  if (version === "v1beta1") {
    const spec = betaSpec(g);
    return {
      manifest: manifestOf(version, name, spec),
      origin: `v1beta1 ${text((spec.backend as JsonObject).type)}`,
    };
  }
  if (g.rng.chance(0.5)) {
    const spec = g.gen(specSchema("v1alpha1"), ["spec"]) as JsonObject;
    if (spec.backend !== "NVIDIA") {
      return {
        manifest: manifestOf(version, name, spec),
        origin: `v1alpha1 ${text(spec.backend)} (schema)`,
      };
    }
  }
  const beta = manifestOf("v1beta1", name, betaSpec(g, g.rng.chance(0.4) ? "NVIDIA" : undefined));
  const alpha = toV1alpha1(beta as unknown as BetaObject) as unknown as JsonObject;
  const converted = alpha.metadata && isObject(alpha.metadata) && isObject(alpha.metadata.annotations);
  return {
    manifest: JSON.parse(JSON.stringify(alpha)) as JsonObject,
    origin: `v1alpha1 ${text((alpha.spec as JsonObject).backend)} (converted from v1beta1${converted ? ", with annotation" : ""})`,
  };
}

/**
 * Case `index` of a run: about a third valid as generated, the rest with one to three mutations. Pure:
 * the same (seed, index) always gives the same case.
 */
export function generateConfigCase(seed: number, index: number): ConfigCase {
  const g = new Generator(caseRng(seed, index));
  const { rng } = g;
  const version: FuzzVersion = rng.chance(0.5) ? "v1beta1" : "v1alpha1";
  const { manifest, origin } = base(g, version, caseName(seed, index));
  const mutations: string[] = [];
  const r = rng.next();
  const count = r < 0.33 ? 0 : r < 0.78 ? 1 : 2 + rng.int(2);
  const root: Site = { path: ["spec"], schema: specSchema(version), container: manifest, key: "spec" };
  for (let i = 0; i < count; i++) {
    const kind = rng.next();
    if (kind < 0.04) {
      const name = rng.pick(BAD_NAMES);
      (manifest.metadata as JsonObject).name = name;
      mutations.push(
        `metadata.name: ${JSON.stringify(name.length > 40 ? `${name.slice(0, 20)}...(${name.length})` : name)}`,
      );
      continue;
    }
    if (kind < 0.12 && version === "v1alpha1") {
      mutations.push(mutateAnnotation(manifest, g));
      continue;
    }
    if (rng.chance(0.3)) {
      const added = materializeOptional(root, g);
      if (added) mutations.push(added);
    }
    const sites = sitesUnder(root);
    for (let attempt = 0; attempt < 20; attempt++) {
      const mutator = rng.pick(MUTATORS);
      const applicable = sites.filter((s) => mutator.applies(s));
      if (applicable.length === 0) continue;
      const what = mutator.apply(rng.pick(applicable), g);
      if (what) {
        mutations.push(`${mutator.name}: ${what}`);
        break;
      }
    }
  }
  return { seed, index, version, manifest, origin, mutations };
}

/** Cases [from, from + count) of a run. */
export function generateConfigCases(seed: number, count: number, from = 0): ConfigCase[] {
  return Array.from({ length: count }, (_, i) => generateConfigCase(seed, from + i));
}
