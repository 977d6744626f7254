// Who owns a Node's device labels, as its managedFields say, and the one server-side apply that gives a
// node a config's labels (ADR 0011). The operator writes a key only where the node lacks it or where the
// config's own field manager is its only owner, so it never overwrites another labeller (GPU Feature
// Discovery, a user's `kubectl label`) and never fights one over a value. Pure.
import type { V1ManagedFieldsEntry, V1Node } from "@kubernetes/client-node";
import { configOfLabelManager, configOfDeviceLabel, isDeviceLabelKey, labelFieldManager } from "./keys.js";

/** managedFields spells each owned label as `f:<key>` under `f:metadata` → `f:labels`. */
const FIELD = "f:";

function ownedLabelKeys(entry: V1ManagedFieldsEntry): string[] {
  const fields = entry.fieldsV1 as { "f:metadata"?: { "f:labels"?: Record<string, unknown> } } | undefined;
  const labels = fields?.["f:metadata"]?.["f:labels"];
  if (labels === undefined || labels === null || typeof labels !== "object") return [];
  return Object.keys(labels)
    .filter((k) => k.startsWith(FIELD))
    .map((k) => k.slice(FIELD.length));
}

/**
 * The managedFields entries the operator's Node cache keeps: each manager's device label keys only (no
 * times, no other fields), and only entries that own one. What ownership decisions need, at a few dozen
 * bytes per labelled node.
 */
export function slimLabelOwnership(
  entries: readonly V1ManagedFieldsEntry[] | undefined,
): V1ManagedFieldsEntry[] | undefined {
  const kept: V1ManagedFieldsEntry[] = [];
  for (const entry of entries ?? []) {
    const keys = ownedLabelKeys(entry).filter(isDeviceLabelKey);
    if (keys.length === 0) continue;
    kept.push({
      ...(entry.manager === undefined ? {} : { manager: entry.manager }),
      ...(entry.operation === undefined ? {} : { operation: entry.operation }),
      fieldsV1: { "f:metadata": { "f:labels": Object.fromEntries(keys.map((k) => [FIELD + k, {}])) } },
    });
  }
  return kept.length === 0 ? undefined : kept;
}

/** Label key → the field managers that own it. */
export function labelOwners(node: V1Node): Map<string, Set<string>> {
  const owners = new Map<string, Set<string>>();
  for (const entry of node.metadata?.managedFields ?? []) {
    for (const key of ownedLabelKeys(entry)) {
      let set = owners.get(key);
      if (set === undefined) owners.set(key, (set = new Set()));
      set.add(entry.manager ?? "");
    }
  }
  return owners;
}

/**
 * The config label values a Node carries device labels of: its dpo keys and its field managers' names.
 * The Node cache is indexed by them, so a config that is gone finds the nodes to clear.
 */
export function configsLabellingNode(node: V1Node): string[] {
  const found = new Set<string>();
  for (const key of Object.keys(node.metadata?.labels ?? {})) {
    const config = configOfDeviceLabel(key);
    if (config !== undefined) found.add(config);
  }
  for (const entry of node.metadata?.managedFields ?? []) {
    const config = configOfLabelManager(entry.manager);
    if (config !== undefined && ownedLabelKeys(entry).length > 0) found.add(config);
  }
  return [...found];
}

/** One server-side apply of a config's whole label set on a node, under the config's field manager. */
export interface LabelApply {
  node: string;
  fieldManager: string;
  /** Every label the config's manager is to own afterwards; a key it owned and is not here is removed. */
  labels: Record<string, string>;
  /** Keys wanted but left alone, as another manager owns them or the node has them from elsewhere. */
  yielded: string[];
}

/**
 * The apply that gives `node` the config's `wanted` labels, or undefined when it has them: the keys the
 * config's manager owns are exactly those it may write of `wanted`, each with its value. A key is
 * written only where the node lacks it or the config's manager alone owns it.
 */
export function labelApply(
  node: V1Node,
  configName: string,
  wanted: Readonly<Record<string, string>>,
): LabelApply | undefined {
  const manager = labelFieldManager(configName);
  const owners = labelOwners(node);
  const current = node.metadata?.labels ?? {};
  const labels: Record<string, string> = {};
  const yielded: string[] = [];
  for (const [key, value] of Object.entries(wanted)) {
    const by = owners.get(key) ?? new Set<string>();
    const ours = by.size === 1 && by.has(manager);
    if (ours || (by.size === 0 && !(key in current))) labels[key] = value;
    else yielded.push(key);
  }
  const owned = [...owners.entries()].filter(([, by]) => by.has(manager)).map(([key]) => key);
  const unchanged =
    owned.length === Object.keys(labels).length &&
    owned.every((key) => key in labels && current[key] === labels[key]);
  if (unchanged) return undefined;
  return { node: node.metadata?.name ?? "", fieldManager: manager, labels, yielded: yielded.sort() };
}
