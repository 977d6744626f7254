// How a plugin reads its config, also when a newer operator wrote it: fields the operator marks optional and
// the plugin does not know are left out, any other unknown field is refused by name.
import {
  formatFieldPath,
  loadDevicePluginConfig,
  parseManifestDocuments,
  validateDevicePluginConfig,
  type FieldError,
} from "../api/validate.js";
import type { DevicePluginConfig } from "../api/v1beta1/config.js";
import { PLUGIN_OPTIONAL_FIELDS_ANNOTATION } from "./plugin-config.js";

/** The plugin's config, and the optional fields it did not know and left out. */
export type PluginConfigRead =
  { ok: true; value: DevicePluginConfig; ignored: string[] } | { ok: false; errors: FieldError[] };

const OPTIONAL_FIELD_PATH = /^spec(\.[A-Za-z][A-Za-z0-9]*(\[\])?)+$/;

/** `spec.a[].b` as keys, `[]` standing for every item of a list. */
function fieldPattern(entry: string): string[] {
  return entry.split(".").flatMap((part) => (part.endsWith("[]") ? [part.slice(0, -2), "[]"] : [part]));
}

/** Each concrete path in `obj` that `pattern` names, as parts for formatFieldPath. */
function concretePaths(
  obj: unknown,
  pattern: readonly string[],
  at: (string | number)[] = [],
): (string | number)[][] {
  const [head, ...rest] = pattern;
  if (head === undefined) return [at];
  if (head === "[]") {
    if (!Array.isArray(obj)) return [];
    return obj.flatMap((item: unknown, i) => concretePaths(item, rest, [...at, i]));
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj) || !Object.hasOwn(obj, head)) return [];
  return concretePaths((obj as Record<string, unknown>)[head], rest, [...at, head]);
}

function deleteAt(obj: unknown, path: readonly (string | number)[]): void {
  let node = obj;
  for (const key of path.slice(0, -1)) node = (node as Record<string | number, unknown>)[key];
  delete (node as Record<string | number, unknown>)[path[path.length - 1]!];
}

/**
 * Reads the plugin's config as `dpo plugin --config` does (loadDevicePluginConfig), except that fields the
 * manifest's PLUGIN_OPTIONAL_FIELDS_ANNOTATION lists and this plugin does not know are left out and named in
 * `ignored`. A field this plugin knows is never left out, whatever the annotation says.
 */
export function readPluginConfig(text: string): PluginConfigRead {
  const strict = loadDevicePluginConfig(text);
  if (strict.ok) return { ok: true, value: strict.value, ignored: [] };
  const unknown = new Set(strict.errors.filter((e) => e.message === "unknown field").map((e) => e.path));
  if (unknown.size < strict.errors.length) return strict;
  const [doc] = parseManifestDocuments(text);
  const obj = doc?.ok ? doc.value : undefined;
  const annotations = (obj as { metadata?: { annotations?: unknown } } | undefined)?.metadata?.annotations;
  const listed = (annotations as Record<string, unknown> | undefined)?.[PLUGIN_OPTIONAL_FIELDS_ANNOTATION];
  if (typeof listed !== "string") return strict;
  const entries = listed
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  const malformed = entries.find((e) => !OPTIONAL_FIELD_PATH.test(e));
  if (malformed !== undefined) {
    return {
      ok: false,
      errors: [
        ...strict.errors,
        {
          path: `metadata.annotations[${PLUGIN_OPTIONAL_FIELDS_ANNOTATION}]`,
          message: `'${malformed}' is not a field path such as spec.plugin.logFormat or spec.devFS.paths[].label`,
        },
      ],
    };
  }
  const ignored = new Map(
    entries
      .flatMap((entry) => concretePaths(obj, fieldPattern(entry)))
      .map((path) => [formatFieldPath(path), path] as const)
      .filter(([formatted]) => unknown.has(formatted)),
  );
  // Every unknown field must be marked; those that are not are what the plugin refuses the config for.
  if (ignored.size < unknown.size)
    return { ok: false, errors: strict.errors.filter((e) => !ignored.has(e.path)) };
  for (const path of ignored.values()) deleteAt(obj, path);
  const relaxed = validateDevicePluginConfig(obj);
  return relaxed.ok ? { ok: true, value: relaxed.value, ignored: [...ignored.keys()].sort() } : relaxed;
}
