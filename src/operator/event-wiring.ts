// Connects the informers' events to the work queue: each event adds the names of the configs it concerns
// (controllers/mapping.ts decides which).
import type { V1ConfigMap, V1DaemonSet, V1Pod } from "@kubernetes/client-node";
import type { DeviceNodeState } from "../api/v1beta1/devicenodestate.js";
import {
  configForLabel,
  configForSlice,
  configUpdateMatters,
  configsForConfig,
  configsForDeviceClass,
  configsForNode,
  configsSharingCdiKind,
  configsSharingResource,
  nodeChangeMatters,
  ownerConfigName,
  specCdiKind,
  specResourceName,
} from "./controllers/mapping.js";
import type { OperatorInformers } from "./informers.js";
import { rejectedResources } from "./status/admission-rejections.js";
import { LABEL_CONFIG } from "../contract/names.js";

/** Registers the handlers; `enqueue` takes a config name (undefined: none) and `isOwnStatus` the reconciler's. */
export function wireConfigEvents(
  informers: OperatorInformers,
  enqueue: (name: string | undefined) => void,
  isOwnStatus: (name: string, status: unknown) => boolean,
): void {
  const { configs, nodes, pods, failedPods, daemonSets, configMaps, reports, slices, deviceClasses } =
    informers;
  const enqueueAll = (names: readonly string[]): void => names.forEach((n) => enqueue(n));

  slices.onAdd((sl) => enqueue(configForSlice(configs, sl)));
  slices.onUpdate((_old, cur) => enqueue(configForSlice(configs, cur)));
  slices.onDelete((sl) => enqueue(configForSlice(configs, sl)));
  deviceClasses.onAdd((c) => enqueueAll(configsForDeviceClass(configs, c)));
  deviceClasses.onUpdate((_old, cur) => enqueueAll(configsForDeviceClass(configs, cur)));
  deviceClasses.onDelete((c) => enqueueAll(configsForDeviceClass(configs, c)));

  configs.onAdd((c) => enqueueAll(configsForConfig(configs, c)));
  configs.onUpdate((old, cur) => {
    if (!configUpdateMatters(old, cur, isOwnStatus)) return;
    enqueue(cur.metadata?.name);
    enqueueAll(configsSharingResource(configs, specResourceName(old)));
    enqueueAll(configsSharingResource(configs, specResourceName(cur)));
    enqueueAll(configsSharingCdiKind(configs, specCdiKind(old)));
    enqueueAll(configsSharingCdiKind(configs, specCdiKind(cur)));
  });
  configs.onDelete((c) => enqueueAll(configsForConfig(configs, c)));

  nodes.onAdd((n) => enqueueAll(configsForNode(configs, undefined, n)));
  nodes.onDelete((n) => enqueueAll(configsForNode(configs, n, undefined)));
  nodes.onUpdate((old, cur) => {
    if (nodeChangeMatters(old, cur)) enqueueAll(configsForNode(configs, old, cur));
  });

  const byLabel = (p: V1Pod): void => enqueue(configForLabel(configs, p.metadata?.labels?.[LABEL_CONFIG]));
  pods.onAdd(byLabel);
  pods.onUpdate((_old, cur) => byLabel(cur));
  pods.onDelete(byLabel);

  // A pod the kubelet rejected for a config's resource: the configs of that resource report it.
  const byRejected = (p: V1Pod): void => {
    for (const resource of rejectedResources(p)) enqueueAll(configsSharingResource(configs, resource));
  };
  failedPods.onAdd(byRejected);
  failedPods.onUpdate((_old, cur) => byRejected(cur));
  failedPods.onDelete(byRejected);

  const byOwner = (o: V1DaemonSet | V1ConfigMap): void => enqueue(ownerConfigName(o.metadata));
  daemonSets.onAdd(byOwner);
  daemonSets.onUpdate((_old, cur) => byOwner(cur));
  daemonSets.onDelete(byOwner);
  configMaps.onAdd(byOwner);
  configMaps.onUpdate((_old, cur) => byOwner(cur));
  configMaps.onDelete(byOwner);

  const byReport = (r: DeviceNodeState): void => enqueue(r.spec?.configName);
  reports.onAdd(byReport);
  reports.onUpdate((_old, cur) => byReport(cur));
  reports.onDelete(byReport);
}
