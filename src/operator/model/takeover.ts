// A takeover (ADR 0012): the DaemonSet of the plugin already serving a config's resource name, the
// "incumbent", takes the place of the base revision in the config's rollout. The operator never owns,
// renders or deletes it; it changes three fields of it, and gives them back exactly:
// - spec.updateStrategy to OnDelete, so changing its template restarts none of its pods;
// - its pods' required node affinity: the base placement of ADR 0004 ANDed into each of its own terms, so it
//   leaves each node whose labels move to dpo's revision (the DaemonSet controller deletes a daemon pod whose
//   node no longer matches the template, whatever the update strategy) and comes back to a node rolled back;
// - its pods' tolerations: the config's Replace taint, so a rollback brings it back to a fenced node.
// What the three fields were is kept in an annotation on the DaemonSet and put back when the takeover is
// rolled back or its config deleted. Pure.
import type {
  V1Affinity,
  V1DaemonSet,
  V1DaemonSetUpdateStrategy,
  V1Toleration,
} from "@kubernetes/client-node";
import { configLabelValue } from "../../contract/names.js";
import { LABEL_REVISION } from "./names.js";
import { placementAffinity, withReplaceToleration, type PlacementRole } from "./targeting.js";

/** The revision name the incumbent stands for in the rollout: no hash of dpo's has this form. */
export const INCUMBENT_REVISION = "incumbent";

/** On the incumbent DaemonSet: which config took it over, and its three fields as they were. */
export const ANNOTATION_TAKEOVER = "dpo.dev/takeover";
/**
 * On the incumbent DaemonSet too, with the config's label value: a label selector finds the incumbents of a
 * config that is gone, to give them back. Its labels are not its pods': setting it restarts nothing.
 */
export const LABEL_TAKEOVER = "dpo.dev/takeover";

/**
 * Serving: the incumbent runs the nodes not yet handed over (the base role). Parked: every targeted node is
 * dpo's; the incumbent runs only nodes whose labels name it, which none do (the moving role), so a node that
 * joins later gets dpo's plugin alone.
 */
export type IncumbentPhase = "Serving" | "Parked";

export interface TakeoverRecord {
  config: string;
  phase: IncumbentPhase;
  /** The incumbent's fields before the takeover, put back as they were. */
  original: {
    updateStrategy: V1DaemonSetUpdateStrategy | null;
    affinity: V1Affinity | null;
    tolerations: V1Toleration[] | null;
  };
}

export function parseTakeoverRecord(ds: V1DaemonSet | undefined): TakeoverRecord | undefined {
  const raw = ds?.metadata?.annotations?.[ANNOTATION_TAKEOVER];
  if (raw === undefined) return undefined;
  try {
    const parsed = JSON.parse(raw) as Partial<TakeoverRecord>;
    if (typeof parsed !== "object" || parsed === null || typeof parsed.config !== "string") return undefined;
    const original = (parsed.original ?? {}) as Partial<TakeoverRecord["original"]>;
    return {
      config: parsed.config,
      phase: parsed.phase === "Parked" ? "Parked" : "Serving",
      original: {
        updateStrategy: original.updateStrategy ?? null,
        affinity: original.affinity ?? null,
        tolerations: original.tolerations ?? null,
      },
    };
  } catch {
    return undefined;
  }
}

/** The incumbent's own fields, as the takeover found them (before it changed anything). */
function originalOf(ds: V1DaemonSet): TakeoverRecord["original"] {
  const pod = ds.spec?.template.spec;
  return {
    updateStrategy: ds.spec?.updateStrategy ? structuredClone(ds.spec.updateStrategy) : null,
    affinity: pod?.affinity ? structuredClone(pod.affinity) : null,
    tolerations: pod?.tolerations ? structuredClone(pod.tolerations) : null,
  };
}

/** Another config's takeover of the same DaemonSet: the name of that config, or undefined. */
export function takenOverByOther(ds: V1DaemonSet, configName: string): string | undefined {
  const record = parseTakeoverRecord(ds);
  return record !== undefined && record.config !== configName ? record.config : undefined;
}

/**
 * The incumbent's pod affinity in a phase: its own required terms, each ANDed with the placement of the
 * role (placementAffinity multiplies the terms out), its preferred terms and pod (anti-)affinity kept.
 */
