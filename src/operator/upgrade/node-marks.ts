// Every mark the operator leaves on a Node for a config, in one table (ADR 0009): where it sits (a label, an
// annotation, a taint) and its key's prefix, which the config label value follows. Which configs a Node
// carries anything of (a deleted one's included) is read from the table, so that a config deleted while no
// operator led is found again from whatever it left, a lone Replace fence too. Pure.
import type { V1Node } from "@kubernetes/client-node";
import { configLabelValue } from "../../contract/names.js";
import {
  NODE_REPLACE_TAINT_PREFIX,
  NODE_REVISION_PREFIX,
  NODE_SURGE_PREFIX,
  NODE_UPGRADE_PREFIX,
} from "../model/targeting.js";

export type MarkPlace = "label" | "annotation" | "taint";

export interface NodeMarkKind {
  place: MarkPlace;
  /** The key's prefix; the config label value (at most 63 characters) follows it. */
  prefix: string;
  /** What it is, as logs and docs name it. */
  what: string;
}

/**
 * The marks, one row each. stripPatch (node-labels.ts) takes every one of them off; its unit test puts a
 * node carrying each row through it, so a row added here without its cleanup fails there.
 */
export const NODE_MARKS: readonly NodeMarkKind[] = [
  { place: "label", prefix: NODE_REVISION_PREFIX, what: "revision label" },
  { place: "label", prefix: NODE_SURGE_PREFIX, what: "surge label" },
  { place: "annotation", prefix: NODE_UPGRADE_PREFIX, what: "upgrade record" },
  { place: "taint", prefix: NODE_REPLACE_TAINT_PREFIX, what: "Replace fence" },
];

/** One mark on one node: its place and full key. */
export interface NodeMark {
  place: MarkPlace;
  key: string;
}

function keysAt(node: V1Node, place: MarkPlace): string[] {
  switch (place) {
    case "label":
      return Object.keys(node.metadata?.labels ?? {});
    case "annotation":
      return Object.keys(node.metadata?.annotations ?? {});
    case "taint":
      return (node.spec?.taints ?? []).map((t) => t.key);
  }
}

/**
 * The config label values a Node carries any mark of (a config's name, or its bound for a longer name).
 * The operator's Node cache is indexed by it, the Node events map to it and the leader visits each of them
 * when it starts, so the reconcile of a config that no longer exists finds the Nodes that still carry
 * something of it, and never has to visit every Node.
 */
export function configsMarkedOn(node: V1Node): string[] {
  const found = new Set<string>();
  for (const { place, prefix } of NODE_MARKS) {
    for (const key of keysAt(node, place)) {
      if (key.startsWith(prefix) && key.length > prefix.length) found.add(key.slice(prefix.length));
    }
  }
  return [...found];
}

/** The marks of one config a Node carries, in the table's order. */
export function marksOf(node: V1Node, configName: string): NodeMark[] {
  const value = configLabelValue(configName);
  return NODE_MARKS.flatMap(({ place, prefix }) =>
    keysAt(node, place)
      .filter((key) => key === prefix + value)
      .map((key) => ({ place, key })),
  );
}
