// From the revision of a config's current spec (model/rollout.ts, rendered by the reconcile step) and the
// cluster objects of its plugin, the writes that move its upgrade forward: pure, and blind to the config.
// One DaemonSet per plugin revision (ADR 0003); labels on each Node say which revisions run there (ADR
// 0004). The "base" DaemonSet runs every targeted node without a revision label and those whose labels
// name it; a revision that nodes are moving to, or back from, runs the nodes whose labels name it and
// carries the upgrade's phase in an annotation (daemonset-state.ts). The planner (planner.ts) decides the
// moves from the observations read out of the objects (observe.ts); this module turns its actions into
// Node patches (node-labels.ts) and DaemonSet writes, in an order that leaves a state the next pass
// continues from if it stops anywhere. Writes carry the resourceVersion they were planned from, so a
// stale cache or a second leader gets a conflict instead of acting twice.
import type { V1DaemonSet } from "@kubernetes/client-node";
import type { NodeProblem, UpgradeStatus } from "../../api/v1beta1/status.js";
import { containsDesired, podSpecHoldsRendered, type PodSpecLike } from "../model/drift.js";
import { nodeKeys, targetingOfAffinity, type PlacementRole } from "../model/targeting.js";
import {
  ANNOTATION_UPGRADE_STATE,
  byCreation,
  forUpdate,
  hasRole,
  parseUpgradeState,
  publishModeOfDaemonSet,
  revisionOfDaemonSet,
  serializeUpgradeState,
  withRole,
  withState,
  type UpgradeState,
} from "./daemonset-state.js";
import {
  encodeMembership,
  isFenced,
  nodeLabels,
  nodePatch,
  type NodePatch,
  type NodeRecord,
} from "./node-labels.js";
import {
  baselineDevices,
  membershipOf,
  moveView,
  observeNode,
  recordOf,
  type Move,
  type MoveView,
  type RolloutInput,
} from "./observe.js";
import type { UpgradeMode } from "../model/rollout.js";
import { planRollout, type Plan } from "./planner.js";
import { displayRevision, problemsOf, steadyStatus, tooOldNodes, upgradeStatus } from "./rollout-status.js";

import { switchStartBlocked } from "../dra-switch/gate.js";
import { switchEvents, switchMessage } from "../dra-switch/events.js";
import { nodesToClearOfSlices } from "../dra-switch/slices.js";

export type { RolloutInput } from "./observe.js";

/** While an upgrade moves, come back this often: deadlines pass without any object changing. */
export const UPGRADE_POLL_MS = 2_000;
/** How long a Replace fence is on before the old plugin leaves (PlanInput.fenceSettleMs; docs/dra.md). */
export const FENCE_SETTLE_MS = 5_000;

export type RolloutWrite =
  /** Create the DaemonSet (POST: fails if it exists, so a stale cache never overwrites a state). */
  | { kind: "Create"; daemonSet: V1DaemonSet }
  /** Replace the DaemonSet (PUT with the resourceVersion it was planned from). */
  | { kind: "Update"; daemonSet: V1DaemonSet }
  /** Delete the DaemonSet, if it still has this uid. */
  | { kind: "Delete"; name: string; uid: string | undefined; revision: string }
  /**
   * Patch a Node's revision labels, upgrade record and fence (with the resourceVersion it was planned
   * from). Patches of different nodes may be sent together, but an `ordered` one (a node marked failed)
   * must land before any patch after it: a rollback's moves never land without the failure that decided
   * them.
   */
  | { kind: "PatchNode"; patch: NodePatch; ordered?: true }
  /**
   * A publish switch leaving DRA on the node: delete the node's ResourceSlices of the config (its DRA
   * plugin is gone and never deletes its own pool). The device plugin starts there only once they are.
   */
  | { kind: "DeleteSlices"; node: string };

export interface RolloutEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
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

/**
 * Decides the writes for the config's plugin DaemonSets and its nodes' labels. Cases, from the
 * DaemonSets alone:
 * - none: create the current revision as the base;
 * - only the current revision: it is the base, on every targeted node but kubelets too old;
 * - a revision other than the base and the current one holds nodes (an upgrade that the spec moved
 *   past): move its nodes back to the base first, then delete it;
 * - the base is another revision: create the current one with no nodes, then move nodes node by node;
 *   once every targeted node runs it, delete the base and make the current one the base.
 */
