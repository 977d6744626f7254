// From a config and the cluster objects of its plugin, the writes that move its upgrade forward: pure.
// One DaemonSet per plugin revision (ADR 0003). The "base" DaemonSet runs every targeted node but a list
// (`except`); a revision that nodes are moving to, or back from, runs exactly a list of nodes (`only`)
// and carries the upgrade's state in an annotation. The planner (planner.ts) decides the moves; this
// module reads the observations out of the objects, applies the planner's actions to copies of them,
// and says what to write, in an order that leaves a state the next pass continues from if it stops
// anywhere. Writes carry the resourceVersion they were planned from, so a stale cache or a second
// leader gets a conflict instead of acting twice.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import {
  MAX_UPGRADE_NODES,
  type NodeProblem,
  type UpgradePhase,
  type UpgradeStatus,
} from "../../api/v1beta1/status.js";
import {
  LABEL_REVISION,
  NO_NODE_LABEL,
  placementAffinity,
  pluginRevision,
  renderPluginDaemonSet,
  type NodePlacement,
  type RenderContext,
} from "../render/index.js";
import { parseCountQuantity, unhealthyAdvertisedCount } from "../status/node-health.js";
import {
  planRollout,
  type NodeObservation,
  type Plan,
  type RolloutSpec,
  type UpgradeMode,
} from "./planner.js";

/** The DaemonSet annotation holding an upgrade's state (on the revision nodes move to). */
export const ANNOTATION_UPGRADE_STATE = "dpo.dev/upgrade-state";
/** How a DaemonSet of a version without revisions shows in the status. */
export const LEGACY_REVISION = "legacy";
/** While an upgrade moves, come back this often: deadlines pass without any object changing. */
export const UPGRADE_POLL_MS = 2_000;

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

export type RolloutWrite =
  /** Create the DaemonSet (POST: fails if it exists, so a stale cache never overwrites a state). */
  | { kind: "Create"; daemonSet: V1DaemonSet }
  /** Replace the DaemonSet (PUT with the resourceVersion it was planned from). */
  | { kind: "Update"; daemonSet: V1DaemonSet }
  /** Delete the DaemonSet, if it still has this uid. */
  | { kind: "Delete"; name: string; uid: string | undefined; revision: string };

export interface RolloutEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

export interface RolloutInput {
  config: DevicePluginConfig;
  render: RenderContext;
  /** The config's DaemonSets (being deleted or not). */
  daemonSets: readonly V1DaemonSet[];
  /** The nodes the config targets (nodeSelector and tolerations). */
  nodes: readonly V1Node[];
  /** The config's plugin pods. */
  pods: readonly V1Pod[];
  /** The config's DeviceNodeStates. */
  reports: readonly DeviceNodeState[];
  /**
   * DRA mode: the devices each node's ResourceSlices of the driver publish (publishedDevicesByNode), the
   * count the gate waits on instead of Node.status.allocatable. A node with no slice counts 0. The
   * plugin leaves unhealthy devices out of its slices, as the kubelet leaves them out of allocatable, so
   * the gate's rule (back to the baseline, less the unhealthy) is the same.
   */
  publishedDevices?: ReadonlyMap<string, number> | undefined;
  now: number;
}

/** What the gate compares with a node's baseline: allocatable, or in DRA mode the published devices. */
function availableDevices(node: V1Node, input: RolloutInput): number {
  if (input.publishedDevices !== undefined) return input.publishedDevices.get(node.metadata?.name ?? "") ?? 0;
  return parseCountQuantity(node.status?.allocatable?.[input.config.spec.resourceName]) ?? 0;
}

export interface RolloutDecision {
  /** The revision of the current spec. */
  revision: string;
  /** In order; the caller stops at the first that fails and comes back later. */
  writes: RolloutWrite[];
  /** Raised once the writes are done. */
  events: RolloutEvent[];
  status: UpgradeStatus;
  /** Node problems of the upgrade: kubelets too old, nodes that failed. */
  problems: NodeProblem[];
  /** How each targeted node moves between revisions (Surge or Replace), for the status to say. */
  modes: Record<string, UpgradeMode>;
  /** Revisions whose ConfigMap must stay; the current one's must exist before its DaemonSet. */
  liveRevisions: Set<string>;
  /** When to come back even if nothing changes. */
  requeueAfterMs?: number;
}

