// The plugin config as it travels from the operator to the plugin: its key in the ConfigMap, and the
// hash the operator puts on the pods and the plugin reports back, so the two can tell who runs what.
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
