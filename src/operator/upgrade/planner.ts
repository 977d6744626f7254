// The node-by-node plugin upgrade planner. One DaemonSet runs per plugin revision, each pinned to the
// nodes in its node list; the operator moves nodes between the lists. Everything a rollout needs to
// remember lives in cluster objects (the two node lists, and per node a start time, a baseline and a
// failed mark), so the planner keeps nothing between calls: it is a pure function of what the caller
// observed, and an operator that restarted mid-rollout plans from exactly where the cluster is.
import {
  DRA_SEAMLESS_UPGRADES,
  kubeletTooOld,
  MINIMUM_DRA_KUBELET,
  MINIMUM_KUBELET,
  parseKubeletVersion,
  PER_SOCKET_ENDPOINTS,
  supportsSurge,
} from "../model/kubelet-version.js";

import type { RolloutStrategy, UpgradeMode } from "../model/rollout.js";
import type { NodeObservation, PlanInput } from "./plan-input.js";

export type { NodeObservation, PlanInput };

/**
 * What the caller is to do. The list edits change a revision's node list. The Record and Mark
 * actions say what to persist for the node (in the cluster, so a restarted operator sees it):
 *
 * - `RecordStart`: store `startedAt = input.now`. Emitted once per node per rollout, when the node
 *   is first touched; the node's deadline runs from it.
 * - `RecordBaseline`: store `baseline = ` the node's `allocatable` as observed in this input. Emitted
 *   when a node starts, before anything is moved, so it is what the node advertised with the old
 *   plugin alone; the gates compare against it.
 * - `MarkFailed`: store `failed = true`; the node missed its deadline.
 * - `Fence` / `Unfence`: put the rollout's Replace taint on the node and store `fencedAt = input.now`
 *   (also for a node already tainted, whose fence had no time), or take it off (fenceReplace).
 *
 * The caller applies the actions in order and stops at the first one it cannot apply. The order is
 * chosen so that stopping anywhere leaves a state the next plan continues from: every MarkFailed
 * comes first (so a rollback's edits are never applied without the failure that decided it), and a
 * node's Record actions come before its list edits (so a node is never moved without its start time
 * and baseline).
 */
export type ActionKind =
  | "AddToNew"
  | "RemoveFromOld"
  | "AddToOld"
  | "RemoveFromNew"
  | "RecordStart"
  | "RecordBaseline"
  | "MarkFailed"
  | "Fence"
  | "Unfence";

export interface Action {
  node: string;
  kind: ActionKind;
}

export type RolloutPhase = "Progressing" | "Paused" | "Complete" | "RollingBack" | "RolledBack" | "Failed";

export interface NodeProblem {
  node: string;
  /**
   * KubeletTooOld: the node is not targeted at all (its version is too old or cannot be read).
   * SurgeUnsupported: Surge was asked for but the kubelet cannot take it; the node is replaced instead.
   */
  reason: "KubeletTooOld" | "SurgeUnsupported";
  message: string;
}

export interface Plan {
  /** In order; see ActionKind for how the caller applies them. */
  actions: Action[];
  /** The phase after this plan; the caller persists RollingBack/RolledBack as `rollingBack`. */
  phase: RolloutPhase;
  /**
   * Nodes that hold a maxUnavailable slot once the actions are applied: touched and not settled,
   * including nodes started by this plan. Failed nodes stay here until they settle, because a
   * failed node is as unavailable as any other.
   */
  inFlight: string[];
  /** Nodes that missed their deadline, persisted or marked by this plan. */
  failed: string[];
  /** Targeted nodes done on the new revision. */
  updated: number;
  /** Targeted nodes (nodes with a usable kubelet). */
  total: number;
  problems: NodeProblem[];
  /** The upgrade mode of every targeted node. */
  modes: Record<string, UpgradeMode>;
  /** PlanInput.startBlocked, where it kept a node from starting. */
  blocked?: string;
  /** The earliest time a fence this plan waits on has been on for fenceSettleMs: plan again then. */
  fenceSettlesAt?: number;
  /** Replace nodes whose new plugin starts ahead and stands by (PlanInput.standby), in name order. */
  standby: string[];
  /** Untouched nodes kept from starting by NodeObservation.startHeld, with its reason, in name order. */
  held?: { node: string; reason: string }[];
}

/**
 * The number of nodes that may be in flight: a count, or a percentage of the targeted nodes rounded
 * down, and at least 1 either way, as a DaemonSet rounds it. A limit of 0 would be a rollout that can
 * never move, which no one means; a malformed value gets the most cautious limit, 1 (refusing bad
 * values is the API validation's job, the planner just must not run away with them).
 */
