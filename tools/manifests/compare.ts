// Compares two renderings of the same manifests (Helm's and kustomize's) object by object, field by field.
import { isDeepStrictEqual } from "node:util";

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

/** `Kind namespace/name`, or `Kind name` for a cluster-scoped object: what identifies an object here. */
export function objectKey(object: KubeObject): string {
  const { namespace, name } = object.metadata;
  return namespace ? `${object.kind} ${namespace}/${name}` : `${object.kind} ${name}`;
}

/** A copy of `object` without the given metadata.labels keys (and without labels when none is left). */
export function withoutLabels(object: KubeObject, keys: readonly string[]): KubeObject {
  const copy = structuredClone(object);
  const labels = copy.metadata.labels;
  if (!labels) return copy;
  for (const key of keys) delete labels[key];
  if (Object.keys(labels).length === 0) delete copy.metadata.labels;
  return copy;
}

function describeValue(value: unknown): string {
  return value === undefined ? "nothing" : JSON.stringify(value);
}

function diffValues(path: string, expected: unknown, actual: unknown, out: string[]): void {
  if (isDeepStrictEqual(expected, actual)) return;
  const bothObjects =
    typeof expected === "object" &&
    typeof actual === "object" &&
    expected !== null &&
    actual !== null &&
    Array.isArray(expected) === Array.isArray(actual);
  if (!bothObjects) {
    out.push(`${path}: expected ${describeValue(expected)}, got ${describeValue(actual)}`);
    return;
  }
  if (Array.isArray(expected) && Array.isArray(actual) && expected.length !== actual.length) {
    out.push(`${path}: expected ${expected.length} items, got ${actual.length}`);
  }
  const e = expected as Record<string, unknown>;
  const a = actual as Record<string, unknown>;
  for (const key of new Set([...Object.keys(e), ...Object.keys(a)])) {
    const child = Array.isArray(expected) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    diffValues(child, e[key], a[key], out);
  }
}

function byKey(objects: readonly KubeObject[], side: string, out: string[]): Map<string, KubeObject> {
  const map = new Map<string, KubeObject>();
  for (const object of objects) {
    const key = objectKey(object);
    if (map.has(key)) out.push(`${side} has ${key} twice`);
    map.set(key, object);
  }
  return map;
}

/**
 * Every difference between two renderings, one line each: objects only one side has (by kind, namespace
 * and name), and for the others each field that differs, by path. Empty when they are the same objects.
 */
export function diffRenderings(expected: readonly KubeObject[], actual: readonly KubeObject[]): string[] {
  const out: string[] = [];
  const want = byKey(expected, "expected", out);
  const got = byKey(actual, "actual", out);
  for (const key of want.keys()) if (!got.has(key)) out.push(`missing: ${key}`);
  for (const key of got.keys()) if (!want.has(key)) out.push(`unexpected: ${key}`);
  for (const [key, object] of want) {
    const other = got.get(key);
    if (!other) continue;
    const fields: string[] = [];
    diffValues("", object, other, fields);
    out.push(...fields.map((line) => `${key}: ${line}`));
  }
  return out;
}
