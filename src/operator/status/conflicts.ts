// Decides which configs may run when several advertise the same resource on overlapping nodes: the higher
// priority serves a node both select and the other steps back there; equal priorities conflict.
import type { V1Node } from "@kubernetes/client-node";
import { z } from "zod";
import { DevicePluginConfigSpecSchema } from "../../api/v1beta1/spec.js";
import {
  effectiveTerms,
  expressionsOf,
  MAX_TARGETING_TERMS,
  nodeMeetsAll,
  requirementsOf,
  selectorContains,
  selectorsDisjoint,
  type Requirement,
  type TargetingSpec,
} from "../model/node-terms.js";
import type { Targeting } from "../model/targeting.js";

/** The parts of a DevicePluginConfig a conflict depends on (a parsed config or a cache object). */
export interface ConflictCandidate {
  metadata: { name: string; creationTimestamp?: unknown };
  spec: TargetingSpec & { resourceName: string; priority?: number };
}

/** Milliseconds since the epoch of a timestamp given as a Date or an RFC 3339 string; NaN when absent. */
export function timestampMillis(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  if (typeof value === "string") return Date.parse(value);
  return Number.NaN;
}

/** Oldest first by creationTimestamp (a config without one counts as newest), then by name. */
export function compareByAge(
  a: Pick<ConflictCandidate, "metadata">,
  b: Pick<ConflictCandidate, "metadata">,
): number {
  const at = timestampMillis(a.metadata.creationTimestamp);
  const bt = timestampMillis(b.metadata.creationTimestamp);
  const aKey = Number.isNaN(at) ? Number.POSITIVE_INFINITY : at;
  const bKey = Number.isNaN(bt) ? Number.POSITIVE_INFINITY : bt;
  if (aKey !== bKey) return aKey < bKey ? -1 : 1;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

/** A config of higher priority that may select some of this config's nodes, and its requirements. */
export interface HigherConfig {
  name: string;
  priority: number;
  requirements: Requirement[];
}

/** How one config shares its resource name with the others. */
export interface Resolution {
  /** The config it yields the whole resource name to: its DaemonSet is removed. */
  conflictWith?: string;
  /** Why, when it is not an equal-priority overlap with conflictWith. */
  conflictMessage?: string;
  /** The condition reason of the conflict; ResourceNameConflict when absent. */
  conflictReason?: "CDIKindConflict";
  /** The terms its DaemonSet's node affinity carries (model/node-terms.ts). */
  targeting: Targeting;
  /** Running configs of higher priority it steps back for, highest first (then oldest). */
  stepsBackFor: HigherConfig[];
  /** Running configs of lower priority that step back for it, highest first (then oldest). */
  overrides: HigherConfig[];
}

const priorityOf = (c: ConflictCandidate): number => c.spec.priority ?? 0;

/** Highest priority first, then oldest first. */
function byPrecedence(a: ConflictCandidate, b: ConflictCandidate): number {
  return priorityOf(b) - priorityOf(a) || compareByAge(a, b);
}

/**
 * How each config of `configs` shares its resource name. Configs are taken by precedence: highest
 * priority first, and within one priority oldest first (creationTimestamp, then name). Of equal priority,
 * two configs overlap when some node meets both selectors, or when one selector contains the other (an
 * identical or empty one included), because then a node meeting the narrower one would be served twice,
 * even before such a node exists; the later one yields to the first such config (ResourceNameConflict).
 * So of three configs where only neighbours overlap, the first and the third both run. A config of
 * lower priority steps back from every running higher one whose selector is not provably disjoint from
 * its own: its terms exclude that selector, whether or not a node meets both today, so a node labelled
 * later is never served twice. Should that take more than MAX_TARGETING_TERMS terms, it yields the whole
 * resource name to the highest of them. `invalid` are the stored configs of these resource names whose
 * specs do not validate: a config younger than one of them yields to it (invalidConfigHolding).
 */
export function resolveResourceNames(
  configs: readonly ConflictCandidate[],
  nodes: readonly V1Node[],
  invalid: readonly InvalidConfig[] = [],
): Map<string, Resolution> {
  const out = new Map<string, Resolution>();
  // Only configs of one resource name can conflict: a config alone with its name needs no node read.
  const byResource = new Map<string, ConflictCandidate[]>();
  for (const config of configs) {
    const group = byResource.get(config.spec.resourceName);
    if (group) group.push(config);
    else byResource.set(config.spec.resourceName, [config]);
  }
  for (const group of byResource.values()) {
    const admitted: { config: ConflictCandidate; own: Requirement[]; nodes: () => Set<string> }[] = [];
    for (const config of [...group].sort(byPrecedence)) {
      const own = requirementsOf(config.spec);
      // The nodes a selector picks, read once and only when the selectors alone do not decide.
      let selected: Set<string> | undefined;
      const nodesOf = (): Set<string> =>
        (selected ??= new Set(
          nodes.filter((node) => nodeMeetsAll(node, own)).map((node) => node.metadata?.name ?? ""),
        ));
      const resolution: Resolution = { targeting: { terms: undefined }, stepsBackFor: [], overrides: [] };
      out.set(config.metadata.name, resolution);
      const peer = admitted.find(
        (other) =>
          priorityOf(other.config) === priorityOf(config) &&
          (selectorContains(other.own, own) ||
            selectorContains(own, other.own) ||
            [...nodesOf()].some((node) => other.nodes().has(node))),
      );
      if (peer) {
        resolution.conflictWith = peer.config.metadata.name;
        continue;
      }
      // Not admitted either, so no config of lower priority steps back for nodes this one does not serve.
      const held = invalidConfigHolding(config, own, invalid);
      if (held) {
        Object.assign(resolution, held);
        continue;
      }
      const higher = admitted
        .filter((o) => priorityOf(o.config) > priorityOf(config) && !selectorsDisjoint(own, o.own))
        .map((o) => ({ name: o.config.metadata.name, priority: priorityOf(o.config), requirements: o.own }));
      const terms = effectiveTerms(
        own,
        expressionsOf(config.spec),
        higher.map((h) => h.requirements),
      );
      if (!terms.ok) {
        resolution.conflictWith = higher[0]!.name;
        resolution.conflictMessage = `stepping back from the configs of higher priority (${higher.map((h) => h.name).join(", ")}) takes ${terms.needed} node selector terms, more than ${MAX_TARGETING_TERMS}; give them fewer matchExpressions or fewer overlapping selectors`;
        continue;
      }
      resolution.targeting = { terms: terms.terms };
      resolution.stepsBackFor = higher;
      const self = { name: config.metadata.name, priority: priorityOf(config), requirements: own };
      for (const h of higher) out.get(h.name)!.overrides.push(self);
      admitted.push({ config, own, nodes: nodesOf });
    }
  }
  return out;
}

/**
 * Configs that must not run, each mapped to the config it yields to (see resolveResourceNames).
 */
export function findResourceNameConflicts(
  configs: readonly ConflictCandidate[],
  nodes: readonly V1Node[],
): Map<string, string> {
  const losers = new Map<string, string>();
  for (const [name, r] of resolveResourceNames(configs, nodes)) {
    if (r.conflictWith !== undefined) losers.set(name, r.conflictWith);
  }
  return losers;
}

/** The parts of a config a CDI kind conflict depends on. */
export interface CdiKindCandidate extends ConflictCandidate {
  spec: ConflictCandidate["spec"] & {
    publish?: string;
    cdi?: { enabled: boolean; kind?: string | undefined };
  };
}

/** The kind of the CDI spec the config's plugin writes on its nodes, or undefined when it writes none. */
export function cdiSpecKindOf(spec: CdiKindCandidate["spec"]): string | undefined {
  if (spec.publish === "DRA" || spec.cdi?.enabled !== true) return undefined;
  return spec.cdi.kind ?? spec.resourceName;
}

/**
 * The config that `config` yields to because both would write a CDI spec of one kind on a node both may
 * select: a runtime drops a device name that two spec files of a kind define, so neither config's devices
 * would resolve. The earlier by precedence (priority, then age) keeps the kind. Configs of one resource
 * name are left out: resolveResourceNames already keeps them off each other's nodes. Pure.
 */
export function cdiKindConflict(
  config: CdiKindCandidate,
  others: readonly CdiKindCandidate[],
): Required<Pick<Resolution, "conflictWith" | "conflictMessage" | "conflictReason">> | undefined {
  const kind = cdiSpecKindOf(config.spec);
  if (kind === undefined) return undefined;
  const own = requirementsOf(config.spec);
  const first = others
    .filter(
      (other) =>
        other.metadata.name !== config.metadata.name &&
        other.spec.resourceName !== config.spec.resourceName &&
        cdiSpecKindOf(other.spec) === kind &&
        byPrecedence(other, config) < 0 &&
        !selectorsDisjoint(own, requirementsOf(other.spec)),
    )
    .sort(byPrecedence)[0];
  if (first === undefined) return undefined;
  const field =
    config.spec.cdi?.kind === undefined ? "spec.cdi.kind (defaulted to spec.resourceName)" : "spec.cdi.kind";
  return {
    conflictWith: first.metadata.name,
    conflictReason: "CDIKindConflict",
    conflictMessage: `${field}: CDI kind ${kind} is already the kind of DevicePluginConfig ${first.metadata.name}, whose nodes may be this config's too; runtimes drop a device two spec files of one kind name, so give this config a cdi.kind of its own`,
  };
}

/** A stored config whose spec does not validate (after an operator downgrade, or a stricter operator). */
export interface InvalidConfig {
  metadata: { name: string; creationTimestamp?: unknown };
  /** The stored spec as it is. */
  spec: unknown;
}

/** The fields of a spec that say which nodes its plugins may run on, read apart from the rest. */
const TargetingFieldsSchema = z.object({
  nodeSelector: DevicePluginConfigSpecSchema.shape.nodeSelector,
  nodeSelectorTerm: DevicePluginConfigSpecSchema.shape.nodeSelectorTerm,
});

/**
 * The invalid config that `config` must yield its resource name to, if any, and why: the oldest stored
 * config of its resource name (read as stored) older than `config` whose spec does not validate and
 * whose nodes may overlap its own. The operator applies nothing of an invalid spec and removes nothing of it, so its plugins keep
 * running as they were: it holds the name, whatever its priority, because it can neither step back nor
 * yield. Its selector is read on its own when that part validates; otherwise it may reach every node.
 * A younger invalid config takes nothing from an older one, which was there first.
 */
function invalidConfigHolding(
  config: ConflictCandidate,
  own: readonly Requirement[],
  invalid: readonly InvalidConfig[],
): { conflictWith: string; conflictMessage: string } | undefined {
  const holder = [...invalid].sort(compareByAge).find((other) => {
    const resourceName = (other.spec as { resourceName?: unknown } | null | undefined)?.resourceName;
    if (resourceName !== config.spec.resourceName || compareByAge(other, config) >= 0) return false;
    const targeting = TargetingFieldsSchema.safeParse(other.spec);
    return !targeting.success || !selectorsDisjoint(own, requirementsOf(targeting.data));
  });
  if (holder === undefined) return undefined;
  return {
    conflictWith: holder.metadata.name,
    conflictMessage: `DevicePluginConfig ${holder.metadata.name} holds ${config.spec.resourceName} on nodes that may overlap: its stored spec does not validate, so its plugins keep running as they were; fix or delete it`,
  };
}