function byCreation(a: V1DaemonSet, b: V1DaemonSet): number {
  const ta = Date.parse(String(a.metadata?.creationTimestamp ?? "")) || 0;
  const tb = Date.parse(String(b.metadata?.creationTimestamp ?? "")) || 0;
  if (ta !== tb) return ta - tb;
  return (a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1;
}

function ownedBy(pod: V1Pod, ds: V1DaemonSet): boolean {
  const uid = ds.metadata?.uid;
  return uid !== undefined && (pod.metadata?.ownerReferences ?? []).some((o) => o.uid === uid);
}

function podIsLive(pod: V1Pod): boolean {
  return !pod.metadata?.deletionTimestamp && pod.status?.phase === "Running";
}

function podIsPresent(pod: V1Pod): boolean {
  return pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed";
}

/** The report of `revision` on the node that a live pod of that revision wrote, if it says Registered. */
function registeredReport(
  reports: readonly DeviceNodeState[],
  revision: string,
  livePods: readonly V1Pod[],
): DeviceNodeState | undefined {
  if (livePods.length === 0) return undefined;
  const uids = new Set(livePods.map((p) => p.metadata?.uid));
  return reports.find(
    (r) =>
      (r.spec.revision ?? "") === revision &&
      r.status?.registration.state === "Registered" &&
      // A report without a pod uid comes from a version that did not write one: its pod is alive.
      (r.status.podUID === undefined || uids.has(r.status.podUID)),
  );
}

function displayRevision(revision: string): string {
  return revision === "" ? LEGACY_REVISION : revision;
}

function bounded(list: readonly string[]): { list?: string[]; omitted?: number } {
  if (list.length === 0) return {};
  const shown = list.slice(0, MAX_UPGRADE_NODES);
  return { list: shown, ...(list.length > shown.length ? { omitted: list.length - shown.length } : {}) };
}

function rolloutSpecOf(config: DevicePluginConfig): RolloutSpec {
  const u = config.spec.upgrade;
  return {
    strategy: u.strategy,
    maxUnavailable: u.maxUnavailable as RolloutSpec["maxUnavailable"],
    progressDeadlineSeconds: u.progressDeadlineSeconds,
    paused: u.paused,
    autoRollback: u.autoRollback,
  };
}

/** A copy of a cached DaemonSet, fit to send back with PUT. */
function forUpdate(ds: V1DaemonSet): V1DaemonSet {
  const copy = structuredClone(ds);
  delete copy.status;
  return copy;
}

function withPlacement(ds: V1DaemonSet, placement: NodePlacement): V1DaemonSet {
  const podSpec = ds.spec!.template.spec!;
  const affinity = placementAffinity(placement);
  if (affinity) podSpec.affinity = affinity;
  else delete podSpec.affinity;
  // A DaemonSet of a version before revisions rolls its pods on a template change: never again.
  ds.spec!.updateStrategy = { type: "OnDelete" };
  return ds;
}

function withState(ds: V1DaemonSet, state: UpgradeState | undefined): V1DaemonSet {
  const annotations = { ...(ds.metadata?.annotations ?? {}) };
  if (state === undefined) delete annotations[ANNOTATION_UPGRADE_STATE];
  else annotations[ANNOTATION_UPGRADE_STATE] = serializeUpgradeState(state);
  ds.metadata = { ...ds.metadata, annotations };
  if (Object.keys(annotations).length === 0) delete ds.metadata.annotations;
  return ds;
}

function samePlacement(a: NodePlacement, b: NodePlacement): boolean {
  const norm = (p: NodePlacement) =>
    JSON.stringify("only" in p ? { only: [...p.only].sort() } : { except: [...p.except].sort() });
  return norm(a) === norm(b);
}

interface Move {
  base: V1DaemonSet;
  target: V1DaemonSet;
  state: UpgradeState;
  /** Moving nodes back off `target` (an abandoned revision, or after a failure). */
  forceRollback: boolean;
}

/**
 * Decides the writes for the config's plugin DaemonSets. Cases, from the DaemonSets alone:
 * - none: create the current revision on every targeted node;
 * - only the current revision: keep it on every targeted node but kubelets too old;
 * - a revision other than the base and the current one holds nodes (an upgrade that the spec moved
 *   past): move its nodes back to the base first, then delete it;
 * - the base is another revision: create the current one with no nodes, then move nodes node by node;
 *   once every targeted node runs it, delete the base and make the current one the base.
 */
export function decideRollout(input: RolloutInput): RolloutDecision {
  const { config, render, now } = input;
  const revision = pluginRevision(config, render);
  const spec = rolloutSpecOf(config);
  const live = input.daemonSets.filter((ds) => !ds.metadata?.deletionTimestamp).sort(byCreation);
  const bases = live.filter((ds) => "except" in placementOfDaemonSet(ds));
  const current = live.find((ds) => revisionOfDaemonSet(ds) === revision);
  // The base is the revision every other node runs: the current one if it is a base, else the oldest.
  const base = current !== undefined && "except" in placementOfDaemonSet(current) ? current : bases[0];
  const onlys = live.filter((ds) => ds !== base && "only" in placementOfDaemonSet(ds));
  const abandoned = onlys.filter((ds) => revisionOfDaemonSet(ds) !== revision);
  const liveRevisions = new Set([revision, ...live.map(revisionOfDaemonSet)]);

  // Too-old kubelets are never targeted, by any revision; the planner says which they are.
  const observe = (move: Move | undefined): Plan => {
    const view = move === undefined ? undefined : moveView(move, input);
    return planRollout({
      nodes: input.nodes.map((n) => observeNode(n, view, input)),
      spec,
      now,
      rollingBack: move === undefined ? false : move.state.rollingBack || move.forceRollback,
      publish: config.spec.publish,
    });
  };

  const writes: RolloutWrite[] = [];
  const events: RolloutEvent[] = [];
  /** The decision of this pass: the writes and events gathered so far, with the plan's problems. */
  const decided = (plan: Plan, status: UpgradeStatus, requeue: boolean): RolloutDecision => ({
    revision,
    writes,
    events,
    status,
    problems: problemsOf(plan),
    modes: plan.modes,
    liveRevisions,
    ...(requeue ? { requeueAfterMs: UPGRADE_POLL_MS } : {}),
  });

  if (base === undefined) {
    // Nothing runs yet (or only node lists without a base, which a partial delete could leave).
    const plan = observe(undefined);
    const tooOld = tooOldNodes(plan);
    if (current === undefined) {
      writes.push({
        kind: "Create",
        daemonSet: renderPluginDaemonSet(config, render, { placement: { except: tooOld } }),
      });
    } else {
      writes.push({
        kind: "Update",
        daemonSet: withState(withPlacement(forUpdate(current), { except: tooOld }), undefined),
      });
    }
    return decided(plan, steadyStatus(revision, plan, input, current), false);
  }

  const baseRevision = revisionOfDaemonSet(base);
  if (abandoned.length > 0) {
    // A revision the spec moved past still holds nodes: they return to the base first.
    const target = abandoned[0]!;
    const move: Move = {
      base,
      target,
      state: parseUpgradeState(target, baseRevision),
      forceRollback: true,
    };
    const plan = observe(move);
    applyPlan(plan, move, input, writes);
    const targetPlacement = placementOfDaemonSet(target);
    const empty = "only" in targetPlacement && targetPlacement.only.length === 0;
    if (empty && plan.inFlight.length === 0) {
      // Every node is back: the state on the abandoned revision no longer matters, it goes whole.
      const kept = writes.filter(
        (w) => !(w.kind === "Update" && w.daemonSet.metadata?.uid === target.metadata?.uid),
      );
      writes.length = 0;
      writes.push(...kept);
      writes.push({
        kind: "Delete",
        name: target.metadata?.name ?? "",
        uid: target.metadata?.uid,
        revision: revisionOfDaemonSet(target),
      });
    }
    const status = upgradeStatus(plan, baseRevision, revisionOfDaemonSet(target));
    status.phase = "RollingBack";
    status.message = `returning nodes from revision ${displayRevision(revisionOfDaemonSet(target))} to ${displayRevision(baseRevision)} before the current spec's revision ${revision} rolls out`;
    return decided(plan, status, true);
  }

  if (baseRevision === revision) {
    // Steady: the current revision is the base; keep its node list to the targeted nodes.
    const plan = observe(undefined);
    const want = { except: tooOldNodes(plan) };
    const hasState = base.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE] !== undefined;
    if (!samePlacement(placementOfDaemonSet(base), want) || hasState) {
      writes.push({ kind: "Update", daemonSet: withState(withPlacement(forUpdate(base), want), undefined) });
    }
    return decided(plan, steadyStatus(revision, plan, input, base), false);
  }

  // An upgrade from the base's revision to the current one.
  if (current === undefined) {
    const state: UpgradeState = { from: baseRevision, rollingBack: false, nodes: {} };
    writes.push({
      kind: "Create",
      daemonSet: renderPluginDaemonSet(config, render, {
        placement: { only: [] },
        annotations: { [ANNOTATION_UPGRADE_STATE]: serializeUpgradeState(state) },
      }),
    });
    events.push({
      type: "Normal",
      reason: "UpgradeStarted",
      message: `upgrading the plugin from revision ${displayRevision(baseRevision)} to ${revision}, ${spec.strategy} strategy, at most ${String(spec.maxUnavailable)} node(s) at a time`,
    });
    const plan = observe(undefined);
    const status = upgradeStatus(plan, baseRevision, revision);
    status.updated = 0;
    status.summary = `0/${plan.total}`;
    status.phase = spec.paused ? "Paused" : "Progressing";
    return decided(plan, status, true);
  }

  const move: Move = {
    base,
    target: current,
    state: parseUpgradeState(current, baseRevision),
    forceRollback: false,
  };
  const plan = observe(move);
  const newlyFailed = plan.actions.filter((a) => a.kind === "MarkFailed").map((a) => a.node);
  applyPlan(plan, move, input, writes);
  for (const node of newlyFailed) {
    events.push({
      type: "Warning",
      reason: "NodeUpgradeFailed",
      message: `node ${node}: the kubelet did not advertise the plugin of revision ${revision} within ${spec.progressDeadlineSeconds}s${spec.autoRollback ? "; rolling back every node moved so far" : "; the upgrade is paused"}`,
    });
  }
  // Every targeted node runs the current revision, and nothing else is left to write: this pass makes it
  // the base. Until then the upgrade is still finishing, whatever the plan's phase says.
  const promote = plan.phase === "Complete" && writes.length === 0;
  if (promote) {
    // Every targeted node runs the current revision: it becomes the base, the old one goes.
    writes.push({
      kind: "Delete",
      name: base.metadata?.name ?? "",
      uid: base.metadata?.uid,
      revision: baseRevision,
    });
    writes.push({
      kind: "Update",
      daemonSet: withState(withPlacement(forUpdate(current), { except: tooOldNodes(plan) }), undefined),
    });
    events.push({
      type: "Normal",
      reason: "UpgradeComplete",
      message: `every targeted node (${plan.total}) runs the plugin of revision ${revision}`,
    });
  }
  // Complete only together with the current revision: a status never says Complete while it names the
  // old revision as the current one.
  const status = upgradeStatus(plan, promote ? revision : baseRevision, revision);
  if (plan.phase === "Complete" && !promote) status.phase = "Progressing";
  if (plan.phase === "RolledBack" || plan.phase === "Failed") {
    status.message = `node(s) ${plan.failed.slice(0, 5).join(", ")} did not get the new plugin advertised within ${spec.progressDeadlineSeconds}s; ${plan.phase === "RolledBack" ? "every node is back on the previous revision" : "the upgrade stopped"}: fix the spec to start a new one`;
  }
  return decided(
    plan,
    status,
    status.phase === "Progressing" || status.phase === "RollingBack" || status.phase === "Paused",
  );
}

