// The three judges of a fuzzed DevicePluginConfig manifest, and the rules they must agree by:
//
//   dpo validate  the CLI's own pipeline in process (parseManifestDocuments, then validateAnyVersion, as
//                 validateFiles does for each document), on the manifest as YAML text; the fuzz run also
//                 checks a sample against the built CLI itself (validateCliLines).
//   API server    a server-side dry-run create (fieldValidation=Strict, as kubectl and server-side apply
//                 send) against the CRD in the manifest's version: structural schema, defaults, pruning,
//                 CEL, and for v1alpha1 the conversion webhook to the stored v1beta1.
//   plugin loader only for manifests the API server accepted, since the plugin never sees another: the
//                 stored v1beta1 object as the operator reads it, checked by the operator's own parse
//                 (validateDevicePluginConfig, as the reconciler does), rendered into the plugin
//                 ConfigMap (renderPluginConfigData) and read back by `dpo plugin --config`'s loader
//                 (loadDevicePluginConfig). It must accept, and read exactly the spec the operator parsed
//                 and the spec dpo validate gives the manifest after defaulting (minus spec.upgrade, which
//                 the operator keeps to itself).
import type { KubeConfig } from "@kubernetes/client-node";
import { LOST_FIELDS_PATH, toV1beta1, type AlphaObject } from "../../src/api/conversion/convert.js";
import { jsonEqual } from "../../src/api/conversion/merge-patch.js";
import {
  loadDevicePluginConfig,
  parseManifestDocuments,
  validateAnyVersion,
  validateDevicePluginConfig,
  withoutNullFields,
  type FieldError,
} from "../../src/api/validate.js";
import { documentIdentity, verdictLabel } from "../../src/cli/validate.js";
import { PLUGIN_CONFIG_KEY } from "../../src/contract/plugin-config.js";
import { stringifyExact } from "../../src/api/yaml-text.js";
import { ConflictError, KubeApiError, NotFoundError } from "../../src/kube/errors.js";
import { kubeRequest } from "../../src/kube/request.js";
import { pluginSpecOf, renderPluginConfigData } from "../../src/operator/render/configmap.js";
import type { StructuralSchema } from "../../src/api/crd.js";
import type { DevicePluginConfigSpec } from "../../src/api/v1beta1/spec.js";
import {
  GROUP,
  specSchema,
  type ConfigCase,
  type FuzzVersion,
  type Json,
  type JsonObject,
} from "./config-gen.js";

// ---------------------------------------------------------------------------------------------------------
// Field paths

/** What the API server writes after a path in its messages: `spec.x: Invalid value: ...`. */
const API_REASON_SUFFIX =
  /: (Invalid value|Required value|Unsupported value|Forbidden|Too long|Too many|Duplicate value|Not found|Internal error)\b.*$/s;

/**
 * The one place where field-path spellings are made comparable. The API server names a field as
 * `spec.sharing.replicas` in Status causes, as `.spec.sharing.replicas` in CEL fieldPaths and some messages,
 * and as `spec.sharing.replicas: Invalid value: ...` inside messages; dpo validate as
 * `spec.sharing.replicas`. Both index lists as `[0]` and join map keys with dots
 * (`spec.nodeSelector.feature.example/foo`), so nothing else is rewritten. The API server's `<nil>` (the
 * note that CEL rules were skipped after schema errors) names no field: undefined.
 */
export function normalizeFieldPath(raw: string): string | undefined {
  const path = raw.trim().replace(API_REASON_SUFFIX, "").replace(/^\./, "");
  return path === "" || path === "<nil>" ? undefined : path;
}

// ---------------------------------------------------------------------------------------------------------
// Judge 1: dpo validate

export interface DpoVerdict {
  accepted: boolean;
  errors: FieldError[];
  /** The manifest's spec as v1beta1 after defaulting, when valid (v1alpha1 through the conversion). */
  betaSpec?: unknown;
}

/** The manifest as the YAML text a user would write (and `dpo validate` reads). */
export function manifestYaml(manifest: JsonObject): string {
  // The text must be the manifest, or the judges see different inputs: yaml's own writer can get a
  // double-quoted string wrong (src/api/yaml-text.ts).
  return stringifyExact(manifest, { lineWidth: 0 });
}

