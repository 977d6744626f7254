// The dpo plugin in one plain DaemonSet rolled out by `RollingUpdate`: the baseline that the upgrade tests
// and benchmark compare dpo's gated rollout with.
import type { AppsV1Api, V1ConfigMap, V1DaemonSet } from "@kubernetes/client-node";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import {
  renderPluginConfigMap,
  renderPluginDaemonSet,
  type RenderContext,
} from "../../src/operator/render/index.js";
import { LABEL_REVISION, pluginObjectName, pluginSelectorLabels } from "../../src/operator/model/names.js";

/** One revision of a plain DaemonSet running the dpo plugin: what clusters without dpo's gate do. */
export interface PlainPluginRevision {
  revision: string;
  configMap: V1ConfigMap;
  daemonSet: V1DaemonSet;
}

/**
 * The baseline the upgrade tests and benchmark compare with: the dpo plugin for a Mock config in one
 * DaemonSet with a plain `RollingUpdate` (no surge, `maxUnavailable` nodes at a time), which is how a
 * device plugin is usually rolled out. Rendered by dpo's own renderer for a config that is never
 * created in the API (a made-up uid, owner references dropped), so no operator acts on it. Each
 * `logLevel` is a revision; replacing the DaemonSet with another one's starts a rollout.
 */
export function plainPluginRevision(options: {
  name: string;
  resource: string;
  devices: number;
  idPrefix: string;
  logLevel: "info" | "debug";
  maxUnavailable: number;
  context: RenderContext;
}): PlainPluginRevision {
  const validated = validateDevicePluginConfig({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: options.name, uid: "00000000-0000-0000-0000-00000000b001" },
    spec: {
      resourceName: options.resource,
      backend: { type: "Mock", mock: { devices: options.devices, idPrefix: options.idPrefix } },
      plugin: { logLevel: options.logLevel },
    },
  });
  if (!validated.ok) throw new Error(`baseline config: ${JSON.stringify(validated.errors)}`);
  const config: DevicePluginConfig = validated.value;
  const rendered = renderPluginDaemonSet(config, options.context);
  const revision = rendered.metadata!.labels![LABEL_REVISION]!;
  const configMap = renderPluginConfigMap(config, options.context, revision);
  delete configMap.metadata!.ownerReferences;
  return {
    revision,
    configMap,
    daemonSet: {
      ...rendered,
      metadata: {
        name: pluginObjectName(options.name),
        namespace: options.context.namespace,
        labels: rendered.metadata!.labels,
      },
      spec: {
        ...rendered.spec!,
        selector: { matchLabels: pluginSelectorLabels(options.name) },
        updateStrategy: {
          type: "RollingUpdate",
          rollingUpdate: { maxUnavailable: options.maxUnavailable, maxSurge: 0 },
        },
      },
    },
  };
}

/** Starts the plain DaemonSet's rollout to `to`: a replace of the whole object, as `kubectl apply` would. */
export async function rollPlainPluginTo(apps: AppsV1Api, to: PlainPluginRevision): Promise<void> {
  const { name, namespace } = to.daemonSet.metadata as { name: string; namespace: string };
  const current = await apps.readNamespacedDaemonSet({ name, namespace });
  await apps.replaceNamespacedDaemonSet({
    name,
    namespace,
    body: {
      ...to.daemonSet,
      metadata: { ...to.daemonSet.metadata, resourceVersion: current.metadata!.resourceVersion },
    },
  });
}
