// What the rollout planner reads: what the caller observed of each node (with what it persisted for the node),
// the rollout's spec and the options of a plan. Types only; planner.ts plans from them.
import type { RolloutSpec } from "../model/rollout.js";

/** What the caller observed about one node, plus what it persisted for the node in this rollout. */
export interface NodeObservation {
  name: string;
  /** Node.status.nodeInfo.kubeletVersion. */
  kubeletVersion: string;
  /** The node is in the current (old) revision's node list. */
  inOld: boolean;
  /** The node is in the update (new) revision's node list. */
  inNew: boolean;
  /** A pod of the old revision still exists on the node (running or terminating). */
  oldPodPresent: boolean;
  /** The node's DeviceNodeState says Registered and carries the new revision. */
  newRegistered: boolean;
  /** The node's DeviceNodeState says Registered and carries the old revision. */
  oldRegistered: boolean;
  /** Node.status.allocatable for the plugin's resource, now. */
  allocatable: number;
  /** Persisted: allocatable when the node was first touched (see the RecordBaseline action). */
  baseline?: number;
  /** Devices the plugin reports unhealthy; they may leave allocatable below the baseline. */
  unhealthy: number;
  /** Persisted: when the node was first touched in this rollout (see RecordStart), on the clock of `now`. */
  startedAt?: number;
  /** Persisted: the node missed its deadline in this rollout (see MarkFailed). */
  failed?: boolean;
  /** The node carries the rollout's Replace taint, which keeps new pods off it (see Fence). */
  fenced?: boolean;
  /** Persisted: when the fence went on (see Fence), on the clock of `now`; an older operator's record has none. */
  fencedAt?: number;
  /**
   * The new revision's plugin runs on the node (a live pod) and its report says StandingBy: it serves and
   * waits for the old one to stop before it registers (PlanInput.standby).
   */
  newStandingBy?: boolean;
  /**
   * A publish switch only (PlanInput.switching): whether the old path still advertises on the node (its
   * allocatable above 0, or a ResourceSlice of the driver for it), whether the new one does, what the
   * old path advertises (back() judges it), and whether a pod of the new revision exists on the node.
   */
  oldAdvertises?: boolean;
  newAdvertises?: boolean;
  oldAllocatable?: number;
  newPodPresent?: boolean;
  /**
   * Why the node may not start moving forward yet, whatever the limit (a takeover whose ids differ waits
   * for the running pods that hold the resource there: model/takeover.ts). An empty reason: not checked
   * in this pass, so not started either, and not reported.
   */
  startHeld?: string;
}

export interface PlanInput {
  nodes: readonly NodeObservation[];
  spec: RolloutSpec;
  /**
   * ms; the only clock the planner reads. The operator gives its monotonic clock here and, as startedAt
   * and fencedAt, when it first saw each record stamp (record-clock.ts), never another machine's wall clock.
   */
  now: number;
  /** Persisted: the rollout's phase is RollingBack (or RolledBack). */
  rollingBack: boolean;
  /**
   * How the config publishes its devices (default DevicePlugin): it decides which kubelets can take a
   * surge (two instances side by side) and which are too old for the plugin at all.
   */
  publish?: "DevicePlugin" | "DRA";
  /**
   * Fence each Replace: taint the node (Fence) and take the old revision off only once the taint is
   * observed (and has been on for fenceSettleMs), so the scheduler places no pod that needs the resource
   * on a node about to advertise nothing; untaint (Unfence) once the new plugin's devices are back in
   * the Node object.
   */
  fenceReplace?: boolean;
  /**
   * How long the fence must have been on before the old revision leaves (default 0). A taint in the
   * operator's cache says nothing of the scheduler's: one further behind still binds pods that ask for
   * the resource, and a kubelet admits a pod bound just before the taint a moment later; with the old
   * plugin gone the device manager rejects them (UnexpectedAdmissionError). Measured from fencedAt, or
   * startedAt where the record has none (the fence went on with the start).
   */
  fenceSettleMs?: number;
  /**
   * Replace with the new plugin started ahead where the strategy allows two instances side by side (Auto,
   * Surge) and only the kubelet does not (before v1.37.0, DevicePlugin mode): the node gets the new revision
   * beside the old one, its plugin stands by unregistered (Plan.standby names these nodes, whose record says
   * so), and the old revision leaves once the new plugin stands by (and the fence has settled). The node
   * then advertises nothing only between the old plugin's stop and the new one's registration, not for
   * the new pod's whole start. An explicit Replace keeps the old order: the old plugin stops first.
   */
  standby?: boolean;
  /**
   * The revisions publish through different paths (spec.publish changed: DevicePlugin and DRA). Every
   * node is then replaced whatever the strategy says, and on each node the path being left stops
   * advertising before the other is assigned, in both directions (a rollback too): where both advertise
   * a name the device plugin wins (kubernetes#139141). See docs/dra.md.
   */
  switching?: boolean;
  /**
   * Why no node may start moving forward now, if one may not (a switch to DRA while the DeviceClass
   * cannot map the extended resource). Nodes in flight finish; the phase stays Progressing.
   */
  startBlocked?: string;
}