export function resolveMaxUnavailable(value: number | `${number}%`, targeted: number): number {
  let limit: number;
  if (typeof value === "number") {
    limit = Math.floor(value);
  } else {
    const percent = Number(value.slice(0, -1));
    limit = Math.floor((targeted * percent) / 100);
  }
  return Number.isFinite(limit) && limit >= 1 ? limit : 1;
}

/** A node the rollout may move, with how it moves. */
interface Target {
  obs: NodeObservation;
  mode: UpgradeMode;
  /** A Replace whose new plugin starts ahead and stands by (PlanInput.standby). */
  standby: boolean;
}

/**
 * Whether a plugin revision is serving the node fully: registered, and the node advertises what it
 * did before it was touched, less what the plugin itself reports unhealthy (a device that broke
 * meanwhile is not the upgrade's fault). Without a baseline, which only happens when a node was
 * moved outside the planner or its record was lost, the weakest check that still catches the
 * zero-allocatable handover failure is kept: something is advertised.
 */
function gate(obs: NodeObservation, registered: boolean): boolean {
  if (!registered) return false;
  if (obs.baseline === undefined) return obs.allocatable > 0;
  return obs.allocatable >= obs.baseline - obs.unhealthy;
}

/**
 * Whether the rollout has touched the node: a start recorded, a failure recorded, or lists that differ
 * from the untouched state (old only). The list test keeps a node moved without its records (outside
 * the planner, or records lost) from looking untouched and being started a second time.
 */
function touched(obs: NodeObservation): boolean {
  return obs.startedAt !== undefined || obs.failed === true || obs.inNew || !obs.inOld;
}

/** Done on the new revision: only the new list, the old pod gone, and the new plugin serving. */
function done(obs: NodeObservation): boolean {
  return obs.inNew && !obs.inOld && !obs.oldPodPresent && gate(obs, obs.newRegistered);
}

