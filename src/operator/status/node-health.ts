// One node's view for a config: the kubelet's advertised counts, the plugin pod and the plugin's report,
// and the one problem (if any) they add up to.
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { parseCountQuantity } from "../../api/quantity.js";
import type { DeviceNodeState, DeviceNodeStateStatus } from "../../api/v1beta1/devicenodestate.js";
import { MAX_PROBLEM_DEVICES, type NodeProblem, type ProblemReason } from "../../api/v1beta1/status.js";
import { hasCurrentName, heldOutCount, unhealthyAdvertisedCount } from "../../contract/node-state.js";
import { replicaId } from "../../contract/replica-id.js";
import { ANNOTATION_CONFIG_HASH } from "../model/names.js";
import { timestampMillis } from "./conflicts.js";

/**
 * Problem reasons from the most to the least fundamental: a node shows the first that applies, since
 * each one explains the ones after it (no pod → no registration → no capacity → wrong counts).
 */
export const PROBLEM_PRIORITY: readonly ProblemReason[] = [
  "PluginNotReady",
  "PluginNotRegistered",
  "NoCapacity",
  "CapacityMismatch",
  "UnhealthyDevices",
];

const MAX_MESSAGE = 1024;

export function podIsReady(pod: V1Pod): boolean {
  return (
    pod.status?.phase === "Running" &&
    (pod.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True")
  );
}

export function podRunsConfigHash(pod: V1Pod, configHash: string): boolean {
  return pod.metadata?.annotations?.[ANNOTATION_CONFIG_HASH] === configHash;
}

function podIsTerminating(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
}

/**
 * The pod that speaks for a node when a rollout briefly leaves two: a live one over a terminating
 * one, the current config over an old one, ready over not, then the newest. Finished pods never count.
 */
export function choosePluginPod(pods: readonly V1Pod[], configHash: string): V1Pod | undefined {
  const live = pods.filter((p) => p.status?.phase !== "Succeeded" && p.status?.phase !== "Failed");
  const rank = (p: V1Pod): number[] => [
    podIsTerminating(p) ? 1 : 0,
    podRunsConfigHash(p, configHash) ? 0 : 1,
    podIsReady(p) ? 0 : 1,
    -(timestampMillis(p.metadata?.creationTimestamp) || 0),
  ];
  return [...live].sort((a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i]! - rb[i]!;
    return (a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1;
  })[0];
}

/**
 * The one report to believe of several for one node (there should be one; a stale copy must not win):
 * the one under the current name first — while a plugin upgrade renames reports, the old-named one may
 * linger until the operator deletes it, and its node must count once, as the new plugin sees it — then
 * the most recently updated.
 */
export function chooseReport(reports: readonly DeviceNodeState[], pod?: V1Pod): DeviceNodeState | undefined {
  // During a surge upgrade two revisions report for one node: the pod that speaks for it decides.
  const podUid = pod?.metadata?.uid;
  const own = podUid === undefined ? undefined : reports.find((r) => r.status?.podUID === podUid);
  if (own !== undefined) return own;
  return [...reports].sort((a, b) => {
    const ac = hasCurrentName(a);
    if (ac !== hasCurrentName(b)) return ac ? -1 : 1;
    const at = timestampMillis(a.status?.updateTime) || 0;
    const bt = timestampMillis(b.status?.updateTime) || 0;
    if (at !== bt) return bt - at;
    return a.metadata.name < b.metadata.name ? -1 : 1;
  })[0];
}

/**
 * The first `limit` ids the kubelet knows for the plugin's unhealthy devices, in the plugin's order:
 * `foo-1::0`, `foo-1::1`… under time-slicing, `foo-1` without sharing.
 */
export function unhealthyAdvertisedIds(report: DeviceNodeStateStatus, limit: number): string[] {
  const ids: string[] = [];
  for (const device of report.devices) {
    // A device the other publish path holds (replicas 0) is advertised under no id here.
    if (device.health !== "Unhealthy" || device.replicas === 0) continue;
    if (device.replicas > 1) {
      for (let k = 0; k < device.replicas && ids.length < limit; k++) ids.push(replicaId(device.id, k));
    } else {
      ids.push(device.id);
    }
    if (ids.length >= limit) break;
  }
  return ids;
}

export interface NodeObservation {
  node: V1Node;
  /** The plugin pods of this config on the node (usually one). */
  pods: readonly V1Pod[];
  /** This config's DeviceNodeStates for the node (usually one). */
  reports: readonly DeviceNodeState[];
}

export interface NodeHealth {
  node: string;
  /**
   * The kubelet's `status.capacity[resource]` (DRA: the devices the node's slices publish, plus the
   * unhealthy ones they leave out); undefined when it advertises none.
   */
  capacity: number | undefined;
  allocatable: number | undefined;
  /** Advertised devices the plugin reports unhealthy (replicas of unhealthy physical devices). */
  unhealthy: number;
  /** Devices the kubelet has given to containers, as the plugin's report says (0 when it does not know). */
  allocated: number;
  /** A plugin pod runs the current config here. */
  updated: boolean;
  /** The plugin pod is ready, registered and the kubelet advertises what it reports (devices may be unhealthy). */
  ready: boolean;
  /**
   * Some plugin pod of any revision is ready, registered and advertised by the kubelet: the node serves
   * devices now. During an upgrade the old revision's pod serves while the new one starts, so a node can
   * serve without being `ready` (the pod that speaks for it is the new, not yet ready one).
   */
  available: boolean;
  problem: NodeProblem | undefined;
}

function bounded(message: string): string {
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}

function show(count: number | undefined): string {
  return count === undefined ? "none" : String(count);
}

function notRegistered(registration: DeviceNodeStateStatus["registration"]): Omit<NodeProblem, "node"> {
  if (registration.state === "StandingBy") {
    // An upgrade's Replace with the new plugin started ahead: the old revision serves the node meanwhile.
    return {
      reason: "PluginNotRegistered",
      message: "the plugin stands by until the previous revision's plugin on the node has stopped",
    };
  }
  const cause = registration.lastError ? `: ${registration.lastError}` : "";
  return {
    reason: "PluginNotRegistered",
    message: bounded(`the plugin is not registered with the kubelet${cause}`),
  };
}

/**
 * Where a node's device counts come from on the API side, the truth a plugin's report is checked against:
 * - `Kubelet` (DevicePlugin mode): Node.status.capacity and allocatable of the extended resource.
 * - `ResourceSlices` (DRA mode): the devices the node's slices of the driver publish (see
 *   publishedDevicesByNode). A DRA plugin leaves unhealthy devices out of its slices, or taints them where
 *   the API server keeps taints, and tainted devices are not counted, so the published count is what can
 *   be allocated either way; capacity adds back the devices the report says are unhealthy, as the
 *   kubelet's capacity keeps a device plugin's unhealthy devices. A time-sliced device is published once
 *   for `sharesPerDevice` claims (default 1) and counts that many times, as the plugin's report counts
 *   its replicas in both modes.
 */
export type PathTruth =
  | { kind: "Kubelet"; resourceName: string }
  | {
      kind: "ResourceSlices";
      driver: string;
      published: ReadonlyMap<string, number>;
      sharesPerDevice?: number;
    };

/**
 * A path's truth, or during a switch of spec.publish (docs/dra.md) one per node: each node in `byNode` is
 * judged by the path its running plugin uses, every other node by `rest` (the spec's path).
 */
export type DeviceTruth =
  PathTruth | { kind: "PerNode"; byNode: ReadonlyMap<string, PathTruth>; rest: PathTruth };

/** The DevicePlugin-mode truth for `resourceName`. */
export function kubeletTruth(resourceName: string): PathTruth {
  return { kind: "Kubelet", resourceName };
}

type CountsProblem = (report: DeviceNodeStateStatus) => Omit<NodeProblem, "node"> | undefined;

/** The kubelet's counts against the plugin's: NoCapacity or CapacityMismatch. */
function kubeletCountsProblem(
  capacity: number | undefined,
  allocatable: number | undefined,
  resourceName: string,
): CountsProblem {
  return ({ advertised, healthy }) => {
    // A kubelet that lost the plugin's stream keeps the capacity but makes nothing allocatable; one that
    // dropped the resource advertises nothing: either way no pod can get a device here.
    const noCapacity = advertised > 0 && !(capacity !== undefined && capacity > 0);
    const noAllocatable = healthy > 0 && !(allocatable !== undefined && allocatable > 0);
    if (noCapacity || noAllocatable) {
      return {
        reason: "NoCapacity",
        message: `the kubelet advertises ${resourceName} capacity ${show(capacity)}, allocatable ${show(
          allocatable,
        )}; the plugin advertises ${advertised}, ${healthy} healthy`,
      };
    }
    if ((capacity ?? 0) !== advertised || (allocatable ?? 0) !== healthy) {
      return {
        reason: "CapacityMismatch",
        message: `the kubelet advertises ${resourceName} capacity ${show(capacity)}, allocatable ${show(
          allocatable,
        )}; the plugin advertises ${advertised}, ${healthy} healthy`,
      };
    }
    return undefined;
  };
}

/**
 * The node's published devices against the plugin's healthy ones: what the slices carry is what claims
 * can get, and the plugin publishes exactly its healthy devices. Whether the report's `advertised`
 * counts the unhealthy ones too is not compared: the slices cannot show them either way.
 */
function sliceCountsProblem(published: number | undefined, driver: string): CountsProblem {
  return ({ advertised, healthy }) => {
    if (healthy > 0 && !(published !== undefined && published > 0)) {
      return {
        reason: "NoCapacity",
        message: `no ResourceSlice of driver ${driver} publishes a device of the node; the plugin advertises ${advertised}, ${healthy} healthy`,
      };
    }
    if ((published ?? 0) !== healthy) {
      return {
        reason: "CapacityMismatch",
        message: `the ResourceSlices of driver ${driver} publish ${show(published)} devices of the node; the plugin advertises ${advertised}, ${healthy} healthy`,
      };
    }
    return undefined;
  };
}

function problemOf(
  pod: V1Pod | undefined,
  report: DeviceNodeStateStatus | undefined,
  countsProblem: CountsProblem,
): Omit<NodeProblem, "node"> | undefined {
  const registration = report?.registration;
  if (pod === undefined) {
    return { reason: "PluginNotReady", message: "no plugin pod runs on the node" };
  }
  if (!podIsReady(pod)) {
    // A pod that is not ready because it cannot register is better explained by its own report.
    if (registration !== undefined && registration.state !== "Registered") {
      return notRegistered(registration);
    }
    const waiting = pod.status?.containerStatuses?.find((c) => c.state?.waiting?.reason)?.state?.waiting
      ?.reason;
    return {
      reason: "PluginNotReady",
      message: `plugin pod ${pod.metadata?.name ?? ""} is ${pod.status?.phase ?? "Pending"}${
        waiting ? ` (${waiting})` : ""
      } and not ready`,
    };
  }
  if (report === undefined || registration === undefined) {
    return { reason: "PluginNotRegistered", message: "the plugin has not reported its registration yet" };
  }
  if (registration.state !== "Registered") {
    return notRegistered(registration);
  }
  const { advertised } = report;
  const counts = countsProblem(report);
  if (counts !== undefined) return counts;
  const unhealthy = unhealthyAdvertisedCount(report);
  if (unhealthy > 0) {
    const reasons = [
      ...new Set(report.devices.filter((d) => d.health === "Unhealthy" && d.reason).map((d) => d.reason)),
    ].sort();
    const listed = unhealthy > MAX_PROBLEM_DEVICES ? ` (first ${MAX_PROBLEM_DEVICES} listed)` : "";
    return {
      reason: "UnhealthyDevices",
      message: bounded(
        `${unhealthy} of ${advertised} devices unhealthy${listed}${reasons.length > 0 ? `: ${reasons.join(", ")}` : ""}`,
      ),
      devices: unhealthyAdvertisedIds(report, MAX_PROBLEM_DEVICES),
    };
  }
  return undefined;
}

/**
 * The node's device counts on the API side under `truth`, and the check of a report against them. For
 * ResourceSlices, capacity is the published devices plus those the report says are unhealthy or held by
 * device-plugin pods since a switch (both left out of the slices), allocatable the published ones; both
 * undefined when nothing is published.
 */
export function nodeDeviceCounts(
  node: V1Node,
  truth: DeviceTruth,
  report?: DeviceNodeStateStatus,
): { capacity: number | undefined; allocatable: number | undefined; problem: CountsProblem } {
  if (truth.kind === "PerNode") {
    return nodeDeviceCounts(node, truth.byNode.get(node.metadata?.name ?? "") ?? truth.rest, report);
  }
  if (truth.kind === "Kubelet") {
    const capacity = parseCountQuantity(node.status?.capacity?.[truth.resourceName]);
    const allocatable = parseCountQuantity(node.status?.allocatable?.[truth.resourceName]);
    return {
      capacity,
      allocatable,
      problem: kubeletCountsProblem(capacity, allocatable, truth.resourceName),
    };
  }
  const devices = truth.published.get(node.metadata?.name ?? "");
  const shares = truth.sharesPerDevice ?? 1;
  const published = devices === undefined ? undefined : devices * shares;
  return {
    capacity:
      published === undefined
        ? undefined
        : published + (report ? unhealthyAdvertisedCount(report) + heldOutCount(report) * shares : 0),
    allocatable: published,
    problem: sliceCountsProblem(published, truth.driver),
  };
}

/** Evaluates one targeted node; its device counts come from `truth` (the kubelet's by default). */
export function evaluateNode(
  observation: NodeObservation,
  resourceName: string,
  configHash: string,
  truth: DeviceTruth = kubeletTruth(resourceName),
): NodeHealth {
  const nodeName = observation.node.metadata?.name ?? "";
  const pod = choosePluginPod(observation.pods, configHash);
  const report = chooseReport(observation.reports, pod)?.status;
  const counts = nodeDeviceCounts(observation.node, truth, report);
  const { capacity, allocatable } = counts;
  const problem = problemOf(pod, report, counts.problem);
  const ready = problem === undefined || problem.reason === "UnhealthyDevices";
  return {
    node: nodeName,
    capacity,
    allocatable,
    unhealthy: report ? unhealthyAdvertisedCount(report) : 0,
    allocated: report?.allocated ?? 0,
    updated: pod !== undefined && podRunsConfigHash(pod, configHash),
    ready,
    available: ready || nodeServes(observation, truth),
    problem: problem === undefined ? undefined : { node: nodeName, ...problem },
  };
}

/**
 * Whether the node serves devices: a running, not terminating plugin pod of any revision whose plugin is
 * registered (by the node's report, whichever pod wrote it last: during a surge the new plugin takes the
 * report over while the old one still serves) and advertised by the kubelet as the report says, with no
 * container waiting. Pod readiness is not asked for: the kubelet advertises a registered plugin's devices before its pod's
 * readiness probe has passed, and the upgrade gate moves on by the kubelet, not by the probe.
 */
function nodeServes(observation: NodeObservation, truth: DeviceTruth): boolean {
  return observation.pods.some((pod) => {
    if (pod.status?.phase !== "Running" || podIsTerminating(pod)) return false;
    // A container waiting (CrashLoopBackOff, say) has no plugin running, whatever its last report said.
    if ((pod.status.containerStatuses ?? []).some((c) => c.state?.waiting !== undefined)) return false;
    const report = chooseReport(observation.reports, pod)?.status;
    if (report?.registration?.state !== "Registered") return false;
    return nodeDeviceCounts(observation.node, truth, report).problem(report) === undefined;
  });
}