function affinityIn(original: V1Affinity | null, configName: string, phase: IncumbentPhase): V1Affinity {
  const role: PlacementRole = phase === "Serving" ? "base" : "moving";
  const own = original?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  const placement = placementAffinity(configName, INCUMBENT_REVISION, role).nodeAffinity!
    .requiredDuringSchedulingIgnoredDuringExecution!.nodeSelectorTerms;
  // (o1 ∨ o2) ∧ (p1 ∨ p2) = o1p1 ∨ o1p2 ∨ o2p1 ∨ o2p2; the own term's matchFields stay with it.
  const terms =
    own === undefined || own.length === 0
      ? placement
      : own.flatMap((o) =>
          placement.map((p) => ({
            ...structuredClone(o),
            matchExpressions: [...(p.matchExpressions ?? []), ...structuredClone(o.matchExpressions ?? [])],
          })),
        );
  return {
    ...structuredClone(original ?? {}),
    nodeAffinity: {
      ...structuredClone(original?.nodeAffinity ?? {}),
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
    },
  };
}

/**
 * The incumbent as the takeover wants it in `phase`, for a PUT with its resourceVersion, or undefined when
 * it is so already. The first call records its fields as they were; later ones keep that record.
 */
export function incumbentIn(
  ds: V1DaemonSet,
  configName: string,
  phase: IncumbentPhase,
): V1DaemonSet | undefined {
  const original = parseTakeoverRecord(ds)?.original ?? originalOf(ds);
  const record: TakeoverRecord = { config: configName, phase, original };
  const want = structuredClone(ds);
  delete want.status;
  const pod = want.spec!.template.spec!;
  pod.affinity = affinityIn(original.affinity, configName, phase);
  pod.tolerations = withReplaceToleration(configName, original.tolerations ?? undefined);
  want.spec!.updateStrategy = { type: "OnDelete" };
  want.metadata = {
    ...want.metadata,
    labels: { ...want.metadata?.labels, [LABEL_TAKEOVER]: configLabelValue(configName) },
    annotations: { ...want.metadata?.annotations, [ANNOTATION_TAKEOVER]: JSON.stringify(record) },
  };
  return sameFields(ds, want) ? undefined : want;
}

/**
 * The incumbent given back: its three fields as the record says they were, the record gone. Undefined
 * when it carries no record of this config (never taken over, or given back already).
 */
export function incumbentRestored(ds: V1DaemonSet, configName: string): V1DaemonSet | undefined {
  const record = parseTakeoverRecord(ds);
  if (record === undefined || record.config !== configName) return undefined;
  const want = structuredClone(ds);
  delete want.status;
  const pod = want.spec!.template.spec!;
  const { updateStrategy, affinity, tolerations } = record.original;
  if (affinity === null) delete pod.affinity;
  else pod.affinity = structuredClone(affinity);
  if (tolerations === null) delete pod.tolerations;
  else pod.tolerations = structuredClone(tolerations);
  if (updateStrategy === null) delete want.spec!.updateStrategy;
  else want.spec!.updateStrategy = structuredClone(updateStrategy);
  const annotations = { ...want.metadata?.annotations };
  delete annotations[ANNOTATION_TAKEOVER];
  const labels = { ...want.metadata?.labels };
  delete labels[LABEL_TAKEOVER];
  want.metadata = { ...want.metadata, labels, annotations };
  return want;
}

/**
 * The incumbent as the rollout sees it: the base revision INCUMBENT_REVISION, with no upgrade state. A copy;
 * the rollout's writes to it are turned back into incumbentIn (takeoverWrite), never sent as they are.
 */
export function incumbentAsRevision(ds: V1DaemonSet): V1DaemonSet {
  const view = structuredClone(ds);
  view.metadata = {
    ...view.metadata,
    labels: { ...view.metadata?.labels, [LABEL_REVISION]: INCUMBENT_REVISION },
  };
  return view;
}

function sameFields(a: V1DaemonSet, b: V1DaemonSet): boolean {
  const fields = (ds: V1DaemonSet) =>
    JSON.stringify([
      ds.spec?.updateStrategy ?? null,
      ds.spec?.template.spec?.affinity ?? null,
      ds.spec?.template.spec?.tolerations ?? null,
      ds.metadata?.annotations?.[ANNOTATION_TAKEOVER] ?? null,
      ds.metadata?.labels?.[LABEL_TAKEOVER] ?? null,
    ]);
  return fields(a) === fields(b);
}