export function judgeDpoValidate(text: string): DpoVerdict {
  const docs = parseManifestDocuments(text);
  const [doc] = docs;
  if (docs.length !== 1 || !doc) throw new Error(`expected one YAML document, found ${docs.length}`);
  if (!doc.ok) return { accepted: false, errors: [{ path: "<document>", message: `YAML: ${doc.error}` }] };
  const result = validateAnyVersion(doc.value);
  if (!result.ok) return { accepted: false, errors: result.errors };
  return { accepted: true, errors: [], betaSpec: betaSpecOf(doc.value) };
}

/** The v1beta1 spec dpo gives a valid manifest: its own for v1beta1, the conversion's for v1alpha1. */
function betaSpecOf(manifest: unknown): unknown {
  const alpha = (manifest as { apiVersion?: unknown }).apiVersion === `${GROUP}/v1alpha1`;
  // Null fields are absent to dpo validate, as to the API server (withoutNullFields).
  const read = withoutNullFields(manifest);
  const beta = alpha ? toV1beta1(read as AlphaObject) : { ok: true as const, value: read };
  if (!beta.ok)
    throw new Error(`dpo validate accepted a v1alpha1 manifest its conversion refuses: ${beta.error}`);
  const parsed = validateDevicePluginConfig(beta.value);
  if (!parsed.ok) {
    throw new Error(
      `dpo validate accepted a manifest whose v1beta1 form is invalid: ${JSON.stringify(parsed.errors)}`,
    );
  }
  return parsed.value.spec;
}

/**
 * What `dpo validate FILE` prints for a verdict (src/cli/validate.ts), for the CLI sample: the verdict line
 * on stdout, the problems on stderr, each named by the file and the manifest's kind and name.
 */
export function validateCliLines(
  file: string,
  version: FuzzVersion,
  verdict: DpoVerdict,
  manifest: unknown,
): { stdout: string[]; stderr: string[] } {
  const where = verdictLabel({ file, ...documentIdentity(manifest) });
  const label = ` (${GROUP}/${version})`;
  if (verdict.accepted) return { stdout: [`${where}: valid${label}`], stderr: [] };
  return {
    stdout: [`${where}: invalid${label}`],
    stderr: verdict.errors.map((e) => `${where}: ${e.path}: ${e.message}`),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Judge 2: the API server

export interface ApiVerdict {
  accepted: boolean;
  /** Normalised field paths the refusal names. */
  paths: string[];
  /** Those of them named as unknown fields by strict decoding. */
  unknownFields: string[];
  /** Those of them named as lists with too many items. */
  tooMany: string[];
  /** The API server's message, for reports. */
  message: string;
  /** The object the dry run returns (defaulted, pruned, in the request's version). */
  object?: JsonObject;
}

function collection(version: string): string {
  return ["", "apis", GROUP, version, "devicepluginconfigs"].join("/");
}

/** `DevicePluginConfig <name> (objects[0], dpo.dev/v1alpha1): <path>: <message>` from the conversion webhook. */
const WEBHOOK_PROBLEM = /\(objects\[\d+\], [^)]*\): (.*)$/s;

/**
 * The field paths of a refusal. Schema and CEL errors come as Status causes (422). Unknown fields come as
 * a strict decoding error (400) listing each `unknown field "spec.x"`; the API server decodes before it
 * validates, so such a refusal names the unknown fields only. A refusal by the conversion webhook (for
 * v1alpha1) comes as the webhook's message, `...(objects[0], version): path: message[; path: message]`.
 */
export function refusalPaths(error: KubeApiError): Pick<ApiVerdict, "paths" | "unknownFields" | "tooMany"> {
  const paths = new Set<string>();
  const unknownFields = new Set<string>();
  const tooMany = new Set<string>();
  for (const cause of error.causes) {
    const p = cause.field === undefined ? undefined : normalizeFieldPath(cause.field);
    if (p === undefined) continue;
    paths.add(p);
    if (cause.reason === "FieldValueTooMany") tooMany.add(p);
  }
  for (const m of error.message.matchAll(/(unknown|duplicate) field "([^"]*)"/g)) {
    const p = normalizeFieldPath(m[2]!);
    if (p === undefined) continue;
    paths.add(p);
    if (m[1] === "unknown") unknownFields.add(p);
  }
  const webhook = WEBHOOK_PROBLEM.exec(error.message);
  if (webhook) {
    for (const problem of webhook[1]!.split("; ")) {
      const p = /^([^\s:]+): /.exec(problem)?.[1];
      if (p !== undefined && (p.startsWith("spec") || p.startsWith("metadata")))
        paths.add(normalizeFieldPath(p)!);
    }
  }
  return { paths: [...paths], unknownFields: [...unknownFields], tooMany: [...tooMany] };
}

