// Validation of DevicePluginConfig manifests with field-path errors, shared by `dpo validate`,
// the plugin's config loader and the operator's reads.
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "./v1beta1/config.js";

/** One problem with a manifest, located by its field path (`spec.sharing.replicas`). */
export interface FieldError {
  path: string;
  message: string;
}

export type ValidationResult<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/** Formats a path the way kubectl and the API server do: `spec.devFS.paths[0].glob`. */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out === "" ? "<root>" : out;
}

function issuesToFieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  const errors: FieldError[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        errors.push({ path: formatFieldPath([...issue.path, key]), message: "unknown field" });
      }
    } else if (issue.code === "invalid_union" && issue.errors.length > 0) {
      errors.push(...issuesToFieldErrors(issue.errors.flat()));
    } else {
      errors.push({ path: formatFieldPath(issue.path), message: issue.message });
    }
  }
  return errors;
}

/** Validates an already parsed object as a DevicePluginConfig and applies the schema's defaults. */
export function validateDevicePluginConfig(obj: unknown): ValidationResult<DevicePluginConfig> {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    return { ok: false, errors: [{ path: "<root>", message: "must be an object" }] };
  }
  const result = DevicePluginConfigSchema.safeParse(obj);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, errors: issuesToFieldErrors(result.error.issues) };
}

/** A manifest document parsed from YAML (JSON is YAML too), or the reason it could not be parsed. */
export type ParsedDocument =
  { ok: true; value: unknown; index: number } | { ok: false; index: number; error: string };

/** Splits a YAML stream into documents; empty documents (`---` separators only) are skipped. */
export function parseManifestDocuments(text: string): ParsedDocument[] {
  const out: ParsedDocument[] = [];
  parseAllDocuments(text, { prettyErrors: true, uniqueKeys: true }).forEach((doc, index) => {
    if ("errors" in doc && doc.errors.length > 0) {
      out.push({ ok: false, index, error: doc.errors.map((e) => e.message).join("; ") });
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return;
    out.push({ ok: true, value, index });
  });
  return out;
}

/**
 * Reads exactly one DevicePluginConfig from a manifest text, as the plugin does with its --config.
 * A stream with zero or several documents is an error: the plugin serves one config.
 */
export function loadDevicePluginConfig(text: string): ValidationResult<DevicePluginConfig> {
  const docs = parseManifestDocuments(text);
  const broken = docs.find((d) => !d.ok);
  if (broken && !broken.ok) {
    return { ok: false, errors: [{ path: "<document>", message: `YAML: ${broken.error}` }] };
  }
  if (docs.length !== 1) {
    return {
      ok: false,
      errors: [
        { path: "<document>", message: `expected exactly one DevicePluginConfig, found ${docs.length}` },
      ],
    };
  }
  const [doc] = docs;
  return validateDevicePluginConfig(doc?.ok ? doc.value : undefined);
}
