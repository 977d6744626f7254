// Names and labels that the operator and the plugin must spell alike: the bound on names and label
// values, the config label that ties a config's objects together, and the managed-by value on DRA objects.
import { createHash } from "node:crypto";

/** Longest name or label value that is safe everywhere: a DNS label, a label value, a pod-name base. */
export const MAX_NAME_LENGTH = 63;
const HASH_SUFFIX_LENGTH = 8;

export const LABEL_MANAGED_BY = "app.kubernetes.io/managed-by";
/**
 * Selects everything of one config: what the operator renders, and what the plugin writes (its
 * DeviceNodeStates and ResourceSlices), which the operator finds by it.
 */
export const LABEL_CONFIG = "dpo.dev/config";
/** `app.kubernetes.io/managed-by` on the DRA objects: the operator's DeviceClasses, the plugin's ResourceSlices. */
export const DRA_MANAGED_BY = "dpo";
/**
 * On a ResourceSlice whose devices the plugin sent with allowMultipleAllocations (a time-sliced config):
 * labels are never dropped, so the operator compares what was sent with what the API server stored.
 */
export const LABEL_SHARED_ALLOCATIONS = "dpo.dev/shared-allocations";

function shortHash(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, HASH_SUFFIX_LENGTH);
}

/**
 * `text` when it fits in 63 characters; otherwise its head and a hash of the whole, so two long names
 * that share a head still get different results and the same name always gets the same one.
 */
function boundText(text: string): string {
  if (text.length <= MAX_NAME_LENGTH) return text;
  // Names and label values must end alphanumeric; the hash is joined with '-'.
  const head = text.slice(0, MAX_NAME_LENGTH - HASH_SUFFIX_LENGTH - 1).replace(/[^a-z0-9]+$/i, "");
  return `${head}-${shortHash(text)}`;
}

/** `<prefix>-<name>` bounded to 63 characters (truncated, with a hash of the full name as suffix). */
export function boundedName(prefix: string, name: string): string {
  return boundText(`${prefix}-${name}`);
}

/** The `dpo.dev/config` label value of a config: its name, bounded like a name when longer than 63. */
export function configLabelValue(configName: string): string {
  return boundText(configName);
}
