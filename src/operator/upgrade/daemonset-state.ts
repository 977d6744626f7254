// What a plugin DaemonSet says about an upgrade, and the copies of it the rollout writes back: its
// revision, its role (base or moving, ADR 0004), and the upgrade's phase in its annotation. Pure. A
// DaemonSet an older operator wrote places nodes by name instead (ADR 0003); it is read here as such
// (legacyPlacement) so that an upgrade it was running carries on, and rewritten once its nodes carry labels.
import type { V1DaemonSet, V1NodeSelectorTerm } from "@kubernetes/client-node";
import { DRA_PLUGINS_VOLUME, LABEL_REVISION } from "../model/names.js";
import {
  NODE_REVISION_PREFIX,
  placementAffinity,
  replaceToleration,
  targetingOfAffinity,
  withReplaceToleration,
  type PlacementRole,
} from "../model/targeting.js";

/** The DaemonSet annotation holding an upgrade's phase (on the revision nodes move to). */
export const ANNOTATION_UPGRADE_STATE = "dpo.dev/upgrade-state";

/** What an older operator remembered per node in the state annotation; read only, to carry it over. */
export interface LegacyNodeRecord {
  startedAt?: number;
  baseline?: number;
  failed?: boolean;
}

export interface UpgradeState {
  /** The revision the nodes move from (the base's); a state for another base is stale. */
  from: string;
  rollingBack: boolean;
  /** Per-node records an older operator kept here; today's keeps them on the Nodes. Never written. */
  legacyNodes: Record<string, LegacyNodeRecord>;
}

/** The node lists of an older operator: exactly `only`, or every node but `except`. */
export type NodePlacement = { only: readonly string[] } | { except: readonly string[] };

/** The revision of a DaemonSet: its label, or "" for one rendered before revisions existed. */
export function revisionOfDaemonSet(ds: V1DaemonSet): string {
  return ds.metadata?.labels?.[LABEL_REVISION] ?? "";
}

/** The marker term an older operator gave a revision whose node list was empty. */
const LEGACY_NO_NODE_LABEL = "dpo.dev/no-node-matches-this";

function affinityTerms(ds: V1DaemonSet) {
  return ds.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
    ?.nodeSelectorTerms;
}

/** Whether the DaemonSet selects nodes by the revision labels (this operator's placement). */
function labelPlaced(ds: V1DaemonSet): boolean {
  return (affinityTerms(ds) ?? []).some((t) =>
    (t.matchExpressions ?? []).some((e) => e.key.startsWith(NODE_REVISION_PREFIX)),
  );
}

/**
 * The node lists of a DaemonSet an older operator placed by node name, or undefined for one this operator
 * placed by labels. Anything else (no affinity, one it cannot read) is `except: []`: every node, which is
 * what such a DaemonSet runs on.
 */
export function legacyPlacement(ds: V1DaemonSet): NodePlacement | undefined {
  if (labelPlaced(ds)) return undefined;
  const terms = affinityTerms(ds);
  if (terms === undefined || terms.length === 0) return { except: [] };
  const only: string[] = [];
  let except: string[] | undefined;
  for (const term of terms) {
    if (term.matchExpressions?.some((e) => e.key === LEGACY_NO_NODE_LABEL)) continue;
    const fields = term.matchFields ?? [];
    if (fields.length === 1 && fields[0]!.operator === "In") {
      only.push(...(fields[0]!.values ?? []));
    } else if (fields.length > 0 && fields.every((f) => f.operator === "NotIn")) {
      except = fields.flatMap((f) => f.values ?? []);
    } else {
      return { except: [] };
    }
  }
  return except !== undefined && only.length === 0 ? { except } : { only };
}

/** The role a DaemonSet plays: base (runs untouched nodes) or moving, from either placement form. */
export function roleOfDaemonSet(ds: V1DaemonSet): PlacementRole {
  const legacy = legacyPlacement(ds);
  if (legacy !== undefined) return "except" in legacy ? "base" : "moving";
  const base = (affinityTerms(ds) ?? []).some((t) =>
    (t.matchExpressions ?? []).some(
      (e) => e.key.startsWith(NODE_REVISION_PREFIX) && e.operator === "DoesNotExist",
    ),
  );
  return base ? "base" : "moving";
}

