// JSON merge patches (RFC 7386) between plain JSON values: how the conversion records exactly what a
// v1alpha1 object cannot express, and restores it. Pure; values must not contain null, which a merge
// patch cannot set (the schemas have no nullable fields).

export type Json = string | number | boolean | null | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Deep equality of JSON values; object key order does not matter, array order does. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false;
  const keys = Object.keys(a).filter((k) => a[k] !== undefined);
  if (keys.length !== Object.keys(b).filter((k) => b[k] !== undefined).length) return false;
  return keys.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
}

/**
 * The smallest merge patch that turns `from` into `to`: changed or added keys carry their new value,
 * removed keys null; nested objects are diffed key by key, anything else is replaced whole.
 * Undefined values count as absent. Returns undefined when the two are equal.
 */
export function diffMergePatch(from: unknown, to: unknown): Json | undefined {
  if (jsonEqual(from, to)) return undefined;
  if (!isJsonObject(from) || !isJsonObject(to)) return structuredClone(to) as Json;
  const patch: JsonObject = {};
  for (const [key, value] of Object.entries(to)) {
    if (value === undefined) continue;
    const old = from[key];
    if (old === undefined) {
      patch[key] = structuredClone(value);
    } else {
      const inner = diffMergePatch(old, value);
      if (inner !== undefined) patch[key] = inner;
    }
  }
  for (const [key, value] of Object.entries(from)) {
    if (value !== undefined && to[key] === undefined) patch[key] = null;
  }
  return patch;
}

/** RFC 7386 MergePatch(target, patch); neither argument is modified. */
export function applyMergePatch(target: unknown, patch: Json): unknown {
  if (!isJsonObject(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isJsonObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}

/** JSON with object keys sorted at every level: equal patches always print the same text. */
export function canonicalJson(value: Json): string {
  return JSON.stringify(sortKeysDeep(value));
}

function sortKeysDeep(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (!isJsonObject(value)) return value;
  const out: JsonObject = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeysDeep(value[key] as Json);
  return out;
}

/** One leaf of a merge patch: the path of keys to it and the value it sets (null removes). */
export interface PatchLeaf {
  path: string[];
  value: Json;
}

/**
 * A merge patch split into leaves, in key order: each non-object value, and each empty object (which
 * creates an object). Applying the leaves one by one with `leafPatch` equals applying the patch.
 */
export function patchLeaves(patch: JsonObject, prefix: string[] = []): PatchLeaf[] {
  const leaves: PatchLeaf[] = [];
  for (const [key, value] of Object.entries(patch)) {
    const path = [...prefix, key];
    if (isJsonObject(value) && Object.keys(value).length > 0) leaves.push(...patchLeaves(value, path));
    else leaves.push({ path, value });
  }
  return leaves;
}

/** The merge patch that sets one leaf. */
export function leafPatch(leaf: PatchLeaf): JsonObject {
  let patch: Json = leaf.value;
  for (let i = leaf.path.length - 1; i >= 0; i--) patch = { [leaf.path[i] as string]: patch };
  return patch as JsonObject;
}
