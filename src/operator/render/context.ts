// What rendering needs to know about the operator's own deployment, as opposed to the config.
import type { V1NodeSelectorTerm } from "@kubernetes/client-node";
import type { RegistrationMode } from "../../contract/registration.js";
import type { PluginPolicy } from "./plugin-policy.js";
import type { PluginPodDefaults } from "./pod-defaults.js";

export interface RenderContext {
  /** Namespace the operator runs in; the plugin ConfigMaps and DaemonSets live there. */
  namespace: string;
  /** The operator's own image, the plugin image when `spec.plugin.image` is empty. */
  operatorImage: string;
  /** ServiceAccount of the plugin pods (allowed to write their DeviceNodeStates). */
  pluginServiceAccount: string;
  /** How plugins register with the kubelet: kubelet.sock `Register`, or the plugin-watcher directory. */
  registrationMode: RegistrationMode;
  /**
   * Secrets in `namespace` the plugin pods pull their image with (the operator's --plugin-image-pull-secrets);
   * none when absent or empty.
   */
  pluginImagePullSecrets?: readonly string[];
  /**
   * The config's node selector terms as decided among the configs of its resource name (model/node-terms.ts:
   * its nodeSelectorTerm, less the nodes of higher priorities); `terms` undefined: no constraint. Absent:
   * the config's own nodeSelectorTerm alone.
   */
  targeting?: { terms: V1NodeSelectorTerm[] | undefined };
  /**
   * The images and host directories configs may use (the operator's --plugin-image-allow and
   * --plugin-host-path-allow). Absent: the operator's own image repository and DEFAULT_PLUGIN_HOST_PATHS.
   */
  pluginPolicy?: PluginPolicy;
  /**
   * What every config's plugin pods get unless the config says otherwise (the operator's
   * --plugin-pod-defaults; pod-defaults.ts says how each field combines). Absent: none. Part of the pod
   * template, so a change of them is a new revision of every config they reach.
   */
  pluginPodDefaults?: PluginPodDefaults;
  /**
   * The kubelet's --root-dir on the nodes (the operator's --kubelet-root-dir): the plugin watcher's, the DRA
   * plugins' and the PodResources directories are under it. Absent: /var/lib/kubelet.
   */
  kubeletRootDir?: string;
}
