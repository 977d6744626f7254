// Validation of DevicePluginConfig manifests with field-path errors, shared by `dpo validate`, `dpo convert`,
// the plugin's config loader and the operator's reads. The runtime reads v1beta1 only; the offline tools
// accept v1alpha1 too.
import { parseAllDocuments } from "yaml";
import type { z } from "zod";
import {
  LOST_FIELDS_ANNOTATION,
  LOST_FIELDS_PATH,
  toV1alpha1,
  toV1beta1,
  type AlphaObject,
} from "./conversion/convert.js";
import { celStyleMessage } from "./issue-messages.js";
import { V1ALPHA1_API_VERSION, DevicePluginConfigV1alpha1Schema } from "./v1alpha1/config.js";
import type { DevicePluginConfigV1alpha1 } from "./v1alpha1/config.js";
import { API_VERSION, DevicePluginConfigSchema, type DevicePluginConfig } from "./v1beta1/config.js";
import { V1ALPHA1_BACKEND_MEMBER } from "./v1alpha1/spec.js";
import { BACKEND_MEMBER } from "./v1beta1/spec.js";

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

/** Every parse of a manifest words zod's own checks as the CRD's CEL rules word theirs. */
const PARSE = { error: celStyleMessage } as const;

function issuesToFieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  const errors: FieldError[] = [];
  for (const issue of issues) {
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        errors.push({ path: formatFieldPath([...issue.path, key]), message: "unknown field" });
      }
    } else {
      // A value that fits no branch of a union (maxUnavailable neither an integer nor a string) is reported
      // as the union's issue, at its path: its branches' own issues have paths relative to the union.
      errors.push({ path: formatFieldPath(issue.path), message: issue.message });
    }
  }
  return errors;
}

/**
 * A manifest as the API server reads it: a null member of an object (a field, or a map value) is as if
 * it were absent, since no field of these schemas is nullable (apiextensions-apiserver prunes such nulls,
 * or replaces them with the field's default, before validating). `healthFile:` with no value in YAML is
 * null. Nulls in lists stay, and are refused as there. Other values come back as they are.
 */
export function withoutNullFields<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => withoutNullFields(item)) as T;
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    if (member !== null) out[key] = withoutNullFields(member);
  }
  return out as T;
}

/** The manifest with its spec read as the API server reads it (withoutNullFields). */
function specWithoutNulls(obj: object): object {
  const spec = (obj as { spec?: unknown }).spec;
  return spec === undefined || spec === null ? obj : { ...obj, spec: withoutNullFields(spec) };
}

/** Validates an already parsed object as a DevicePluginConfig and applies the schema's defaults. */
export function validateDevicePluginConfig(obj: unknown): ValidationResult<DevicePluginConfig> {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    return { ok: false, errors: [{ path: "<root>", message: "must be an object" }] };
  }
  const result = DevicePluginConfigSchema.safeParse(specWithoutNulls(obj), PARSE);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, errors: issuesToFieldErrors(result.error.issues) };
}

/**
 * Validates an already parsed object as a v1alpha1 DevicePluginConfig. Besides the schema, the conversion
 * annotation (if any) must be a JSON object, restore only valid v1beta1 fields that do not contradict the
 * v1alpha1 ones, and read exactly as a conversion writes it: then v1alpha1 → v1beta1 → v1alpha1 gives the
 * object back unchanged.
 */
export function validateDevicePluginConfigV1alpha1(
  obj: unknown,
): ValidationResult<DevicePluginConfigV1alpha1> {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) {
    return { ok: false, errors: [{ path: "<root>", message: "must be an object" }] };
  }
  const read = specWithoutNulls(obj);
  const result = DevicePluginConfigV1alpha1Schema.safeParse(read, PARSE);
  if (!result.success) return { ok: false, errors: issuesToFieldErrors(result.error.issues) };
  const errors = lostFieldsErrors(read as AlphaObject);
  return errors.length === 0 ? { ok: true, value: result.data } : { ok: false, errors };
}

/**
 * Checks an object against the schema of the version its apiVersion names, without v1alpha1's checks of
 * the conversion annotation: the conversion webhook applies that annotation leniently (fields that
 * contradict the v1alpha1 ones are skipped) and checks the restored object instead.
 */
