// A config's current spec as one plugin revision (model/rollout.ts): its DaemonSet in each role and its
// ConfigMap, rendered once per reconcile pass. The rollout and the status read this, never the config's
// spec, for what the plugin runs.
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DesiredRevision, RolloutSpec } from "../model/rollout.js";
import { pluginConfigHash, renderPluginConfigMap } from "./configmap.js";
import type { RenderContext } from "./context.js";
import { renderPluginDaemonSet } from "./daemonset.js";
import { LABEL_REVISION } from "../model/names.js";

/** spec.upgrade as the rollout reads it. */
export function rolloutSpecOf(config: DevicePluginConfig): RolloutSpec {
  const u = config.spec.upgrade;
  return {
    strategy: u.strategy,
    maxUnavailable: u.maxUnavailable as RolloutSpec["maxUnavailable"],
    progressDeadlineSeconds: u.progressDeadlineSeconds,
    paused: u.paused,
    autoRollback: u.autoRollback,
  };
}

/**
 * The revision of the config's current spec with the objects that run it. `ctx.targeting` places both
 * DaemonSets on the nodes decided among the configs of the resource name (model/node-terms.ts).
 */
export function renderRevision(config: DevicePluginConfig, ctx: RenderContext): DesiredRevision {
  const base = renderPluginDaemonSet(config, ctx, { role: "base" });
  const moving = renderPluginDaemonSet(config, ctx, { role: "moving" });
  const revision = base.metadata?.labels?.[LABEL_REVISION] ?? "";
  return {
    configName: config.metadata.name,
    resourceName: config.spec.resourceName,
    publish: config.spec.publish,
    rollout: rolloutSpecOf(config),
    revision,
    configHash: pluginConfigHash(config),
    configMap: renderPluginConfigMap(config, ctx, revision),
    daemonSets: { base, moving },
  };
}
