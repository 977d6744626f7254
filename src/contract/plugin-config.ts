// The plugin config as it travels from the operator to the plugin: its key in the ConfigMap, and the
// hash the operator puts on the pods and the plugin reports back, so the two can tell who runs what. No
// schemas here: the long-running plugin imports this, and reads its config apart (plugin-config-read.ts).
import { createHash } from "node:crypto";

/** Key of the plugin config in the ConfigMap, and the file name the pod sees it under. */
export const PLUGIN_CONFIG_KEY = "config.yaml";

const HASH_LENGTH = 16;

/** A short sha256 of ConfigMap data, independent of key order. */
export function configHash(configMapData: Readonly<Record<string, string>>): string {
  const hash = createHash("sha256");
  for (const key of Object.keys(configMapData).sort()) {
    // Length-prefixed, so no choice of keys and values can make two different maps hash alike.
    const value = configMapData[key] ?? "";
    hash.update(`${key.length}:${key}${value.length}:${value}`);
  }
  return hash.digest("hex").slice(0, HASH_LENGTH);
}

/**
 * Annotation of the manifest in the ConfigMap: the fields, comma-separated, that a plugin which does not
 * know them may serve without (`spec.plugin.logFormat`, `spec.devFS.paths[].label`; `[]` for every item of
 * a list). A later operator lists there what it adds for newer plugins to use and older ones to ignore, so
 * that a plugin pinned older than the operator keeps running. Any other field a plugin does not know, it
 * refuses, naming it: such a field changes what the plugin must do.
 */
export const PLUGIN_OPTIONAL_FIELDS_ANNOTATION = "dpo.dev/plugin-optional-fields";