/** Requests that had to be sent again, counted for the run's summary. */
export interface Retries {
  count: number;
}

/** Attempts per request: an answer that is no verdict on the manifest is retried, never judged. */
const ATTEMPTS = 3;

/** Errors that are no verdict on the manifest: no answer, throttling, an unavailable server. */
function isTransport(err: unknown): boolean {
  if (!(err instanceof KubeApiError)) return false;
  if (err.code === 0 || err.code === 429 || err.code === 503 || err.code === 504) return true;
  return err.code >= 500 && !WEBHOOK_PROBLEM.test(err.message);
}

async function retrying<T>(retries: Retries, send: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send(attempt);
    } catch (err) {
      if (attempt >= ATTEMPTS || !isTransport(err)) throw err;
      retries.count++;
    }
  }
}

export async function judgeApiServer(
  kc: KubeConfig,
  version: FuzzVersion,
  manifest: JsonObject,
  retries: Retries = { count: 0 },
): Promise<ApiVerdict> {
  try {
    const object = await retrying(retries, () =>
      kubeRequest<JsonObject>(kc, {
        method: "POST",
        path: collection(version),
        query: { dryRun: "All", fieldValidation: "Strict" },
        body: manifest,
      }),
    );
    return { accepted: true, paths: [], unknownFields: [], tooMany: [], message: "", object };
  } catch (err) {
    if (!(err instanceof KubeApiError) || isTransport(err)) throw err;
    return { accepted: false, ...refusalPaths(err), message: err.message };
  }
}

/**
 * The stored v1beta1 object of a manifest the API server accepted, as the operator's informer reads it.
 * For v1beta1 that is the dry run's answer (the stored version). A v1alpha1 object is converted for
 * storage by the webhook, and a dry run answers in v1alpha1, so it is created for real, read back as
 * v1beta1 and deleted. (Its name is the run's own: an AlreadyExists or NotFound can only come from a
 * retried request that had gone through.)
 */
