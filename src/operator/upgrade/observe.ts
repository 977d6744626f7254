// What the planner is told about each node, read from the cluster objects once per pass: which
// revisions run on it (its labels, or the node lists of DaemonSets an older operator placed), its record
// of the upgrade, its plugin pods and reports, and the devices it advertises. Pure.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { DeviceNodeState, REGISTRATION_STATES } from "../../api/v1beta1/devicenodestate.js";
import type { PublishMode } from "../../api/v1beta1/publish.js";
import type { DesiredRevision } from "../model/rollout.js";
import { nodeKeys, type NodeKeys } from "../model/targeting.js";
import { parseCountQuantity } from "../../api/quantity.js";
import { unhealthyAdvertisedCount } from "../../contract/node-state.js";
import {
  legacyPlacement,
  publishModeOfDaemonSet,
  revisionOfDaemonSet,
  type LegacyNodeRecord,
  type UpgradeState,
} from "./daemonset-state.js";
import { isFenced, nodeLabels, parseNodeRecord, runsRevision, type NodeRecord } from "./node-labels.js";
import type { NodeObservation } from "./planner.js";
import type { MappingFacts } from "../dra-switch/gate.js";
import type { RecordTimeField, RecordTimes } from "./record-clock.js";

/**
 * What one rollout pass reads (decideRollout's input): the revision of the config's current spec, as the
 * reconcile step rendered it, and the cluster objects of its plugin. No DevicePluginConfig: what the
 * rollout needs of the spec is in the revision.
 */
export interface RolloutInput {
  desired: DesiredRevision;
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
  /**
   * Either mode, once the slice cache is complete: the devices each node's ResourceSlices of the config's
   * driver publish, with an entry (0 for an empty pool) wherever a slice exists. A publish switch reads
   * it for the DRA path's side of each node; without it a switch from DRA never sees the slices gone.
   */
  sliceDevices?: ReadonlyMap<string, number> | undefined;
  /** What ExtendedResourceMapping says, for the gate of a switch to DRA (dra-switch/gate.ts). */
  mapping?: MappingFacts | undefined;
  /** How long a Replace fence is on before the old plugin stops; FENCE_SETTLE_MS when absent. */
  fenceSettleMs?: number;
  /** ms epoch: the stamp written into a node's record (RecordStart, Fence). */
  now: number;
  /**
   * The times the planner judges ages by: this operator's monotonic clock and when it first saw each
   * record stamp (record-clock.ts). Without it, the stamps are judged against `now`, as written.
   */
  recordTimes?: RecordTimes;
  /** Nodes that may not start moving forward yet, and why (NodeObservation.startHeld). */
  startHeld?: ReadonlyMap<string, string> | undefined;
}

/** An upgrade under way: nodes move from the base DaemonSet to the target, or back. */
export interface Move {
  base: V1DaemonSet;
  target: V1DaemonSet;
  state: UpgradeState;
  /** Moving nodes back off `target` (an abandoned revision, or after a failure). */
  forceRollback: boolean;
}

/** What the gate compares with a node's baseline: allocatable, or in DRA mode the published devices. */
export function availableDevices(node: V1Node, input: RolloutInput): number {
  if (input.publishedDevices !== undefined) return input.publishedDevices.get(node.metadata?.name ?? "") ?? 0;
  return parseCountQuantity(node.status?.allocatable?.[input.desired.resourceName]) ?? 0;
}

/**
 * What one path advertises on the node: the device plugin's allocatable, or the devices the DRA path's
 * slices publish; `present` whether it advertises at all (allocatable above 0; any slice, an empty pool
 * too). Unknown slices (cache not complete) count as present, so a switch waits rather than guesses.
 */
