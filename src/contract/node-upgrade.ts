// What the operator keeps on a Node about a config's plugin upgrade (ADR 0004), and the one thing of it a
// plugin reads: whether it is to stand by. The keys are bounded (the config label value is at most 63
// characters), and so is the record. The operator writes both; a plugin of the revision a node moves to
// reads the record once, when it finds an older instance of itself serving the node. No imports but names.
import { configLabelValue } from "./names.js";

/** `revision.dpo.dev/<config>`: the revision the node runs; absent until an upgrade first touches the node. */
export const NODE_REVISION_PREFIX = "revision.dpo.dev/";
/** `surge.dpo.dev/<config>`: a second revision the node runs beside the first while it surges. */
export const NODE_SURGE_PREFIX = "surge.dpo.dev/";
/** `upgrade.dpo.dev/<config>`: what an upgrade remembers about the node (start, baseline, failure). */
export const NODE_UPGRADE_PREFIX = "upgrade.dpo.dev/";
/**
 * `replace.dpo.dev/<config>`: the NoSchedule taint a node carries while it is replaced, so no new pod is
 * placed there while it advertises nothing; the config's plugin pods tolerate it.
 */
export const NODE_REPLACE_TAINT_PREFIX = "replace.dpo.dev/";

/** The keys one config uses on Nodes; the name part is the config label value (at most 63 characters). */
export interface NodeKeys {
  revision: string;
  surge: string;
  upgrade: string;
  /** The key of the Replace taint. */
  replace: string;
}

export function nodeKeys(configName: string): NodeKeys {
  const name = configLabelValue(configName);
  return {
    revision: NODE_REVISION_PREFIX + name,
    surge: NODE_SURGE_PREFIX + name,
    upgrade: NODE_UPGRADE_PREFIX + name,
    replace: NODE_REPLACE_TAINT_PREFIX + name,
  };
}

/** A node's record of one upgrade, from `from` to `to` (plugin revisions); a record of another upgrade is stale. */
export interface NodeRecord {
  from: string;
  to: string;
  startedAt?: number;
  baseline?: number;
  failed?: boolean;
  /** ms epoch when the operator put the Replace taint on (the fence's age is measured from it). */
  fencedAt?: number;
  /**
   * The node is replaced with the new plugin started ahead: it runs beside the old one unregistered
   * (standing by) and registers once the old one's socket is gone. Set where the kubelet cannot keep two
   * registrations of one resource (before v1.37.0) and the strategy allows two instances side by side.
   */
  standby?: boolean;
}

/** The record in an annotation's text, whatever upgrade it belongs to; undefined when unreadable. */
export function parseNodeRecordText(raw: string | undefined): NodeRecord | undefined {
  if (raw === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    // Edited by hand: the node has no record.
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null) return undefined;
  const p = parsed as Partial<Record<keyof NodeRecord, unknown>>;
  if (typeof p.from !== "string" || typeof p.to !== "string") return undefined;
  return {
    from: p.from,
    to: p.to,
    ...(typeof p.startedAt === "number" ? { startedAt: p.startedAt } : {}),
    ...(typeof p.baseline === "number" ? { baseline: p.baseline } : {}),
    ...(p.failed === true ? { failed: true } : {}),
    ...(typeof p.fencedAt === "number" ? { fencedAt: p.fencedAt } : {}),
    ...(p.standby === true ? { standby: true } : {}),
  };
}

/** The annotation text of a record: fixed key order, so an unchanged record never causes a write. */
export function serializeNodeRecord(record: NodeRecord): string {
  return JSON.stringify({
    from: record.from,
    to: record.to,
    ...(record.startedAt !== undefined ? { startedAt: record.startedAt } : {}),
    ...(record.baseline !== undefined ? { baseline: record.baseline } : {}),
    ...(record.failed === true ? { failed: true } : {}),
    ...(record.fencedAt !== undefined ? { fencedAt: record.fencedAt } : {}),
    ...(record.standby === true ? { standby: true } : {}),
  });
}

/**
 * Whether the plugin of `revision` for `configName` is to stand by on a node with these annotations: the
 * node's record is of an upgrade to that revision and says so. Any other record, or none, says register.
 */
export function standbyWanted(
  annotations: Readonly<Record<string, string>> | undefined,
  configName: string,
  revision: string | undefined,
): boolean {
  if (revision === undefined || revision === "") return false;
  const record = parseNodeRecordText(annotations?.[nodeKeys(configName).upgrade]);
  return record !== undefined && record.to === revision && record.standby === true;
}
