// The operator's informers: one per watched kind, each trimmed to what the operator reads and indexed
// the way the reconciler looks things up.
import type { KubeConfig, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DeviceNodeState } from "../api/v1beta1/devicenodestate.js";
import {
  CONFIG_MAPS,
  DAEMON_SETS,
  DEVICE_CLASSES,
  DEVICE_NODE_STATES,
  DEVICE_PLUGIN_CONFIGS,
  NODES,
  PODS,
  RESOURCE_SLICES,
  createInformer,
  stripManagedFields,
  type Informer,
  type InformerRestartReason,
  type ResourceRef,
} from "../kube/index.js";
import { slimNodeForCache, slimPodForCache, slimReportForCache } from "./controllers/cache-transforms.js";
import {
  INDEX_BY_CONFIG,
  INDEX_BY_DRIVER,
  type CachedDeviceClass,
  type StoredConfig,
} from "./controllers/reconciler-deps.js";
import { LABEL_CONFIG, LABEL_MANAGED_BY } from "../contract/names.js";
import { LABEL_NAME, MANAGED_BY, PLUGIN_APP_NAME } from "./model/names.js";
import {
  FAILED_PODS_FIELD_SELECTOR,
  INDEX_BY_RESOURCE,
  rejectedResources,
  slimFailedPodForCache,
} from "./status/admission-rejections.js";
import { slimResourceSliceForCache, type SlimResourceSlice } from "./status/published-devices.js";
import { configsMarkedOn } from "./upgrade/node-marks.js";
import { configsLabellingNode } from "./node-labels/ownership.js";

export interface OperatorInformers {
  configs: Informer<StoredConfig>;
  nodes: Informer<V1Node>;
  pods: Informer<V1Pod>;
  /** Failed pods in every namespace, for the pods the kubelets rejected at admission (admission-rejections.ts). */
  failedPods: Informer<V1Pod>;
  daemonSets: Informer<V1DaemonSet>;
  configMaps: Informer<V1ConfigMap>;
  reports: Informer<DeviceNodeState>;
  /** resource.k8s.io/v1: to be started only when the API server serves it (Kubernetes 1.34+). */
  slices: Informer<SlimResourceSlice>;
  deviceClasses: Informer<CachedDeviceClass>;
}

/** What every informer reports to the operator: its restarts by cause, and its recovery. */
export interface InformerHooks {
  onRestart: (resource: ResourceRef, reason: InformerRestartReason) => void;
  onRecover: () => void;
}

/** The `dpo.dev/config` label of an object, as an index value. */
function byConfigLabel(o: { metadata?: { labels?: Record<string, string> } }): string[] {
  const v = o.metadata?.labels?.[LABEL_CONFIG];
  return v ? [v] : [];
}

/**
 * Creates (does not start) the operator's informers: cluster-wide for configs, nodes and the DRA kinds,
 * the operator's namespace for the rest, and only the objects it manages where a selector can say so.
 */
export function createOperatorInformers(
  kc: KubeConfig,
  namespace: string,
  logger: Logger,
  hooks: InformerHooks,
): OperatorInformers {
  const common = (resource: ResourceRef) => ({
    resource,
    logger,
    onRestart: (reason: InformerRestartReason) => hooks.onRestart(resource, reason),
    onRecover: () => hooks.onRecover(),
  });
  const ownedSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
  // managedFields go from every cached kind; Nodes, plugin Pods and reports keep only what the operator reads.
  // DaemonSets and ConfigMaps keep the rest: drift detection (containsDesired) compares them whole with the render.
  const informers: OperatorInformers = {
    configs: createInformer<StoredConfig>(kc, {
      ...common(DEVICE_PLUGIN_CONFIGS),
      transform: stripManagedFields,
    }),
    nodes: createInformer<V1Node>(kc, { ...common(NODES), transform: slimNodeForCache }),
    pods: createInformer<V1Pod>(kc, {
      ...common(PODS),
      transform: slimPodForCache,
      namespace,
      labelSelector: `${LABEL_NAME}=${PLUGIN_APP_NAME}`,
    }),
    // Only pods that ended Failed (a field-selected watch; none while nothing fails), trimmed to their
    // node, requests and reason: bounded by the cluster's failed pods, which the pod GC bounds too.
    failedPods: createInformer<V1Pod>(kc, {
      ...common(PODS),
      transform: slimFailedPodForCache,
      fieldSelector: FAILED_PODS_FIELD_SELECTOR,
    }),
    daemonSets: createInformer<V1DaemonSet>(kc, {
      ...common(DAEMON_SETS),
      transform: stripManagedFields,
      namespace,
      labelSelector: ownedSelector,
    }),
    configMaps: createInformer<V1ConfigMap>(kc, {
      ...common(CONFIG_MAPS),
      transform: stripManagedFields,
      namespace,
      labelSelector: ownedSelector,
    }),
    reports: createInformer<DeviceNodeState>(kc, {
      ...common(DEVICE_NODE_STATES),
      transform: slimReportForCache,
      namespace,
    }),
    // Only what the status, the upgrade gate and the cleanup read of a slice (see SlimResourceSlice).
    slices: createInformer<SlimResourceSlice>(kc, {
      ...common(RESOURCE_SLICES),
      transform: slimResourceSliceForCache,
    }),
    // Every class, not only the operator's: a namesake it does not own must be seen to be reported.
    deviceClasses: createInformer<CachedDeviceClass>(kc, {
      ...common(DEVICE_CLASSES),
      transform: stripManagedFields,
    }),
  };
  informers.slices.addIndex(INDEX_BY_CONFIG, byConfigLabel);
  informers.slices.addIndex(INDEX_BY_DRIVER, (sl) => (sl.spec.driver ? [sl.spec.driver] : []));
  informers.pods.addIndex(INDEX_BY_CONFIG, byConfigLabel);
  informers.failedPods.addIndex(INDEX_BY_RESOURCE, rejectedResources);
  informers.reports.addIndex(INDEX_BY_CONFIG, (r) => (r.spec?.configName ? [r.spec.configName] : []));
  // The configs a Node carries marks (ADR 0009) or device labels (ADR 0011) of.
  informers.nodes.addIndex(INDEX_BY_CONFIG, (n) => [
    ...new Set([...configsMarkedOn(n), ...configsLabellingNode(n)]),
  ]);
  informers.daemonSets.addIndex(INDEX_BY_CONFIG, byConfigLabel);
  informers.configMaps.addIndex(INDEX_BY_CONFIG, byConfigLabel);
  return informers;
}