/**
 * A move's objects read once per pass, not once per node: the two node lists as sets, and the pods
 * and reports by node (at thousands of nodes, per-node scans of every pod would be quadratic).
 */
interface MoveView {
  move: Move;
  /** Nodes the base leaves out, and nodes the target runs on. */
  except: ReadonlySet<string>;
  only: ReadonlySet<string>;
  pods: ReadonlyMap<string, V1Pod[]>;
  reports: ReadonlyMap<string, DeviceNodeState[]>;
}

function groupByNode<T>(items: readonly T[], nodeOf: (item: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const node = nodeOf(item);
    if (node === undefined) continue;
    const group = groups.get(node);
    if (group === undefined) groups.set(node, [item]);
    else group.push(item);
  }
  return groups;
}

function moveView(move: Move, input: RolloutInput): MoveView {
  const base = placementOfDaemonSet(move.base);
  const target = placementOfDaemonSet(move.target);
  return {
    move,
    except: new Set("except" in base ? base.except : []),
    only: new Set("only" in target ? target.only : []),
    pods: groupByNode(input.pods, (p) => p.spec?.nodeName),
    reports: groupByNode(input.reports, (r) => r.spec.nodeName),
  };
}

/** What the planner needs to know about one node, read from the objects. */
function observeNode(node: V1Node, view: MoveView | undefined, input: RolloutInput): NodeObservation {
  const name = node.metadata?.name ?? "";
  const kubeletVersion = node.status?.nodeInfo?.kubeletVersion ?? "";
  const allocatable = availableDevices(node, input);
  if (view === undefined) {
    return {
      name,
      kubeletVersion,
      inOld: true,
      inNew: false,
      oldPodPresent: false,
      newRegistered: false,
      oldRegistered: false,
      allocatable,
      unhealthy: 0,
    };
  }
  const { move } = view;
  const pods = view.pods.get(name) ?? [];
  const reports = view.reports.get(name) ?? [];
  const oldPods = pods.filter((p) => ownedBy(p, move.base));
  const newPods = pods.filter((p) => ownedBy(p, move.target));
  const newReport = registeredReport(reports, revisionOfDaemonSet(move.target), newPods.filter(podIsLive));
  const oldReport = registeredReport(reports, revisionOfDaemonSet(move.base), oldPods.filter(podIsLive));
  const judged = newReport ?? oldReport;
  const record = move.state.nodes[name] ?? {};
  // The gate wants the node back at its baseline, but a spec that itself advertises fewer devices
  // (fewer mock devices, fewer replicas) can never get there: the registered plugin's own count, as it
  // reports it, is then the most the kubelet should advertise, and the gate holds at that.
  const baseline =
    record.baseline !== undefined && judged?.status !== undefined
      ? Math.min(record.baseline, judged.status.advertised)
      : record.baseline;
  return {
    name,
    kubeletVersion,
    inOld: !view.except.has(name),
    inNew: view.only.has(name),
    oldPodPresent: oldPods.some(podIsPresent),
    newRegistered: newReport !== undefined,
    oldRegistered: oldReport !== undefined,
    allocatable,
    unhealthy: judged?.status ? unhealthyAdvertisedCount(judged.status) : 0,
    ...(record.startedAt !== undefined ? { startedAt: record.startedAt } : {}),
    ...(baseline !== undefined ? { baseline } : {}),
    ...(record.failed === true ? { failed: true } : {}),
  };
}