export async function storedV1beta1(
  kc: KubeConfig,
  c: ConfigCase,
  api: ApiVerdict,
  retries: Retries = { count: 0 },
): Promise<JsonObject> {
  if (c.version === "v1beta1") return api.object!;
  const name = (c.manifest.metadata as JsonObject).name as string;
  const object = `${collection("v1beta1")}/${name}`;
  await retrying(retries, (attempt) =>
    kubeRequest(kc, {
      method: "POST",
      path: collection(c.version),
      query: { fieldValidation: "Strict" },
      body: c.manifest,
    }).catch((err: unknown) => {
      if (!(attempt > 1 && err instanceof ConflictError && err.alreadyExists)) throw err;
    }),
  );
  try {
    return await retrying(retries, () => kubeRequest<JsonObject>(kc, { method: "GET", path: object }));
  } finally {
    await retrying(retries, (attempt) =>
      kubeRequest(kc, { method: "DELETE", path: object }).catch((err: unknown) => {
        if (!(attempt > 1 && err instanceof NotFoundError)) throw err;
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------------------
// Judge 3: the plugin's loader

export interface LoaderVerdict {
  accepted: boolean;
  problems: string[];
}

/** What the plugin makes of an object the API server stored; `dpoSpec` is dpo validate's defaulted spec. */
export function judgeLoader(stored: JsonObject, dpoSpec: unknown): LoaderVerdict {
  const problems: string[] = [];
  const operator = validateDevicePluginConfig(stored);
  if (!operator.ok) {
    return {
      accepted: false,
      problems: [`the operator refuses the stored object: ${fieldErrors(operator.errors)}`],
    };
  }
  const text = renderPluginConfigData(operator.value)[PLUGIN_CONFIG_KEY]!;
  const loaded = loadDevicePluginConfig(text);
  if (!loaded.ok) {
    return {
      accepted: false,
      problems: [`the plugin refuses its rendered config: ${fieldErrors(loaded.errors)}`],
    };
  }
  // spec.upgrade, targeting, the pod's own settings and the DeviceClass's extended resource are the
  // operator's and the kubelet's: the rendered config leaves them out, and the plugin reads them defaulted.
  const rendered = pluginSpecOf(operator.value.spec);
  const read = pluginSpecOf(loaded.value.spec);
  if (!jsonEqual(read, rendered)) {
    problems.push(
      `the plugin reads another spec than the operator rendered: ${jsonDifferences(read, rendered).join("; ")}`,
    );
  }
  // Without a spec from dpo validate (it refused: a disagreement reported on its own) there is nothing to compare.
  if (dpoSpec !== undefined) {
    // dpo validate prints the spec as its schema defaults it, the type pluginSpecOf takes.
    const offline = pluginSpecOf(dpoSpec as DevicePluginConfigSpec);
    if (!jsonEqual(read, offline)) {
      problems.push(
        `the plugin reads another spec than dpo validate gives the manifest (plugin vs dpo): ${jsonDifferences(read, offline).join("; ")}`,
      );
    }
  }
  if (loaded.value.metadata.name !== (stored.metadata as JsonObject).name)
    problems.push("the plugin reads another name");
  return { accepted: true, problems };
}

/** Where two JSON values differ, as `path: a ≠ b` (at most a few), for reports. */
export function jsonDifferences(a: unknown, b: unknown, path = "spec", out: string[] = []): string[] {
  if (out.length >= 5 || jsonEqual(a, b)) return out;
  const bothObjects = typeof a === "object" && a !== null && typeof b === "object" && b !== null;
  if (!bothObjects || Array.isArray(a) !== Array.isArray(b)) {
    out.push(`${path}: ${JSON.stringify(a) ?? "absent"} vs ${JSON.stringify(b) ?? "absent"}`);
    return out;
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    jsonDifferences(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      Array.isArray(a) ? `${path}[${k}]` : `${path}.${k}`,
      out,
    );
  }
  return out;
}

function fieldErrors(errors: readonly FieldError[]): string {
  return errors.map((e) => `${e.path}: ${e.message}`).join("; ");
}

// ---------------------------------------------------------------------------------------------------------
// Agreement

/**
 * dpo validate checks the v1alpha1 conversion annotation more strictly than the API server, on purpose
 * (test/integration/crd-admission.test.ts, OFFLINE_ONLY): an annotation that contradicts the v1alpha1
 * fields is what any edit through v1alpha1 leaves behind, so the webhook skips the contradicted fields
 * with a warning, and one that is not byte for byte what a conversion writes still converts; dpo validate
 * flags both so a repository can be cleaned up. Exactly those two messages, at the annotation, and
 * nothing else, make an offline-only refusal.
 */
export function offlineOnlyLint(errors: readonly FieldError[]): boolean {
  return (
    errors.length > 0 &&
    errors.every(
      (e) =>
        e.path === LOST_FIELDS_PATH &&
        (/^would set \S+, but it contradicts the v1alpha1 fields;/.test(e.message) ||
          e.message.startsWith("is not what a conversion writes for this object")),
    )
  );
}

/**
 * An object given where a scalar belongs (`image: {a: 1}`): strict decoding prunes against the schema,
 * which has no members below a string, so the API server refuses `unknown field "spec.image.a"` before
 * any validation could say the type is wrong, while dpo validate says `spec.image: ... received object`.
 * Both name the same value, one from inside it. So an unknown field matches when dpo validate names an
 * enclosing field whose value in the manifest is an object and whose schema is not an object's; any
 * other unknown field must be named as it is.
 */
export function memberOfMistypedObject(
  unknownField: string,
  errors: readonly FieldError[],
  manifest: JsonObject,
  spec: StructuralSchema,
): boolean {
  return errors.some((e) => {
    const enclosing = normalizeFieldPath(e.path);
    if (enclosing === undefined || !unknownField.startsWith(`${enclosing}.`)) return false;
    return valuesAt(manifest, spec, enclosing).some(
      ({ value, schema }) => isObject(value) && schema.type !== "object",
    );
  });
}

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The values (with their schemas) a field path names in a manifest. Map keys may hold dots, so the
 * path is matched against the keys actually there, every way it splits.
 */
export function valuesAt(
  manifest: JsonObject,
  spec: StructuralSchema,
  path: string,
): { value: Json; schema: StructuralSchema }[] {
  if (path !== "spec" && !path.startsWith("spec.") && !path.startsWith("spec[")) return [];
  const out: { value: Json; schema: StructuralSchema }[] = [];
  const walk = (value: Json | undefined, schema: StructuralSchema | undefined, rest: string): void => {
    if (value === undefined || schema === undefined) return;
    if (rest === "") {
      out.push({ value, schema });
      return;
    }
    const index = /^\[(\d+)\]/.exec(rest);
    if (index && Array.isArray(value)) {
      walk(value[Number(index[1])], schema.items, rest.slice(index[0].length));
      return;
    }
    if (!isObject(value) || !rest.startsWith(".")) return;
    for (const [key, child] of Object.entries(value)) {
      const after = rest.slice(1 + key.length);
      if (rest.startsWith(`.${key}`) && (after === "" || after.startsWith(".") || after.startsWith("["))) {
        walk(child, schema.properties?.[key] ?? schema.additionalProperties, after);
      }
    }
  };
  walk(manifest.spec, spec, path.slice("spec".length));
  return out;
}

/**
 * zod ends every check around a number that is not an integer (its `.int()` issue is an explicit abort),
 * so a list that also has too many items is not measured: dpo validate names the number, not the list's
 * size, where the API server names both. A list the API server finds too long matches a non-integer
 * number dpo validate names inside it; nothing else does.
 */
export function sizeUncheckedAroundNonInteger(list: string, errors: readonly FieldError[]): boolean {
  return errors.some((e) => e.path.startsWith(`${list}[`) && e.message === "must be an integer");
}

export type Outcome = "accepted" | "rejected" | "offline-only";

export interface Judgement {
  outcome: Outcome;
  /** Empty when the judges agree. */
  disagreements: string[];
}

/**
 * The rules, all of them:
 * 1. dpo validate and the API server both accept or both refuse, except offlineOnlyLint (dpo refuses,
 *    the API server accepts).
 * 2. On a refusal by both, the API server names at least one field, and every field it names is one dpo
 *    validate names too, with two exact exceptions: an unknown field inside a mistyped value matches the
 *    type error on the value (memberOfMistypedObject), and a list too long matches a non-integer number
 *    inside it (sizeUncheckedAroundNonInteger). Not the other way round: the API server stops early by design, reporting only
 *    unknown fields when there are any (it decodes before validating), and skipping CEL rules when the
 *    schema already failed with a type, enum, required, length or list-size error (hasBlockingErr in
 *    apiextensions-apiserver); dpo validate reports every problem at once.
 * 3. On an acceptance, the loader accepts what the operator renders, reading the same spec as the
 *    operator and as dpo validate (judgeLoader).
 * 4. A case generated valid and left unmutated is accepted by all three (else the generator, the schema
 *    or a validator is wrong about the API).
 */
export function judge(c: ConfigCase, dpo: DpoVerdict, api: ApiVerdict, loader?: LoaderVerdict): Judgement {
  const disagreements: string[] = [];
  let outcome: Outcome = api.accepted ? "accepted" : "rejected";
  if (dpo.accepted !== api.accepted) {
    if (!dpo.accepted && api.accepted && offlineOnlyLint(dpo.errors)) {
      outcome = "offline-only";
    } else {
      disagreements.push(
        dpo.accepted
          ? `dpo validate accepts, the API server refuses: ${api.message}`
          : `dpo validate refuses (${fieldErrors(dpo.errors)}), the API server accepts`,
      );
    }
  }
  if (!dpo.accepted && !api.accepted) {
    const dpoPaths = new Set(dpo.errors.map((e) => normalizeFieldPath(e.path)));
    if (api.paths.length === 0) disagreements.push(`the API server's refusal names no field: ${api.message}`);
    for (const p of api.paths) {
      const inMistyped =
        api.unknownFields.includes(p) &&
        memberOfMistypedObject(p, dpo.errors, c.manifest, specSchema(c.version));
      const sizeUnchecked = api.tooMany.includes(p) && sizeUncheckedAroundNonInteger(p, dpo.errors);
      if (!dpoPaths.has(p) && !inMistyped && !sizeUnchecked) {
        disagreements.push(
          `the API server names ${p}, dpo validate does not (${fieldErrors(dpo.errors)}); API: ${api.message}`,
        );
      }
    }
  }
  if (api.accepted && outcome === "accepted") {
    if (!loader) disagreements.push("no loader verdict for an accepted manifest");
    else if (!loader.accepted || loader.problems.length > 0) disagreements.push(...loader.problems);
  }
  if (c.mutations.length === 0 && outcome !== "accepted") {
    disagreements.push(`generated valid and unmutated, but ${outcome}`);
  }
  return { outcome, disagreements };
}
