// Names, labels and owner references shared by everything the operator renders for a DevicePluginConfig.
// What the plugin must spell alike (the config label, the bound on names) is in contract/names.
import type { V1OwnerReference } from "@kubernetes/client-node";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import { boundedName, configLabelValue, LABEL_CONFIG, LABEL_MANAGED_BY } from "../../contract/names.js";

export const LABEL_NAME = "app.kubernetes.io/name";
export const LABEL_INSTANCE = "app.kubernetes.io/instance";
/**
 * The plugin revision: a hash of the rendered pod template. On each revision's DaemonSet, its selector,
 * and its pods; one DaemonSet runs per revision (ADR 0003).
 */
export const LABEL_REVISION = "dpo.dev/revision";
/** Pod-template annotation carrying the rendered plugin config's hash: a change rolls the pods. */
export const ANNOTATION_CONFIG_HASH = "dpo.dev/config-hash";

/** The volume only a DRA plugin's pod mounts: how a rendered DaemonSet tells its publish mode. */
export const DRA_PLUGINS_VOLUME = "dra-plugins";

export const PLUGIN_APP_NAME = "dpo-plugin";
export const MANAGED_BY = "dpo-operator";
/** Prefix of the ConfigMap and DaemonSet names: `dpo-<config>`. */
export const PLUGIN_NAME_PREFIX = "dpo";

/**
 * Name of the plugin ConfigMap and DaemonSet of a config as versions before per-revision DaemonSets
 * named them; the operator still finds and upgrades such a DaemonSet.
 */
export function pluginObjectName(configName: string): string {
  return boundedName(PLUGIN_NAME_PREFIX, configName);
}

/** Name of the plugin ConfigMap and DaemonSet of one revision of a config: `dpo-<config>-<revision>`. */
export function revisionObjectName(configName: string, revision: string): string {
  return boundedName(PLUGIN_NAME_PREFIX, `${configName}-${revision}`);
}

/** Labels on the ConfigMap, the DaemonSet and its pods. */
export function pluginLabels(configName: string): Record<string, string> {
  const value = configLabelValue(configName);
  return {
    [LABEL_NAME]: PLUGIN_APP_NAME,
    [LABEL_INSTANCE]: value,
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_CONFIG]: value,
  };
}

/**
 * The pod-selector labels of a config's DaemonSet (immutable once created): the config, and the
 * revision, so the DaemonSets of two revisions never select each other's pods.
 */
export function pluginSelectorLabels(configName: string, revision?: string): Record<string, string> {
  return {
    [LABEL_CONFIG]: configLabelValue(configName),
    ...(revision !== undefined ? { [LABEL_REVISION]: revision } : {}),
  };
}

/**
 * Makes the config the controller owner, so garbage collection deletes what was rendered for it.
 * Only objects read from the API server have a uid; rendering anything else is a programming error.
 */
export function configOwnerReference(config: Pick<DevicePluginConfig, "metadata">): V1OwnerReference {
  const uid = config.metadata.uid;
  if (uid === undefined || uid === "") {
    throw new Error(
      `DevicePluginConfig ${config.metadata.name} has no metadata.uid: render only objects read from the API server`,
    );
  }
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    name: config.metadata.name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}