/** Back on the old revision: only the old list, and the old plugin serving. */
function back(obs: NodeObservation): boolean {
  const judged = obs.oldAllocatable === undefined ? obs : { ...obs, allocatable: obs.oldAllocatable };
  return obs.inOld && !obs.inNew && !(obs.newPodPresent ?? false) && gate(judged, obs.oldRegistered);
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** Splits the nodes into targets, each with its mode, and problems. */
function classify(
  nodes: readonly NodeObservation[],
  strategy: RolloutStrategy,
  publish: "DevicePlugin" | "DRA",
  switching: boolean,
  standby: boolean,
): { targets: Target[]; problems: NodeProblem[] } {
  const dra = publish === "DRA";
  const requirement = dra ? MINIMUM_DRA_KUBELET : MINIMUM_KUBELET;
  const surgeFacts = dra ? DRA_SEAMLESS_UPGRADES : PER_SOCKET_ENDPOINTS;
  const targets: Target[] = [];
  const problems: NodeProblem[] = [];
  for (const obs of nodes) {
    const version = parseKubeletVersion(obs.kubeletVersion);
    if (version === undefined) {
      // A version that cannot be read cannot be trusted with either mode; treated like a too-old one.
      problems.push({
        node: obs.name,
        reason: "KubeletTooOld",
        message: `kubelet version ${JSON.stringify(obs.kubeletVersion)} cannot be parsed`,
      });
      continue;
    }
    const tooOld = kubeletTooOld(version, requirement);
    if (tooOld !== undefined) {
      problems.push({ node: obs.name, reason: tooOld.reason, message: tooOld.message });
      continue;
    }
    // A switch never surges: both paths would advertise the name on the node at once.
    const canSurge = !switching && supportsSurge(version, surgeFacts);
    if (strategy === "Surge" && !canSurge && !switching) {
      problems.push({
        node: obs.name,
        reason: "SurgeUnsupported",
        message: `kubelet ${version.raw.trim()} cannot run two instances of a ${dra ? "DRA driver" : "device plugin"} side by side; the node is replaced instead`,
      });
    }
    const mode = strategy !== "Replace" && canSurge ? "Surge" : "Replace";
    // Two instances side by side are the strategy's to allow; only the kubelet keeps them from both
    // registering. A DRA driver's instances hand over on their own (handover.ts), and a switch never has two.
    const ahead = standby && mode === "Replace" && strategy !== "Replace" && !dra && !switching;
    targets.push({ obs, mode, standby: ahead });
  }
  return { targets, problems };
}

/** Collects actions per node so they come out grouped by node in name order. */
class Actions {
  private readonly failures: Action[] = [];
  private readonly perNode = new Map<string, ActionKind[]>();

  markFailed(node: string): void {
    this.failures.push({ node, kind: "MarkFailed" });
  }

  add(node: string, ...kinds: ActionKind[]): void {
    const list = this.perNode.get(node);
    if (list === undefined) this.perNode.set(node, [...kinds]);
    else list.push(...kinds);
  }

  /** MarkFailed first (see ActionKind), then each node's actions, nodes in name order. */
  list(): Action[] {
    const out = [...this.failures];
    const nodes = [...this.perNode.keys()].sort();
    for (const node of nodes) for (const kind of this.perNode.get(node) ?? []) out.push({ node, kind });
    return out;
  }
}

/**
 * Plans the next step of a rollout from observed state. Pure and deterministic: nodes are taken in
 * name order, so the same input gives the same plan whatever order the caller listed them in. Node
 * names are unique (they are Node names); duplicates are not merged.
 */
export function planRollout(input: PlanInput): Plan {
  const { spec, now } = input;
  const nodes = [...input.nodes].sort(byName);
  const switching = input.switching === true;
  const { targets, problems } = classify(
    nodes,
    spec.strategy,
    input.publish ?? "DevicePlugin",
    switching,
    input.standby === true,
  );
  const limit = resolveMaxUnavailable(spec.maxUnavailable, targets.length);
  const fence = input.fenceReplace === true;
  const settleMs = fence ? Math.max(0, input.fenceSettleMs ?? 0) : 0;
  let fenceSettlesAt: number | undefined;
  const actions = new Actions();

  const failed = new Set(targets.filter((t) => t.obs.failed === true).map((t) => t.obs.name));
  // Deadlines belong to the forward rollout: a rollback has no deadline of its own (the start times
  // are the forward ones and would have expired), it waits for each node's old plugin instead.
  if (!input.rollingBack) {
    const deadline = spec.progressDeadlineSeconds * 1000;
    for (const { obs } of targets) {
      if (failed.has(obs.name) || !touched(obs) || done(obs) || obs.startedAt === undefined) continue;
      if (now - obs.startedAt > deadline && !gate(obs, obs.newRegistered)) {
        failed.add(obs.name);
        actions.markFailed(obs.name);
      }
    }
  }
  // Derived as well as persisted, so a caller that stopped between MarkFailed and persisting the
  // phase still rolls back; the persisted flag keeps a rollback going if autoRollback is turned off.
  const rollingBack = input.rollingBack || (spec.autoRollback && failed.size > 0);

  const inFlight: string[] = [];
  const held: { node: string; reason: string }[] = [];
  let rollbackPending = false;
  let blocked: string | undefined;
  if (rollingBack) {
    const waiting: Target[] = [];
    for (const t of targets) {
      const { obs } = t;
      // Nodes the rollout never touched are left alone; a fence left on one that is back comes off.
      if (!touched(obs) || back(obs)) {
        if (obs.fenced === true) actions.add(obs.name, "Unfence");
        continue;
      }
      if (done(obs)) {
        waiting.push(t);
        continue;
      }
      inFlight.push(obs.name);
      // The old plugin comes back beside the new one and registers before the new one goes, so a
      // node keeps advertising the resource throughout, whichever way it went forward. Leaving the
      // new list waits for the old plugin's registration only, not for allocatable: while both are
      // registered the node advertises what the later one does, which is the new plugin whenever
      // the old one never left, and a new plugin that advertises too little is a usual reason to
      // roll back; waiting for allocatable there would wait forever. Allocatable is judged once the
      // old plugin is alone, by back().
      // Known limit of this order: on a kubelet without per-socket endpoints (a Replace node under
      // Auto) the two plugins side by side are the handover ADR 0002 describes, and the old plugin
      // can lose its registration when the new one stops; such a node then stays in flight instead
      // of counting as back. Replacing in reverse would need to see the new pod gone, which the
      // observation does not carry.
      // A switch goes back the way it went forward, Replace-like: the new path stops and stops
      // advertising before the old one is assigned again.
      if (switching) {
        if (obs.inNew) actions.add(obs.name, "RemoveFromNew");
        else if (!obs.inOld && !obs.newPodPresent && !obs.newAdvertises) actions.add(obs.name, "AddToOld");
      } else if (!obs.inOld) actions.add(obs.name, "AddToOld");
      else if (obs.inNew && obs.oldRegistered) actions.add(obs.name, "RemoveFromNew");
    }
    rollbackPending = waiting.length > 0;
    if (!spec.paused) {
      for (const { obs } of waiting) {
        if (inFlight.length >= limit) break;
        inFlight.push(obs.name);
        actions.add(obs.name, switching ? "RemoveFromNew" : "AddToOld");
      }
    }
  } else {
    const untouched: Target[] = [];
    for (const t of targets) {
      const { obs, mode, standby } = t;
      if (!touched(obs)) {
        untouched.push(t);
        continue;
      }
      if (done(obs)) {
        // The new plugin's devices are in the Node object: new pods may come back.
        if (obs.fenced === true) actions.add(obs.name, "Unfence");
        continue;
      }
      inFlight.push(obs.name);
      // A failed node stays where it is, for someone to look at, unless a rollback takes it back.
      if (failed.has(obs.name)) continue;
      // Records lost or never written (the node was moved outside the planner): the deadline runs
      // from now, and a baseline is taken only while the old plugin is still the node's only one,
      // which is the only time it measures the right thing.
      if (obs.startedAt === undefined) actions.add(obs.name, "RecordStart");
      if (obs.baseline === undefined && obs.inOld && !obs.inNew) actions.add(obs.name, "RecordBaseline");
      if (mode === "Surge") {
        if (!obs.inNew) actions.add(obs.name, "AddToNew");
        else if (obs.inOld && gate(obs, obs.newRegistered)) actions.add(obs.name, "RemoveFromOld");
      } else if (obs.inOld) {
        // Fenced first, on a pass of its own: the old plugin stops only once the taint is in the Node
        // object the scheduler reads, and has been for settleMs. A fence without a time (or one from a
        // clock ahead of this one) is fenced again, which stamps the time.
        // Standing by: the new revision joins at once (its plugin starts while the fence settles), and the
        // old one leaves only once the new plugin stands by, or registered anyway (a plugin image from
        // before standby registers beside the old one; the kubelet cuts it off when the old one stops, and
        // it registers again).
        const since = obs.fencedAt ?? obs.startedAt;
        const joinNow = standby && !obs.inNew;
        const ready = !standby || obs.newStandingBy === true || obs.newRegistered;
        if (fence && obs.fenced !== true)
          actions.add(obs.name, "Fence", ...(joinNow ? ["AddToNew" as const] : []));
        else if (joinNow) actions.add(obs.name, "AddToNew");
        else if (!ready) continue;
        else if (settleMs === 0) actions.add(obs.name, "RemoveFromOld");
        else if (since === undefined || since > now) actions.add(obs.name, "Fence");
        else if (now - since < settleMs)
          fenceSettlesAt = Math.min(fenceSettlesAt ?? since + settleMs, since + settleMs);
        else actions.add(obs.name, "RemoveFromOld");
      } else if (!obs.inNew && !obs.oldPodPresent && !(obs.oldAdvertises ?? false)) {
        // A switch also waits for the old path's advertisement to be gone from the API server.
        // Only once the old pod is gone: two instances on a kubelet that cannot surge lose the resource.
        actions.add(obs.name, "AddToNew");
      }
    }
    // A failure pauses the rollout: nothing new starts. The in-flight count may already be over the
    // limit (a restarted operator, a lowered maxUnavailable): then nothing starts until it drops.
    const starting = new Set<string>();
    if (!spec.paused && failed.size === 0 && input.startBlocked !== undefined && untouched.length > 0) {
      blocked = input.startBlocked;
    } else if (!spec.paused && failed.size === 0) {
      for (const { obs, mode, standby } of untouched) {
        if (obs.startHeld !== undefined) {
          if (obs.startHeld !== "") held.push({ node: obs.name, reason: obs.startHeld });
          continue;
        }
        if (inFlight.length >= limit) break;
        inFlight.push(obs.name);
        starting.add(obs.name);
        // A fence left from before is fenced again where it must settle: its age is not known.
        const fenceFirst = fence && (obs.fenced !== true || settleMs > 0);
        const first: ActionKind[] =
          mode === "Surge"
            ? ["AddToNew"]
            : standby
              ? [...(fence ? (["Fence"] as const) : []), "AddToNew"]
              : [fenceFirst ? "Fence" : "RemoveFromOld"];
        actions.add(obs.name, "RecordBaseline", "RecordStart", ...first);
      }
    }
    // A fence an earlier rollout left on a node this one has not started: off.
    for (const { obs } of untouched) {
      if (obs.fenced === true && !starting.has(obs.name)) actions.add(obs.name, "Unfence");
    }
  }

  const updated = targets.filter((t) => done(t.obs)).length;
  let phase: RolloutPhase;
  if (rollingBack) phase = inFlight.length === 0 && !rollbackPending ? "RolledBack" : "RollingBack";
  else if (failed.size > 0) phase = "Failed";
  else if (updated === targets.length) phase = "Complete";
  else if (spec.paused) phase = "Paused";
  else phase = "Progressing";

  return {
    actions: actions.list(),
    phase,
    inFlight: inFlight.sort(),
    failed: [...failed].sort(),
    updated,
    total: targets.length,
    problems,
    modes: Object.fromEntries(targets.map((t) => [t.obs.name, t.mode])),
    ...(blocked !== undefined ? { blocked } : {}),
    ...(fenceSettlesAt !== undefined ? { fenceSettlesAt } : {}),
    standby: targets.filter((t) => t.standby).map((t) => t.obs.name),
    ...(held.length > 0 ? { held } : {}),
  };
}
