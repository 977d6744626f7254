// Renders the plugin ConfigMap of a DevicePluginConfig: the manifest `dpo plugin --config` reads, and its hash.
import type { V1ConfigMap } from "@kubernetes/client-node";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import { stringifyExact } from "../../api/yaml-text.js";
import { configHash, PLUGIN_CONFIG_KEY } from "../../contract/plugin-config.js";
import type { RenderContext } from "./context.js";
import { configOwnerReference, LABEL_REVISION, pluginLabels, revisionObjectName } from "../model/names.js";

/** Where the pod sees the plugin config. */
export const PLUGIN_CONFIG_DIR = "/etc/dpo";
export const PLUGIN_CONFIG_PATH = `${PLUGIN_CONFIG_DIR}/${PLUGIN_CONFIG_KEY}`;

/**
 * What the plugin reads of a spec. Fields only the operator acts on stay out, so that the plugin of the
 * previous minor release, whose reader refuses fields it does not know, reads what this operator writes for
 * any config that release could express (docs/upgrade.md, "Downgrading"). Out: spec.upgrade (pausing a
 * rollout must not make a new revision); where the plugin runs beyond nodeSelector (nodeSelectorTerm,
 * priority: the DaemonSet's node affinity carries it, so retargeting moves no node to a new revision); the
 * node labels the operator writes (spec.nodeLabels); the
 * pod's own settings in spec.plugin that the kubelet applies (pull Secrets and policy, RuntimeClass,
 * annotations, env: the pod template carries them, so a change of them still makes a new revision); and the
 * extended resource the operator's DeviceClass maps. A field the plugin needs stays even where an older
 * plugin cannot read it: that plugin then refuses the config naming the field, rather than serve another.
 */
export function pluginSpecOf(spec: DevicePluginConfigSpec): Record<string, unknown> {
  const {
    upgrade: _upgrade,
    nodeSelectorTerm: _nodeSelectorTerm,
    priority: _priority,
    nodeLabels: _nodeLabels,
    plugin,
    dra,
    ...rest
  } = spec;
  const {
    imagePullSecrets: _imagePullSecrets,
    imagePullPolicy: _imagePullPolicy,
    runtimeClassName: _runtimeClassName,
    podAnnotations: _podAnnotations,
    env: _env,
    ...pluginRead
  } = plugin;
  if (dra === undefined) return { ...rest, plugin: pluginRead };
  const { extendedResourceName: _extendedResourceName, ...deviceClass } = dra.deviceClass;
  return { ...rest, plugin: pluginRead, dra: { ...dra, deviceClass } };
}

/**
 * The manifest the plugin serves. metadata carries name and uid only: the uid lets the plugin own its
 * DeviceNodeState by the config, while generation is left out on purpose, because a spec edit that
 * changes nothing after defaulting (say, writing a default out explicitly) bumps the generation and
 * would otherwise restart every plugin for nothing. Keys are sorted so equal specs give equal text.
 */
export function renderPluginConfigData(config: DevicePluginConfig): Record<string, string> {
  const manifest = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: config.metadata.name, uid: config.metadata.uid },
    spec: pluginSpecOf(config.spec),
  };
  return { [PLUGIN_CONFIG_KEY]: stringifyExact(manifest, { sortMapEntries: true }) };
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
