// The switch of a config between the device plugin path and DRA (spec.publish), node by node, as a pure
// planner: given what each node runs and advertises now, what to do on each node next. The one rule it
// exists for: on no node do both paths advertise the resource at once, because where both do, the device
// plugin wins (kubernetes#139141) and DRA-mapped pods are not served as planned. The driver does the I/O.
// The operator runs the same rule through the upgrade planner (planner.ts `switching`), which keeps the
// per-node records, fence, deadline and rollback a switch needs; this standalone form is not called.
import type { PublishMode } from "../../api/v1beta1/publish.js";

/** Which path's plugin the operator assigns to a node; None between stopping one and starting the other. */
export type AssignedPath = PublishMode | "None";

/** A plugin pod of one path on the node: none at all (not even terminating), running, or ready. */
export type PodPhase = "Absent" | "Running" | "Ready";

/** One node as the API server shows it, for one config. */
export interface SwitchNodeState {
  name: string;
  /** The plugin the operator assigns to the node now (its own record, e.g. a node label). */
  assigned: AssignedPath;
  devicePluginPod: PodPhase;
  draPluginPod: PodPhase;
  /** Node.status.allocatable[resourceName]; undefined when the Node does not list the name. */
  allocatable: number | undefined;
  /** Whether a ResourceSlice of the config's driver exists for the node (an empty pool counts). */
  slicePublished: boolean;
}

export interface SwitchInput {
  /** The path spec.publish asks for. */
  target: PublishMode;
  /** Nodes in flight at once: spec.upgrade.maxUnavailable resolved to a count (at least 1). */
  maxUnavailable: number;
  /**
   * Whether nodes not yet started may start: false while paused, or for a switch to DRA while the
   * DeviceClass does not map the extended resource (extendedResourceMapping). Nodes in flight finish.
   */
  mayStart: boolean;
  nodes: readonly SwitchNodeState[];
}

export type SwitchAction =
  /** The node serves the target path: nothing to do. */
  | { kind: "Done" }
  /** Unassign the old path's plugin from the node (assigned becomes None). */
  | { kind: "Stop"; path: PublishMode }
  /** Delete the node's ResourceSlices of the driver (DRA to DevicePlugin: the plugin never deletes its pool). */
  | { kind: "DeleteSlices" }
  /** Assign the target path's plugin to the node. */
  | { kind: "Start"; path: PublishMode }
  /** In flight, waiting for the world: `reason` says on what. */
  | { kind: "Wait"; reason: string }
  /** Not started: no slot under maxUnavailable, or starting is not allowed now. */
  | { kind: "Queued"; reason: string };

export interface SwitchPlan {
  /** One action per input node, in the input's order of names (sorted). */
  actions: { node: string; action: SwitchAction }[];
  /** Nodes in flight once the plan's actions are applied. */
  inFlight: number;
  /** Nodes already Done. */
  done: number;
}

function other(path: PublishMode): PublishMode {
  return path === "DRA" ? "DevicePlugin" : "DRA";
}

/** Whether the device plugin path advertises the name on the node, as the scheduler reads it. */
export function devicePluginAdvertises(node: SwitchNodeState): boolean {
  return (node.allocatable ?? 0) > 0;
}

/** Whether the DRA path advertises on the node: a slice of the driver for it exists. */
export function draAdvertises(node: SwitchNodeState): boolean {
  return node.slicePublished;
}

/** Whether the node already serves `target` and nothing of the other path is left on it. */
function serves(node: SwitchNodeState, target: PublishMode): boolean {
  if (node.assigned !== target) return false;
  if (target === "DRA") return node.draPluginPod === "Ready" && node.slicePublished;
  return node.devicePluginPod === "Ready" && node.allocatable !== undefined;
}

/**
 * What the node needs, given it is in flight (assigned None, or the target not yet serving). Starting the
 * target path waits until the old path is gone on the node: its pod absent (a terminating pod can still
 * register) and what it advertised gone from the API server (allocatable 0 or absent; no slice).
 */
function inFlightAction(node: SwitchNodeState, target: PublishMode): SwitchAction {
  if (node.assigned === target) {
    return { kind: "Wait", reason: `waiting for the ${target} plugin to be ready and advertise` };
  }
  if (target === "DRA") {
    if (node.devicePluginPod !== "Absent") {
      return { kind: "Wait", reason: "waiting for the device plugin pod to be gone" };
    }
    if (devicePluginAdvertises(node)) {
      return {
        kind: "Wait",
        reason: `waiting for the node's allocatable to drop to 0 (now ${node.allocatable})`,
      };
    }
    return { kind: "Start", path: "DRA" };
  }
  if (node.draPluginPod !== "Absent") {
    return { kind: "Wait", reason: "waiting for the DRA plugin pod to be gone" };
  }
  if (draAdvertises(node)) return { kind: "DeleteSlices" };
  return { kind: "Start", path: "DevicePlugin" };
}

/**
 * The next action on every node of a switch to `input.target`. A node goes old path → None → target,
 * once: Stop (only while fewer than maxUnavailable nodes are in flight, in name order), then, once the
 * old path no longer advertises on the node, Start (for DRA → DevicePlugin after DeleteSlices). A node
 * already serving the target is Done and never touched again. A node in flight always continues, even
 * when new nodes may not start, so no node is left serving neither path. Level-triggered: the plan
 * depends on the nodes' state only, so the driver can call it on every reconcile. Pure.
 *
 * It trusts the snapshot to be at least as new as the driver's own last writes (assigned), as an informer
 * cache read after the write's event is; an older snapshot could show the old pod absent before it was
 * ever created.
 */
export function planSwitch(input: SwitchInput): SwitchPlan {
  const target = input.target;
  const nodes = [...input.nodes].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const limit = Math.max(1, Math.floor(input.maxUnavailable));
  const decided = new Map<string, SwitchAction>();
  let inFlight = 0;
  let done = 0;
  const waiting: SwitchNodeState[] = [];
  for (const node of nodes) {
    if (serves(node, target)) {
      decided.set(node.name, { kind: "Done" });
      done++;
    } else if (node.assigned === target || node.assigned === "None") {
      decided.set(node.name, inFlightAction(node, target));
      inFlight++;
    } else {
      waiting.push(node);
    }
  }
  for (const node of waiting) {
    if (!input.mayStart) {
      decided.set(node.name, { kind: "Queued", reason: "the switch may not start nodes now" });
    } else if (inFlight >= limit) {
      decided.set(node.name, {
        kind: "Queued",
        reason: `${inFlight} of at most ${limit} nodes are in flight`,
      });
    } else {
      decided.set(node.name, { kind: "Stop", path: other(target) });
      inFlight++;
    }
  }
  return {
    actions: nodes.map((node) => ({ node: node.name, action: decided.get(node.name)! })),
    inFlight,
    done,
  };
}