export function pathDevices(
  node: V1Node,
  input: RolloutInput,
  path: PublishMode,
): { count: number; present: boolean } {
  if (path === "DevicePlugin") {
    const count = parseCountQuantity(node.status?.allocatable?.[input.desired.resourceName]) ?? 0;
    return { count, present: count > 0 };
  }
  if (input.sliceDevices === undefined) return { count: 0, present: true };
  const count = input.sliceDevices.get(node.metadata?.name ?? "");
  return { count: count ?? 0, present: count !== undefined };
}

/** What RecordBaseline stores: in a switch the old path's count, the only one the node had before. */
export function baselineDevices(node: V1Node, view: MoveView, input: RolloutInput): number {
  return view.switching === undefined
    ? availableDevices(node, input)
    : pathDevices(node, input, view.switching.from).count;
}

/** Whether the pod is one of the DaemonSet's (by owner uid). */
export function ownedBy(pod: V1Pod, ds: V1DaemonSet): boolean {
  const uid = ds.metadata?.uid;
  return uid !== undefined && (pod.metadata?.ownerReferences ?? []).some((o) => o.uid === uid);
}

function podIsLive(pod: V1Pod): boolean {
  return !pod.metadata?.deletionTimestamp && pod.status?.phase === "Running";
}

/** A pod that has not finished: it still holds its node, running or not. */
export function podIsPresent(pod: V1Pod): boolean {
  return pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed";
}

/** The report of `revision` on the node in registration state `state`, written by a live pod of `pods`. */
function reportIn(
  reports: readonly DeviceNodeState[],
  revision: string,
  pods: readonly V1Pod[],
  state: (typeof REGISTRATION_STATES)[number],
): DeviceNodeState | undefined {
  const livePods = pods.filter(podIsLive);
  if (livePods.length === 0) return undefined;
  const uids = new Set(livePods.map((p) => p.metadata?.uid));
  return reports.find(
    (r) =>
      (r.spec.revision ?? "") === revision &&
      r.status?.registration.state === state &&
      // A report without a pod uid comes from a version that did not write one: its pod is alive.
      (r.status.podUID === undefined || uids.has(r.status.podUID)),
  );
}

/**
 * A move's objects read once per pass, not once per node: where each revision runs, and the pods and
 * reports by node (at thousands of nodes, per-node scans of every pod would be quadratic).
 */
