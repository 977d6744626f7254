// Renders the plugin ConfigMap of a DevicePluginConfig: the manifest `dpo plugin --config` reads, and its hash.
import { createHash } from "node:crypto";
import type { V1ConfigMap } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { RenderContext } from "./context.js";
import { configOwnerReference, LABEL_REVISION, pluginLabels, revisionObjectName } from "./names.js";

/** Key of the plugin config in the ConfigMap, and where the pod sees it. */
export const PLUGIN_CONFIG_KEY = "config.yaml";
export const PLUGIN_CONFIG_DIR = "/etc/dpo";
export const PLUGIN_CONFIG_PATH = `${PLUGIN_CONFIG_DIR}/${PLUGIN_CONFIG_KEY}`;

const HASH_LENGTH = 16;

/**
 * The manifest the plugin serves. metadata carries name and uid only: the uid lets the plugin own its
 * DeviceNodeState by the config, while generation is left out on purpose, because a spec edit that
 * changes nothing after defaulting (say, writing a default out explicitly) bumps the generation and
 * would otherwise restart every plugin for nothing. Keys are sorted so equal specs give equal text.
 */
export function renderPluginConfigData(config: DevicePluginConfig): Record<string, string> {
  // spec.upgrade is the operator's, not the plugin's: pausing a rollout must not make a new revision.
  const { upgrade: _upgrade, ...spec } = config.spec;
  const manifest = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: config.metadata.name, uid: config.metadata.uid },
    spec,
  };
  return { [PLUGIN_CONFIG_KEY]: stringify(manifest, { sortMapEntries: true }) };
}

/** A short sha256 of ConfigMap data, independent of key order. */
export function configHash(configMapData: Readonly<Record<string, string>>): string {
  const hash = createHash("sha256");
  for (const key of Object.keys(configMapData).sort()) {
    // Length-prefixed, so no choice of keys and values can make two different maps hash alike.
    const value = configMapData[key] ?? "";
    hash.update(`${key.length}:${key}${value.length}:${value}`);
  }
  return hash.digest("hex").slice(0, HASH_LENGTH);
}

/** The hash the plugin pods of a config carry when they run its current spec. */
export function pluginConfigHash(config: DevicePluginConfig): string {
  return configHash(renderPluginConfigData(config));
}

/** The ConfigMap of one revision: its pods mount it, so a later revision never changes what they read. */
export function renderPluginConfigMap(
  config: DevicePluginConfig,
  ctx: RenderContext,
  revision: string,
): V1ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: revisionObjectName(config.metadata.name, revision),
      namespace: ctx.namespace,
      labels: { ...pluginLabels(config.metadata.name), [LABEL_REVISION]: revision },
      ownerReferences: [configOwnerReference(config)],
    },
    data: renderPluginConfigData(config),
  };
}
