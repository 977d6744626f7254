// The rollout's vocabulary, shared by rendering (which produces a revision), the rollout (which moves nodes
// between revisions) and the status (which reports both): what one revision of a config's plugin is, as the
// reconcile step renders it once per pass, and the words of a node-by-node upgrade. Types and names only.
import type { V1ConfigMap, V1DaemonSet } from "@kubernetes/client-node";
import type { PublishMode } from "../../api/v1beta1/publish.js";

/** How a node changes revision: Surge starts the new plugin beside the old one, Replace stops the old one first. */
export type UpgradeMode = "Surge" | "Replace";

export type RolloutStrategy = "Auto" | "Replace" | "Surge";

/** spec.upgrade, as the rollout reads it. */
export interface RolloutSpec {
  /** Auto surges where the kubelet can take it and replaces elsewhere. */
  strategy: RolloutStrategy;
  /** Nodes in flight at once: a count, or a percentage of the targeted nodes. */
  maxUnavailable: number | `${number}%`;
  /** How long a node may take from first touch until its gate holds. */
  progressDeadlineSeconds: number;
  /** No node starts (in either direction) while paused; nodes already in flight carry on. */
  paused: boolean;
  /** A failed node turns the rollout into a rollback of every node it touched. */
  autoRollback: boolean;
}

/**
 * The current spec of a config as one plugin revision: everything the rollout needs to know of the config,
 * and the objects that run it, rendered once per pass (render/revision.ts). The rollout reads no
 * DevicePluginConfig: it moves nodes between this revision and the DaemonSets already in the cluster.
 */
export interface DesiredRevision {
  /** metadata.name of the config: it names the node labels, the taint and the objects of its plugin. */
  configName: string;
  /** spec.resourceName: the Node's allocatable the rollout's gate reads. */
  resourceName: string;
  /** spec.publish: how this revision's plugin advertises its devices. */
  publish: PublishMode;
  rollout: RolloutSpec;
  /** The hash of the rendered pod template; names the revision's DaemonSet and ConfigMap. */
  revision: string;
  /** The hash of the plugin config the revision's pods carry (ANNOTATION_CONFIG_HASH). */
  configHash: string;
  /** The revision's ConfigMap; its pods mount it. */
  configMap: V1ConfigMap;
  /**
   * The revision's DaemonSet in each role (model/targeting.ts): `base` while it is the only revision,
   * `moving` while nodes move to it. The rollout copies them; it never changes these.
   */
  daemonSets: { readonly base: V1DaemonSet; readonly moving: V1DaemonSet };
}