export function decideRollout(input: RolloutInput): RolloutDecision {
  const { desired } = input;
  const now = input.recordTimes?.now ?? input.now; // ages: record-clock.ts; input.now stamps records
  const revision = desired.revision;
  const spec = desired.rollout;
  const live = input.daemonSets.filter((ds) => !ds.metadata?.deletionTimestamp).sort(byCreation);
  // The base is the revision without an upgrade's state: a moving one is created with it, beside the
  // base, and loses it only when it becomes the base, once the old one is deleted. Told by that, not by
  // the placement, so a hand edit of a DaemonSet's affinity cannot change its role (it is put back
  // instead); not by age either, since creation times have a resolution of one second.
  const base = live.find((ds) => !hasState(ds)) ?? live[0];
  const current = live.find((ds) => revisionOfDaemonSet(ds) === revision);
  const abandoned = live.filter((ds) => ds !== base && revisionOfDaemonSet(ds) !== revision);
  const liveRevisions = new Set([revision, ...live.map(revisionOfDaemonSet)]);

  // Too-old kubelets are never targeted, by any revision; the planner says which they are.
  // A publish switch: every node replaced, the path being left gone before the other starts; a switch
  // to DRA starts nodes only while the DeviceClass maps the extended resource (dra-switch/gate.ts).
  const observe = (view: MoveView | undefined, move: Move | undefined): Plan => {
    const switching = view?.switching;
    const blocked =
      switching === undefined || move?.forceRollback === true
        ? undefined
        : switchStartBlocked({ ...switching, mapping: input.mapping });
    return planRollout({
      nodes: input.nodes.map((n) => observeNode(n, view, input)),
      spec,
      now,
      rollingBack: move === undefined ? false : move.state.rollingBack || move.forceRollback,
      publish: desired.publish,
      fenceReplace: true,
      standby: true,
      fenceSettleMs: input.fenceSettleMs ?? FENCE_SETTLE_MS,
      ...(switching !== undefined ? { switching: true } : {}),
      ...(blocked !== undefined ? { startBlocked: blocked } : {}),
    });
  };
  /** The switch's per-node events and status message, where the move is a switch. */
  const narrate = (plan: Plan, view: MoveView, status: UpgradeStatus): void => {
    if (view.switching === undefined) return;
    const back = plan.phase === "RollingBack" || plan.phase === "RolledBack";
    if ((back ? view.switching.to : view.switching.from) === "DRA") {
      const inFlight = new Set(plan.inFlight);
      const observed = input.nodes.filter((n) => inFlight.has(n.metadata?.name ?? ""));
      for (const node of nodesToClearOfSlices(
        observed.map((n) => observeNode(n, view, input)),
        !back,
      ))
        writes.push({ kind: "DeleteSlices", node });
    }
    events.push(...switchEvents(plan.actions, view.switching, desired.resourceName));
    if (status.message === undefined && status.phase !== "Complete")
      status.message = switchMessage(view.switching, plan.inFlight, plan.blocked, back);
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
    // A fence that settles sooner than the poll is planned again the moment it does.
    ...(requeue
      ? { requeueAfterMs: Math.min(UPGRADE_POLL_MS, Math.max(1, (plan.fenceSettlesAt ?? Infinity) - now)) }
      : {}),
  });

  if (base === undefined || revisionOfDaemonSet(base) === revision) {
    // Steady: the current revision is (or becomes) the base, on every targeted node but kubelets too
    // old, which carry the no-revision label. Labels first, so a DaemonSet placed by node name keeps
    // its nodes until the labels that place it from now on are there.
    const plan = observe(undefined, undefined);
    writes.push(...steadyNodePatches(input, revision, tooOldNodes(plan)));
    if (current === undefined) {
      writes.push({ kind: "Create", daemonSet: structuredClone(desired.daemonSets.base) });
    } else {
      const rendered = desired.daemonSets.base;
      if (drifted(current, rendered) || hasState(current)) {
        writes.push({ kind: "Update", daemonSet: withState(asRendered(current, rendered), undefined) });
      }
    }
    return decided(plan, steadyStatus(revision, plan, input.pods, current), false);
  }

  const baseRevision = revisionOfDaemonSet(base);
  if (abandoned.length > 0) {
    // A revision the spec moved past still holds nodes: they return to the base first.
    const target = abandoned[0]!;
    const move: Move = { base, target, state: parseUpgradeState(target, baseRevision), forceRollback: true };
    const view = moveView(move, input);
    const plan = observe(view, move);
    applyPlan(plan, view, input, writes, undefined);
    const empty = input.nodes.every((n) => !membershipOf(n, view).new);
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
    narrate(plan, view, status);
    status.message = `returning nodes from revision ${displayRevision(revisionOfDaemonSet(target))} to ${displayRevision(baseRevision)} before the current spec's revision ${revision} rolls out`;
    return decided(plan, status, true);
  }

  // An upgrade from the base's revision to the current one.
  if (current === undefined) {
    const state: UpgradeState = { from: baseRevision, rollingBack: false, legacyNodes: {} };
    writes.push({ kind: "Create", daemonSet: withState(structuredClone(desired.daemonSets.moving), state) });
    const fromMode = publishModeOfDaemonSet(base);
    events.push({
      type: "Normal",
      reason: "UpgradeStarted",
      message:
        fromMode === desired.publish
          ? `upgrading the plugin from revision ${displayRevision(baseRevision)} to ${revision}, ${spec.strategy} strategy, at most ${String(spec.maxUnavailable)} node(s) at a time`
          : `switching spec.publish from ${fromMode} to ${desired.publish} (revision ${displayRevision(baseRevision)} to ${revision}) node by node, each node replaced whatever the strategy, at most ${String(spec.maxUnavailable)} node(s) at a time`,
    });
    const plan = observe(undefined, undefined);
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
  const view = moveView(move, input);
  const plan = observe(view, move);
  const newlyFailed = plan.actions.filter((a) => a.kind === "MarkFailed").map((a) => a.node);
  applyPlan(plan, view, input, writes, desired.daemonSets.moving);
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
      daemonSet: withState(withRole(forUpdate(current), desired.configName, "base"), undefined),
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
  narrate(plan, view, status);
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
 * Whether a DaemonSet no longer holds what the operator renders for it: a hand edit of its template
 * (image, args, securityContext, volumes, tolerations, placement) or of its labels. Fields the API server
 * or other controllers add do not count (containsDesired).
 */
function drifted(ds: V1DaemonSet, rendered: V1DaemonSet): boolean {
  return (
    !containsDesired(rendered.spec, ds.spec) ||
    !podSpecHoldsRendered(
      rendered.spec?.template.spec as PodSpecLike | undefined,
      ds.spec?.template.spec as PodSpecLike | undefined,
    ) ||
    !containsDesired(rendered.metadata?.labels, ds.metadata?.labels) ||
    ds.spec?.updateStrategy?.type !== "OnDelete"
  );
}

/**
 * The cached DaemonSet with the rendered spec and labels put back, for a PUT with its resourceVersion.
 * Annotations others added stay. OnDelete: putting the template back restarts no pod (a pod started from
 * the edited template keeps running until it restarts, as a pod of the edit would with any DaemonSet).
 */
function asRendered(ds: V1DaemonSet, rendered: V1DaemonSet): V1DaemonSet {
  const copy = forUpdate(ds);
  copy.spec = structuredClone(rendered.spec!);
  copy.metadata = { ...copy.metadata, labels: { ...copy.metadata?.labels, ...rendered.metadata?.labels } };
  return copy;
}

function hasState(ds: V1DaemonSet): boolean {
  return ds.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE] !== undefined;
}