/**
 * Applies the plan's actions to copies of the two DaemonSets and their state, and queues the writes:
 * the target first (it holds the records and the failures, which must land before any list edit they
 * decide), then the base.
 */
function applyPlan(plan: Plan, move: Move, input: RolloutInput, writes: RolloutWrite[]): void {
  const basePlacement = placementOfDaemonSet(move.base);
  const targetPlacement = placementOfDaemonSet(move.target);
  const except = new Set("except" in basePlacement ? basePlacement.except : []);
  const only = new Set("only" in targetPlacement ? targetPlacement.only : []);
  const state: UpgradeState = structuredClone(move.state);
  const allocatable = new Map(input.nodes.map((n) => [n.metadata?.name ?? "", availableDevices(n, input)]));
  for (const action of plan.actions) {
    const rec = (state.nodes[action.node] ??= {});
    switch (action.kind) {
      case "AddToNew":
        only.add(action.node);
        break;
      case "RemoveFromNew":
        only.delete(action.node);
        break;
      case "AddToOld":
        except.delete(action.node);
        break;
      case "RemoveFromOld":
        except.add(action.node);
        break;
      case "RecordStart":
        rec.startedAt = input.now;
        break;
      case "RecordBaseline":
        rec.baseline = allocatable.get(action.node) ?? 0;
        break;
      case "MarkFailed":
        rec.failed = true;
        break;
    }
  }
  // Kubelets too old for any revision leave the base too.
  for (const node of tooOldNodes(plan)) except.add(node);
  state.rollingBack = plan.phase === "RollingBack" || plan.phase === "RolledBack";

  const targetWant: NodePlacement = { only: [...only] };
  const stateText = serializeUpgradeState(state);
  if (
    !samePlacement(targetPlacement, targetWant) ||
    move.target.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE] !== stateText
  ) {
    writes.push({
      kind: "Update",
      daemonSet: withState(withPlacement(forUpdate(move.target), targetWant), state),
    });
  }
  const baseWant: NodePlacement = { except: [...except] };
  if (!samePlacement(basePlacement, baseWant) || move.base.spec?.updateStrategy?.type !== "OnDelete") {
    writes.push({ kind: "Update", daemonSet: withPlacement(forUpdate(move.base), baseWant) });
  }
}

