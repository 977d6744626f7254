// What a plugin DaemonSet says about an upgrade, and the copies of it the rollout writes back: its
// revision, its node placement, and the upgrade state in its annotation. Pure.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { LABEL_REVISION, NO_NODE_LABEL, placementAffinity, type NodePlacement } from "../render/index.js";

/** The DaemonSet annotation holding an upgrade's state (on the revision nodes move to). */
export const ANNOTATION_UPGRADE_STATE = "dpo.dev/upgrade-state";

/** What is remembered per node during an upgrade; see the planner's Record and Mark actions. */
export interface NodeRecord {
  startedAt?: number;
  baseline?: number;
  failed?: boolean;
}

export interface UpgradeState {
  /** The revision the nodes move from (the base's); a state for another base is stale. */
  from: string;
  rollingBack: boolean;
  nodes: Record<string, NodeRecord>;
}

/** The revision of a DaemonSet: its label, or "" for one rendered before revisions existed. */
export function revisionOfDaemonSet(ds: V1DaemonSet): string {
  return ds.metadata?.labels?.[LABEL_REVISION] ?? "";
}

/**
 * The placement a DaemonSet's node affinity says. Anything this operator did not render (no affinity,
 * or one it cannot read) is `except: []`: every node, which is what such a DaemonSet runs on.
 */
export function placementOfDaemonSet(ds: V1DaemonSet): NodePlacement {
  const terms =
    ds.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms;
  if (terms === undefined || terms.length === 0) return { except: [] };
  const only: string[] = [];
  let except: string[] | undefined;
  for (const term of terms) {
    if (term.matchExpressions?.some((e) => e.key === NO_NODE_LABEL)) continue;
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

/** The state annotation, or a fresh state when it is missing or unreadable (never a crash). */
export function parseUpgradeState(ds: V1DaemonSet | undefined, from: string): UpgradeState {
  const raw = ds?.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE];
  const fresh: UpgradeState = { from, rollingBack: false, nodes: {} };
  if (raw === undefined) return fresh;
  try {
    const parsed = JSON.parse(raw) as Partial<UpgradeState>;
    if (typeof parsed !== "object" || parsed === null || parsed.from !== from) return fresh;
    const nodes: Record<string, NodeRecord> = {};
    for (const [name, rec] of Object.entries(parsed.nodes ?? {})) {
      if (typeof rec !== "object" || rec === null) continue;
      nodes[name] = {
        ...(typeof rec.startedAt === "number" ? { startedAt: rec.startedAt } : {}),
        ...(typeof rec.baseline === "number" ? { baseline: rec.baseline } : {}),
        ...(rec.failed === true ? { failed: true } : {}),
      };
    }
    return { from, rollingBack: parsed.rollingBack === true, nodes };
  } catch {
    return fresh;
  }
}

/** Canonical text of a state: nodes in name order, so an unchanged state never causes a write. */
export function serializeUpgradeState(state: UpgradeState): string {
  const nodes = Object.fromEntries(
    Object.keys(state.nodes)
      .sort()
      .map((n) => [n, state.nodes[n]]),
  );
  return JSON.stringify({ from: state.from, rollingBack: state.rollingBack, nodes });
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

export function withPlacement(ds: V1DaemonSet, placement: NodePlacement): V1DaemonSet {
  const podSpec = ds.spec!.template.spec!;
  const affinity = placementAffinity(placement);
  if (affinity) podSpec.affinity = affinity;
  else delete podSpec.affinity;
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

export function samePlacement(a: NodePlacement, b: NodePlacement): boolean {
  const norm = (p: NodePlacement) =>
    JSON.stringify("only" in p ? { only: [...p.only].sort() } : { except: [...p.except].sort() });
  return norm(a) === norm(b);
}