/**
 * With no upgrade under way, every targeted node runs the one revision: nodes whose labels name another
 * (or none, or a surge) get the labels of the base, kubelets too old the no-revision label. Nodes without
 * a label run the base already and are not written.
 */
function steadyNodePatches(input: RolloutInput, revision: string, tooOld: readonly string[]): RolloutWrite[] {
  const keys = nodeKeys(input.desired.configName);
  const skipped = new Set(tooOld);
  const writes: RolloutWrite[] = [];
  for (const node of input.nodes) {
    const want = { old: !skipped.has(node.metadata?.name ?? ""), new: false };
    // No node is fenced outside a rollout: a taint a rollout left (the operator stopped, the spec changed
    // back) comes off.
    const labels = encodeMembership(nodeLabels(node, keys), want, revision, revision);
    const patch = nodePatch(node, keys, labels, undefined, { on: false, revision });
    if (patch !== undefined) writes.push({ kind: "PatchNode", patch });
  }
  return writes;
}

/**
 * Applies the plan's actions to the nodes' membership and records, and queues the writes: one patch per
 * node that changes, in the order the plan first names the node (every MarkFailed first, so a rollback's
 * moves never land without the failure that decided them), then the DaemonSets: the moving one's phase
 * and placement, then the base's placement. A DaemonSet an older operator placed by name is rewritten
 * only after every node carries the labels that place it from then on.
 */
