// Decides which configs may run when several advertise the same resource on overlapping nodes.
import type { V1Node } from "@kubernetes/client-node";
import { nodeMatchesSelector } from "./selection.js";

/** The parts of a DevicePluginConfig a conflict depends on (a parsed config or a cache object). */
export interface ConflictCandidate {
  metadata: { name: string; creationTimestamp?: unknown };
  spec: { resourceName: string; nodeSelector: Readonly<Record<string, string>> };
}

/** Milliseconds since the epoch of a timestamp given as a Date or an RFC 3339 string; NaN when absent. */
export function timestampMillis(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === "string") return Date.parse(value);
  return Number.NaN;
}

/** Oldest first by creationTimestamp (a config without one counts as newest), then by name. */
export function compareByAge(a: ConflictCandidate, b: ConflictCandidate): number {
  const at = timestampMillis(a.metadata.creationTimestamp);
  const bt = timestampMillis(b.metadata.creationTimestamp);
  const aKey = Number.isNaN(at) ? Number.POSITIVE_INFINITY : at;
  const bKey = Number.isNaN(bt) ? Number.POSITIVE_INFINITY : bt;
  if (aKey !== bKey) return aKey < bKey ? -1 : 1;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

/** Every node that matches `inner` also matches `outer` (identical and empty selectors included). */
function selectorContains(
  outer: Readonly<Record<string, string>>,
  inner: Readonly<Record<string, string>>,
): boolean {
  return Object.entries(outer).every(([key, value]) => inner[key] === value);
}

/**
 * Configs that must not run, each mapped to the config it yields to. Two configs overlap when some
 * node matches both selectors, or when one selector contains the other (an identical or empty one
 * included), because then any node that matches the narrower one would be served twice: that holds
 * even before such a node exists. Configs are admitted oldest first (creationTimestamp, then name);
 * one overlapping an admitted config with the same resourceName yields to the oldest such config.
 * So of three configs where only neighbours overlap, the first and the third both run.
 */
export function findResourceNameConflicts(
  configs: readonly ConflictCandidate[],
  nodes: readonly V1Node[],
): Map<string, string> {
  const losers = new Map<string, string>();
  // Only configs of one resource name can conflict: a config alone with its name needs no node read.
  const byResource = new Map<string, ConflictCandidate[]>();
  for (const config of configs) {
    const group = byResource.get(config.spec.resourceName);
    if (group) group.push(config);
    else byResource.set(config.spec.resourceName, [config]);
  }
  for (const group of byResource.values()) {
    if (group.length < 2) continue;
    const admitted: { config: ConflictCandidate; nodes: () => Set<string> }[] = [];
    for (const config of group.sort(compareByAge)) {
      // The nodes a selector picks, read once and only when the selectors alone do not decide.
      let selected: Set<string> | undefined;
      const nodesOf = (): Set<string> =>
        (selected ??= new Set(
          nodes
            .filter((node) => nodeMatchesSelector(node, config.spec.nodeSelector))
            .map((node) => node.metadata?.name ?? ""),
        ));
      const winner = admitted.find(
        (other) =>
          selectorContains(other.config.spec.nodeSelector, config.spec.nodeSelector) ||
          selectorContains(config.spec.nodeSelector, other.config.spec.nodeSelector) ||
          [...nodesOf()].some((node) => other.nodes().has(node)),
      );
      if (winner) losers.set(config.metadata.name, winner.config.metadata.name);
      else admitted.push({ config, nodes: nodesOf });
    }
  }
  return losers;
}
