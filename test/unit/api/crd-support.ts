// Helpers for the CRD tests: the repository's valid fixtures, a CRD's root and spec schemas, every schema node
// with its path, the node at a path, and structural defaulting as the API server applies it.
import { join } from "node:path";
import { type CustomResourceDefinition, type StructuralSchema } from "../../../src/api/crd.js";

export const repoRoot = join(import.meta.dirname, "..", "..", "..");
export const validDir = join(repoRoot, "test", "fixtures", "valid");

export function rootSchema(crd: CustomResourceDefinition): StructuralSchema {
  const [version] = crd.spec.versions;
  if (!version) throw new Error(`${crd.metadata.name} has no version`);
  return version.schema.openAPIV3Schema;
}

export function specSchema(crd: CustomResourceDefinition): StructuralSchema {
  const spec = rootSchema(crd).properties?.spec;
  if (!spec) throw new Error(`${crd.metadata.name} has no spec schema`);
  return spec;
}

export interface VisitedNode {
  path: string;
  node: Record<string, unknown>;
}

/** Every schema node with its path (`spec.backend.devFS.paths[*].glob`), walking the raw objects so nothing is hidden by types. */
export function walk(node: unknown, path: string, out: VisitedNode[] = []): VisitedNode[] {
  const record = node as Record<string, unknown>;
  out.push({ path, node: record });
  const properties = record.properties as Record<string, unknown> | undefined;
  for (const [name, child] of Object.entries(properties ?? {})) walk(child, `${path}.${name}`, out);
  if (typeof record.additionalProperties === "object") walk(record.additionalProperties, `${path}.*`, out);
  if (record.items !== undefined) walk(record.items, `${path}[*]`, out);
  return out;
}

/** Follows `a.b[*].c` through properties and items. */
export function schemaAt(schema: StructuralSchema, path: string): StructuralSchema {
  let node: StructuralSchema | undefined = schema;
  for (const part of path.split(".")) {
    const name = part.replace(/\[\*\]$/, "");
    node = node?.properties?.[name];
    if (part.endsWith("[*]")) node = node?.items;
  }
  if (!node) throw new Error(`no schema at ${path}`);
  return node;
}

/** Structural defaulting as the API server does it: a missing field with a default gets it, then defaults inside apply. */
export function applyDefaults(schema: StructuralSchema, value: unknown): unknown {
  if (Array.isArray(value)) {
    return (value as unknown[]).map((item) => (schema.items ? applyDefaults(schema.items, item) : item));
  }
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    if (out[name] === undefined && child.default !== undefined) out[name] = structuredClone(child.default);
    if (out[name] !== undefined) out[name] = applyDefaults(child, out[name]);
  }
  if (schema.additionalProperties) {
    for (const [name, child] of Object.entries(out))
      out[name] = applyDefaults(schema.additionalProperties, child);
  }
  return out;
}