/** Whether the DaemonSet already has the label placement of `role` and never rolls its pods itself. */
export function hasRole(
  ds: V1DaemonSet,
  configName: string,
  role: PlacementRole,
  targeting: V1NodeSelectorTerm[] | undefined = targetingOfAffinity(ds.spec?.template.spec?.affinity),
): boolean {
  const want = placementAffinity(configName, revisionOfDaemonSet(ds), role, targeting);
  const tolerations = ds.spec?.template.spec?.tolerations ?? [];
  return (
    JSON.stringify(ds.spec?.template.spec?.affinity ?? null) === JSON.stringify(want) &&
    tolerations.some((t) => JSON.stringify(t) === JSON.stringify(replaceToleration(configName))) &&
    ds.spec?.updateStrategy?.type === "OnDelete"
  );
}

/** The state annotation, or a fresh state when it is missing or unreadable (never a crash). */
export function parseUpgradeState(ds: V1DaemonSet | undefined, from: string): UpgradeState {
  const raw = ds?.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE];
  const fresh: UpgradeState = { from, rollingBack: false, legacyNodes: {} };
  if (raw === undefined) return fresh;
  try {
    const parsed = JSON.parse(raw) as Partial<UpgradeState> & { nodes?: Record<string, LegacyNodeRecord> };
    if (typeof parsed !== "object" || parsed === null || parsed.from !== from) return fresh;
    const nodes: Record<string, LegacyNodeRecord> = {};
    for (const [name, rec] of Object.entries(parsed.nodes ?? {})) {
      if (typeof rec !== "object" || rec === null) continue;
      nodes[name] = {
        ...(typeof rec.startedAt === "number" ? { startedAt: rec.startedAt } : {}),
        ...(typeof rec.baseline === "number" ? { baseline: rec.baseline } : {}),
        ...(rec.failed === true ? { failed: true } : {}),
      };
    }
    return { from, rollingBack: parsed.rollingBack === true, legacyNodes: nodes };
  } catch {
    return fresh;
  }
}

/** The text of a state as this operator writes it: the phase only, the per-node records live on Nodes. */
export function serializeUpgradeState(state: UpgradeState): string {
  return JSON.stringify({ from: state.from, rollingBack: state.rollingBack });
}

export function byCreation(a: V1DaemonSet, b: V1DaemonSet): number {
  const ta = Date.parse(String(a.metadata?.creationTimestamp ?? "")) || 0;
  const tb = Date.parse(String(b.metadata?.creationTimestamp ?? "")) || 0;
  if (ta !== tb) return ta - tb;
  return (a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1;
}

/** A copy of a cached DaemonSet, fit to send back with PUT. */
export function forUpdate(ds: V1DaemonSet): V1DaemonSet {
  const copy = structuredClone(ds);
  delete copy.status;
  return copy;
}

/**
 * The DaemonSet with the label placement of `role`; OnDelete, so the change restarts no pod. `targeting`
 * (nodeSelectorTerm, and the steps back from higher-priority configs) is the current spec's where the caller
 * knows it: which nodes the config serves is not a property of a revision, and an override created in the
 * middle of an upgrade must take its nodes from the old revision's DaemonSet too. Absent: as the DaemonSet
 * has it.
 */
export function withRole(
  ds: V1DaemonSet,
  configName: string,
  role: PlacementRole,
  targeting: V1NodeSelectorTerm[] | undefined = targetingOfAffinity(ds.spec?.template.spec?.affinity),
): V1DaemonSet {
  const podSpec = ds.spec!.template.spec!;
  podSpec.affinity = placementAffinity(configName, revisionOfDaemonSet(ds), role, targeting);
  // Every revision tolerates the Replace taint, an older one too: a rollback brings it back to a fenced node.
  podSpec.tolerations = withReplaceToleration(configName, podSpec.tolerations);
  // A DaemonSet of a version before revisions rolls its pods on a template change: never again.
  ds.spec!.updateStrategy = { type: "OnDelete" };
  return ds;
}

export function withState(ds: V1DaemonSet, state: UpgradeState | undefined): V1DaemonSet {
  const annotations = { ...(ds.metadata?.annotations ?? {}) };
  if (state === undefined) delete annotations[ANNOTATION_UPGRADE_STATE];
  else annotations[ANNOTATION_UPGRADE_STATE] = serializeUpgradeState(state);
  ds.metadata = { ...ds.metadata, annotations };
  if (Object.keys(annotations).length === 0) delete ds.metadata.annotations;
  return ds;
}

/** How a plugin DaemonSet's pods publish: DRA where the template mounts the DRA plugins directory. */
export function publishModeOfDaemonSet(ds: V1DaemonSet): "DevicePlugin" | "DRA" {
  const volumes = ds.spec?.template.spec?.volumes ?? [];
  return volumes.some((v) => v.name === DRA_PLUGINS_VOLUME) ? "DRA" : "DevicePlugin";
}