export function validateDevicePluginConfigSchemaOnly(obj: unknown): ValidationResult<unknown> {
  if (supportedApiVersionOf(obj) !== V1ALPHA1_API_VERSION) return validateDevicePluginConfig(obj);
  const result = DevicePluginConfigV1alpha1Schema.safeParse(
    typeof obj === "object" && obj !== null ? specWithoutNulls(obj) : obj,
    PARSE,
  );
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, errors: issuesToFieldErrors(result.error.issues) };
}

/** What is wrong with the conversion annotation of a schema-valid v1alpha1 object. */
function lostFieldsErrors(alpha: AlphaObject): FieldError[] {
  const raw = alpha.metadata.annotations?.[LOST_FIELDS_ANNOTATION];
  const at = (message: string): FieldError => ({ path: LOST_FIELDS_PATH, message });
  if (raw === undefined) return missingLostFieldsErrors(alpha).map(at);
  const beta = toV1beta1(alpha);
  if (!beta.ok) return [at(beta.problem)];
  if (beta.ignored.length > 0) {
    return beta.ignored.map((i) =>
      at(`would set ${i.field}, but ${i.reason}; remove it, or convert the v1beta1 original again`),
    );
  }
  const restored = validateDevicePluginConfig(beta.value);
  if (!restored.ok) return restored.errors.map((e) => at(`restores an invalid ${e.path}: ${e.message}`));
  const rewritten = toV1alpha1(beta.value).metadata.annotations?.[LOST_FIELDS_ANNOTATION];
  if (rewritten !== raw) {
    return [
      at(
        `is not what a conversion writes for this object: expected ${rewritten === undefined ? "no annotation" : `'${rewritten}'`}`,
      ),
    ];
  }
  return [];
}

/**
 * Without the annotation a v1alpha1 object is complete, except for a backend whose settings only v1beta1
 * can hold (NVIDIA): then the annotation must carry them. Messages for the annotation path.
 */
export function missingLostFieldsErrors(alpha: AlphaObject): string[] {
  if (alpha.metadata.annotations?.[LOST_FIELDS_ANNOTATION] !== undefined) return [];
  const type = alpha.spec.backend;
  if (!Object.hasOwn(V1ALPHA1_BACKEND_MEMBER, type) || V1ALPHA1_BACKEND_MEMBER[type] !== undefined) return [];
  const member = BACKEND_MEMBER[type];
  return [
    `must hold spec.backend.${member} when backend is ${type}: v1alpha1 has no member for it (write ${type} configs in ${API_VERSION}, or convert a v1beta1 one with dpo convert --to v1alpha1)`,
  ];
}

/** The dpo.dev API versions a manifest may use. */
export const SUPPORTED_API_VERSIONS = [API_VERSION, V1ALPHA1_API_VERSION] as const;
export type SupportedApiVersion = (typeof SUPPORTED_API_VERSIONS)[number];

/** A validated manifest of either version, with the version it uses. */
export type AnyVersionResult =
  | { ok: true; apiVersion: typeof API_VERSION; value: DevicePluginConfig }
  | { ok: true; apiVersion: typeof V1ALPHA1_API_VERSION; value: DevicePluginConfigV1alpha1 }
  | { ok: false; apiVersion: SupportedApiVersion | undefined; errors: FieldError[] };

/** The apiVersion of a manifest when it is one this API serves. */
export function supportedApiVersionOf(obj: unknown): SupportedApiVersion | undefined {
  const version =
    typeof obj === "object" && obj !== null ? (obj as { apiVersion?: unknown }).apiVersion : undefined;
  return SUPPORTED_API_VERSIONS.find((v) => v === version);
}

/** Validates a DevicePluginConfig in whichever version its apiVersion names, for the offline tools. */
export function validateAnyVersion(obj: unknown): AnyVersionResult {
  const apiVersion = supportedApiVersionOf(obj);
  if (apiVersion === V1ALPHA1_API_VERSION) {
    const r = validateDevicePluginConfigV1alpha1(obj);
    return r.ok ? { ok: true, apiVersion, value: r.value } : { ok: false, apiVersion, errors: r.errors };
  }
  const r = validateDevicePluginConfig(obj);
  if (r.ok) return { ok: true, apiVersion: API_VERSION, value: r.value };
  const errors = r.errors.map((e) =>
    e.path === "apiVersion"
      ? { path: e.path, message: `must be one of ${SUPPORTED_API_VERSIONS.join(", ")}` }
      : e,
  );
  return { ok: false, apiVersion, errors };
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