function applyPlan(
  plan: Plan,
  view: MoveView,
  input: RolloutInput,
  writes: RolloutWrite[],
  renderedTarget: V1DaemonSet | undefined,
): void {
  const { move, keys } = view;
  const configName = input.desired.configName;
  const byName = new Map(input.nodes.map((n) => [n.metadata?.name ?? "", n]));
  interface Wanted {
    membership: { old: boolean; new: boolean };
    record?: NodeRecord;
    fenced: boolean;
  }
  const wanted = new Map<string, Wanted>();
  const entry = (name: string): Wanted => {
    let e = wanted.get(name);
    if (e === undefined) {
      const node = byName.get(name)!;
      const record = recordOf(node, view);
      e = {
        membership: membershipOf(node, view),
        fenced: isFenced(node, keys),
        ...(record !== undefined ? { record: { ...record } } : {}),
      };
      wanted.set(name, e);
    }
    return e;
  };
  const recordFor = (e: { record?: NodeRecord }): NodeRecord =>
    (e.record ??= { from: view.baseRevision, to: view.targetRevision });
  const failing = new Set(plan.actions.filter((a) => a.kind === "MarkFailed").map((a) => a.node));
  const standby = new Set(plan.standby);
  for (const action of plan.actions) {
    const e = entry(action.node);
    switch (action.kind) {
      case "AddToNew":
        e.membership.new = true;
        // The record tells the new plugin to stand by until the old one has stopped (contract/node-upgrade.ts).
        if (standby.has(action.node) && e.membership.old) recordFor(e).standby = true;
        break;
      case "RemoveFromNew":
        e.membership.new = false;
        break;
      case "AddToOld":
        e.membership.old = true;
        break;
      case "RemoveFromOld":
        e.membership.old = false;
        break;
      case "RecordStart":
        recordFor(e).startedAt = input.now;
        break;
      case "RecordBaseline":
        recordFor(e).baseline = baselineDevices(byName.get(action.node)!, view, input);
        break;
      case "MarkFailed":
        recordFor(e).failed = true;
        break;
      case "Fence":
        e.fenced = true;
        recordFor(e).fencedAt = input.now;
        break;
      case "Unfence":
        e.fenced = false;
        break;
    }
  }
  // Kubelets too old for any revision run neither.
  for (const name of tooOldNodes(plan))
    if (byName.has(name)) entry(name).membership = { old: false, new: false };
  // Under an older operator's placement every node's membership must move into labels before its
  // DaemonSets change; records it kept in its state annotation move onto their nodes.
  const migrating = view.legacyExcept !== undefined || view.legacyOnly !== undefined;
  if (migrating) for (const name of byName.keys()) entry(name);
  for (const [name, e] of wanted) {
    const node = byName.get(name)!;
    const labels = encodeMembership(
      nodeLabels(node, keys),
      e.membership,
      view.baseRevision,
      view.targetRevision,
    );
    const patch = nodePatch(node, keys, labels, e.record, { on: e.fenced, revision: view.targetRevision });
    if (patch !== undefined)
      writes.push({ kind: "PatchNode", patch, ...(failing.has(name) ? { ordered: true } : {}) });
  }

  const state: UpgradeState = {
    from: view.baseRevision,
    rollingBack: plan.phase === "RollingBack" || plan.phase === "RolledBack",
    legacyNodes: {},
  };
  // The moving revision is the current spec's (not an abandoned one): its template is put back if edited.
  // The base's is an older spec's, which cannot be rendered again; only its placement is kept, with the
  // current spec's targeting (nodes a higher-priority config took since are left on both revisions).
  const targeting = targetingOfAffinity(renderedTarget?.spec?.template.spec?.affinity);
  const dsWrite = (ds: V1DaemonSet, role: PlacementRole, withPhase: boolean, rendered?: V1DaemonSet) => {
    const phaseChanged =
      withPhase && ds.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE] !== serializeUpgradeState(state);
    const edited = rendered !== undefined && drifted(ds, rendered);
    if (!phaseChanged && !edited && hasRole(ds, configName, role, targeting)) return;
    const copy = withRole(edited ? asRendered(ds, rendered) : forUpdate(ds), configName, role, targeting);
    writes.push({ kind: "Update", daemonSet: withPhase ? withState(copy, state) : copy });
  };
  dsWrite(move.target, "moving", true, renderedTarget);
  dsWrite(move.base, "base", false);
}