export interface MoveView {
  move: Move;
  keys: NodeKeys;
  baseRevision: string;
  targetRevision: string;
  /** The node lists of a DaemonSet an older operator placed by name; undefined where labels place it. */
  legacyExcept: ReadonlySet<string> | undefined;
  legacyOnly: ReadonlySet<string> | undefined;
  pods: ReadonlyMap<string, V1Pod[]>;
  reports: ReadonlyMap<string, DeviceNodeState[]>;
  /** Set when the revisions publish through different paths: a publish switch. */
  switching: { from: PublishMode; to: PublishMode } | undefined;
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

export function moveView(move: Move, input: RolloutInput): MoveView {
  const base = legacyPlacement(move.base);
  const target = legacyPlacement(move.target);
  const from = publishModeOfDaemonSet(move.base);
  const to = publishModeOfDaemonSet(move.target);
  return {
    switching: from === to ? undefined : { from, to },
    move,
    keys: nodeKeys(input.desired.configName),
    baseRevision: revisionOfDaemonSet(move.base),
    targetRevision: revisionOfDaemonSet(move.target),
    legacyExcept: base === undefined ? undefined : new Set("except" in base ? base.except : []),
    legacyOnly: target === undefined ? undefined : new Set("only" in target ? target.only : []),
    pods: groupByNode(input.pods, (p) => p.spec?.nodeName),
    reports: groupByNode(input.reports, (r) => r.spec.nodeName),
  };
}

/** Which of the move's revisions run on the node: its labels, or an older operator's node lists. */
export function membershipOf(node: V1Node, view: MoveView): { old: boolean; new: boolean } {
  const name = node.metadata?.name ?? "";
  const labels = nodeLabels(node, view.keys);
  return {
    old:
      view.legacyExcept !== undefined
        ? !view.legacyExcept.has(name)
        : runsRevision(labels, view.baseRevision, true),
    new:
      view.legacyOnly !== undefined
        ? view.legacyOnly.has(name)
        : runsRevision(labels, view.targetRevision, false),
  };
}

/**
 * The node's record of the move: its annotation, or what an older operator kept for it in the moving
 * DaemonSet's state (carried over to the node by the first write).
 */
export function recordOf(node: V1Node, view: MoveView): NodeRecord | undefined {
  const fromNode = parseNodeRecord(node, view.keys, view.baseRevision, view.targetRevision);
  if (fromNode !== undefined) return fromNode;
  const legacy: LegacyNodeRecord | undefined = view.move.state.legacyNodes[node.metadata?.name ?? ""];
  return legacy === undefined ? undefined : { from: view.baseRevision, to: view.targetRevision, ...legacy };
}

/** What the planner needs to know about one node, read from the objects. */
export function observeNode(node: V1Node, view: MoveView | undefined, input: RolloutInput): NodeObservation {
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
  const newReport = reportIn(reports, view.targetRevision, newPods, "Registered");
  const oldReport = reportIn(reports, view.baseRevision, oldPods, "Registered");
  const judged = newReport ?? oldReport;
  const record: Partial<NodeRecord> = recordOf(node, view) ?? {};
  const membership = membershipOf(node, view);
  // The gate wants the node back at its baseline, but a spec that itself advertises fewer devices
  // (fewer mock devices, fewer replicas) can never get there: the registered plugin's own count, as it
  // reports it, is then the most the kubelet should advertise, and the gate holds at that.
  const baseline =
    record.baseline !== undefined && judged?.status !== undefined
      ? Math.min(record.baseline, judged.status.advertised)
      : record.baseline;
  const switched = view.switching === undefined ? undefined : switchFields(node, view, input, newPods);
  const seen = (field: RecordTimeField, stamp: number): number =>
    input.recordTimes?.seen(name, record.to ?? view.targetRevision, field, stamp) ?? stamp;
  return {
    name,
    kubeletVersion,
    inOld: membership.old,
    inNew: membership.new,
    oldPodPresent: oldPods.some(podIsPresent),
    newRegistered: newReport !== undefined,
    oldRegistered: oldReport !== undefined,
    ...(newReport === undefined && reportIn(reports, view.targetRevision, newPods, "StandingBy")
      ? { newStandingBy: true }
      : {}),
    allocatable: switched?.allocatable ?? allocatable,
    ...(switched?.fields ?? {}),
    unhealthy: judged?.status ? unhealthyAdvertisedCount(judged.status) : 0,
    ...(record.startedAt !== undefined ? { startedAt: seen("startedAt", record.startedAt) } : {}),
    ...(baseline !== undefined ? { baseline } : {}),
    ...(record.failed === true ? { failed: true } : {}),
    ...(isFenced(node, view.keys) ? { fenced: true } : {}),
    ...(record.fencedAt !== undefined ? { fencedAt: seen("fencedAt", record.fencedAt) } : {}),
    ...(input.startHeld?.has(name) === true ? { startHeld: input.startHeld.get(name)! } : {}),
  };
}

/** A switch's side of a node's observation: each path's advertisement, judged per path. */
function switchFields(
  node: V1Node,
  view: MoveView,
  input: RolloutInput,
  newPods: readonly V1Pod[],
): { allocatable: number; fields: Partial<NodeObservation> } {
  const { from, to } = view.switching!;
  const old = pathDevices(node, input, from);
  const next = pathDevices(node, input, to);
  return {
    allocatable: next.count,
    fields: {
      oldAdvertises: old.present,
      newAdvertises: next.present,
      oldAllocatable: old.count,
      newPodPresent: newPods.some(podIsPresent),
    },
  };
}