function tooOldNodes(plan: Plan): string[] {
  return plan.problems.filter((p) => p.reason === "KubeletTooOld").map((p) => p.node);
}

function problemsOf(plan: Plan): NodeProblem[] {
  return [
    ...plan.problems
      .filter((p) => p.reason === "KubeletTooOld")
      .map((p) => ({ node: p.node, reason: "KubeletTooOld" as const, message: p.message })),
    ...plan.failed.map((node) => ({
      node,
      reason: "UpgradeFailed" as const,
      message: "the kubelet did not advertise the new plugin within the progress deadline",
    })),
  ];
}

function upgradeStatus(plan: Plan, from: string, to: string): UpgradeStatus {
  const inFlight = bounded(plan.inFlight);
  const failed = bounded(plan.failed);
  return {
    phase: plan.phase,
    currentRevision: displayRevision(from),
    updateRevision: to,
    updated: plan.updated,
    total: plan.total,
    summary: `${plan.updated}/${plan.total}`,
    ...(inFlight.list ? { inFlight: inFlight.list } : {}),
    ...(inFlight.omitted ? { inFlightOmitted: inFlight.omitted } : {}),
    ...(failed.list ? { failed: failed.list } : {}),
    ...(failed.omitted ? { failedOmitted: failed.omitted } : {}),
  };
}

/**
 * No upgrade under way: updated counts the targeted nodes with a pod of the current revision (as a
 * DaemonSet's updatedNumberScheduled does; whether it serves is the Ready condition's business).
 */
function steadyStatus(
  revision: string,
  plan: Plan,
  input: RolloutInput,
  ds: V1DaemonSet | undefined,
): UpgradeStatus {
  const targeted = new Set(Object.keys(plan.modes));
  const withPod = new Set(
    input.pods
      .filter((p) => ds !== undefined && ownedBy(p, ds) && podIsPresent(p) && !p.metadata?.deletionTimestamp)
      .map((p) => p.spec?.nodeName ?? ""),
  );
  let updated = 0;
  for (const node of targeted) if (withPod.has(node)) updated++;
  const phase: UpgradePhase = "Complete";
  return {
    phase,
    currentRevision: revision,
    updateRevision: revision,
    updated,
    total: targeted.size,
    summary: `${updated}/${targeted.size}`,
  };
}
