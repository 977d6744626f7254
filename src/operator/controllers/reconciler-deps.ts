// What the config reconciler and its steps work with: the informer caches, the writers, and the retry
// times they share.
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import type {
  EventRecorder,
  Informer,
  ObjectClient,
  ReconcileResult,
  ServerSideApplier,
} from "../../kube/index.js";
import type { RenderContext } from "../render/index.js";
import type { SlimResourceSlice } from "../status/index.js";
import type { OperatorMetrics } from "../metrics.js";
import type { RecordClock } from "../upgrade/record-clock.js";
import type { DeviceClass } from "./dra.js";
import type { LabelApply } from "../node-labels/ownership.js";

/** A DevicePluginConfig as the API server returns it: spec not yet checked, status as last written. */
export type StoredConfig = KubernetesObject & { spec?: unknown; status?: unknown };

/** Index names the reconciler expects on its informers. */
export const INDEX_BY_CONFIG = "config";
/** ResourceSlices by spec.driver. */
export const INDEX_BY_DRIVER = "driver";

export type CachedDeviceClass = DeviceClass & { metadata?: { name?: string } };

export interface ConfigReconcilerDeps {
  configs: Informer<StoredConfig>;
  /** Nodes, indexed by INDEX_BY_CONFIG on the config label values they carry labels, records or taints of. */
  nodes: Informer<V1Node>;
  /** Plugin pods, indexed by INDEX_BY_CONFIG on their `dpo.dev/config` label. */
  pods: Informer<V1Pod>;
  daemonSets: Informer<V1DaemonSet>;
  configMaps: Informer<V1ConfigMap>;
  /**
   * Failed pods of every namespace (slimFailedPodForCache), indexed by INDEX_BY_RESOURCE on the extended
   * resources of those the kubelet rejected at admission (status/admission-rejections.ts). Absent: none
   * are reported.
   */
  failedPods?: Informer<V1Pod> | undefined;
  /** DeviceNodeStates, indexed by INDEX_BY_CONFIG on spec.configName. */
  reports: Informer<DeviceNodeState>;
  applier: ServerSideApplier;
  /**
   * ResourceSlices (slim, see slimResourceSliceForCache) and DeviceClasses, when the API server serves
   * resource.k8s.io/v1. Without them DRA configs get no DeviceClass and no slice cleanup, and their
   * device counts read as none.
   */
  slices?: Informer<SlimResourceSlice> | undefined;
  deviceClasses?: Informer<CachedDeviceClass> | undefined;
  /**
   * Whether the API server keeps DeviceClass spec.extendedResourceName, as the operator's dry-run probe
   * found (extended-resource-probe.ts); undefined until a probe answered.
   */
  extendedResourceNameKept?: boolean | undefined;
  /**
   * Creates, replaces and deletes of single objects: DaemonSets (POST and PUT with the resourceVersion
   * they were planned from, so a stale cache gets AlreadyExists or Conflict), DeviceClasses, and deletes
   * with a uid precondition where a newer namesake must survive.
   */
  objects: ObjectClient;
  /**
   * Writes one node's device labels (ADR 0011): a server-side apply of `labels` under `fieldManager`,
   * without force, so a key another manager owns is never taken. Absent: the operator writes none.
   */
  nodeLabels?: ((apply: LabelApply) => Promise<unknown>) | undefined;
  events: EventRecorder;
  render: RenderContext;
  logger: Logger;
  metrics: OperatorMetrics;
  now?: () => Date;
  /** At most one status write per config in this interval, so 5000 node updates are not 5000 writes. */
  statusWriteIntervalMs?: number;
  /** How long a Replace fence is on before the old plugin stops (`--fence-settle`). */
  fenceSettleMs?: number;
  /** When this operator first saw each upgrade record's stamps, on its monotonic clock (record-clock.ts). */
  recordClock?: RecordClock;
}

/** The deps as the steps see them: with the clocks resolved. */
export type StepDeps = ConfigReconcilerDeps & { now: () => Date; recordClock: RecordClock };

/** When to come back after a write lost a race (a stale cache, another writer). */
export const WRITE_CONFLICT_RETRY_MS = 500;
/** When to come back for the deletes a bounded batch left over, or after a delete failed. */
export const CLEANUP_RETRY_MS = 1_000;
export const CLEANUP_ERROR_RETRY_MS = 10_000;

/** The earlier of two times to come back; undefined is never. Pure. */
export function soonerRetry(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

/** The reconcile result that comes back at the earlier of its own time and `retryMs`. Pure. */
export function soonest(result: ReconcileResult, retryMs: number | undefined): ReconcileResult {
  if (retryMs === undefined) return result;
  if (result.requeueAfterMs === undefined || retryMs < result.requeueAfterMs)
    return { ...result, requeueAfterMs: retryMs };
  return result;
}
