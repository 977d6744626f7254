// Coordinates (group, version, plural, scope) of the resources the operator and plugins read and write.
import { GROUP, PLURAL as DEVICE_PLUGIN_CONFIG_PLURAL, VERSION } from "../api/v1beta1/config.js";
import { DEVICE_NODE_STATE_PLURAL } from "../api/v1beta1/devicenodestate.js";

export interface ResourceRef {
  /** API group; "" for the core group (served under /api). */
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

/** Path of `ref`'s group and version, e.g. /apis/apps/v1 or /api/v1: its discovery document. */
export function groupVersionPath(ref: Pick<ResourceRef, "group" | "version">): string {
  return ref.group === "" ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
}

/** Collection path of `ref`, in `namespace` when given (all namespaces otherwise). */
export function collectionPath(ref: ResourceRef, namespace?: string): string {
  const root = groupVersionPath(ref);
  if (namespace !== undefined && !ref.namespaced) {
    throw new Error(`${ref.plural} is cluster-scoped: it has no namespace ${namespace}`);
  }
  const scope = namespace === undefined ? "" : `/namespaces/${encodeURIComponent(namespace)}`;
  return `${root}${scope}/${ref.plural}`;
}

/** Path of one object of `ref`, or of its `subresource` (status, scale, ...) when given. */
export function objectPath(ref: ResourceRef, name: string, namespace?: string, subresource?: string): string {
  if (ref.namespaced && namespace === undefined) {
    throw new Error(`${ref.plural} is namespaced: ${name} needs a namespace`);
  }
  if (name === "") throw new Error(`${ref.plural}: an object path needs a name`);
  const object = `${collectionPath(ref, namespace)}/${encodeURIComponent(name)}`;
  return subresource === undefined ? object : `${object}/${encodeURIComponent(subresource)}`;
}

export const CUSTOM_RESOURCE_DEFINITIONS: ResourceRef = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  namespaced: false,
};
export const SECRETS: ResourceRef = { group: "", version: "v1", plural: "secrets", namespaced: true };
export const NODES: ResourceRef = { group: "", version: "v1", plural: "nodes", namespaced: false };
export const PODS: ResourceRef = { group: "", version: "v1", plural: "pods", namespaced: true };
export const CONFIG_MAPS: ResourceRef = { group: "", version: "v1", plural: "configmaps", namespaced: true };
export const DAEMON_SETS: ResourceRef = {
  group: "apps",
  version: "v1",
  plural: "daemonsets",
  namespaced: true,
};
export const LEASES: ResourceRef = {
  group: "coordination.k8s.io",
  version: "v1",
  plural: "leases",
  namespaced: true,
};

/** DevicePluginConfig: cluster-scoped. */
export const DEVICE_PLUGIN_CONFIGS: ResourceRef = {
  group: GROUP,
  version: VERSION,
  plural: DEVICE_PLUGIN_CONFIG_PLURAL,
  namespaced: false,
};

/** DeviceNodeState: namespaced (the operator's namespace), one per config and node. */
export const DEVICE_NODE_STATES: ResourceRef = {
  group: GROUP,
  version: VERSION,
  plural: DEVICE_NODE_STATE_PLURAL,
  namespaced: true,
};

/** DeviceClass (resource.k8s.io/v1, Kubernetes 1.34+): cluster-scoped; the operator owns one per DRA config. */
export const DEVICE_CLASSES: ResourceRef = {
  group: "resource.k8s.io",
  version: "v1",
  plural: "deviceclasses",
  namespaced: false,
};

/** ResourceSlice (resource.k8s.io/v1): cluster-scoped; the plugins publish them, the operator reads and cleans up. */
export const RESOURCE_SLICES: ResourceRef = {
  group: "resource.k8s.io",
  version: "v1",
  plural: "resourceslices",
  namespaced: false,
};
