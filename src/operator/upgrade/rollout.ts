// From a config and the cluster objects of its plugin, the writes that move its upgrade forward: pure.
// One DaemonSet per plugin revision (ADR 0003). The "base" DaemonSet runs every targeted node but a list
// (`except`); a revision that nodes are moving to, or back from, runs exactly a list of nodes (`only`)
// and carries the upgrade's state in an annotation (daemonset-state.ts). The planner (planner.ts) decides
// the moves from the observations read out of the objects (observe.ts); this module applies its actions
// to copies of the DaemonSets and says what to write, in an order that leaves a state the next pass
// continues from if it stops anywhere. Writes carry the resourceVersion they were planned from, so a
// stale cache or a second leader gets a conflict instead of acting twice.
import type { V1DaemonSet } from "@kubernetes/client-node";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { NodeProblem, UpgradeStatus } from "../../api/v1beta1/status.js";
import { pluginRevision, renderPluginDaemonSet, type NodePlacement } from "../render/index.js";
import {
  ANNOTATION_UPGRADE_STATE,
  byCreation,
  forUpdate,
  parseUpgradeState,
  placementOfDaemonSet,
  revisionOfDaemonSet,
  samePlacement,
  serializeUpgradeState,
  withPlacement,
  withState,
  type UpgradeState,
} from "./daemonset-state.js";
import { availableDevices, moveView, observeNode, type Move, type RolloutInput } from "./observe.js";
import { planRollout, type Plan, type RolloutSpec, type UpgradeMode } from "./planner.js";
import { displayRevision, problemsOf, steadyStatus, tooOldNodes, upgradeStatus } from "./rollout-status.js";

export type { RolloutInput } from "./observe.js";

/** While an upgrade moves, come back this often: deadlines pass without any object changing. */
export const UPGRADE_POLL_MS = 2_000;

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
    return decided(plan, steadyStatus(revision, plan, input.pods, current), false);
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
    return decided(plan, steadyStatus(revision, plan, input.pods, base), false);
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
