// Which configs a leader reconciles when it starts to lead: every config that exists, and every config name
// that something dpo left behind still carries, whether or not the config exists (ADR 0009). A config
// deleted while no operator led is found again this way, and its reconcile (the delete path) takes off what
// it left. Pure: from cached objects to config names.
import type { V1Node, V1ObjectMeta } from "@kubernetes/client-node";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import { LABEL_CONFIG } from "../../contract/names.js";
import type { SlimResourceSlice } from "../status/published-devices.js";
import { configsMarkedOn } from "../upgrade/node-marks.js";
import { configForLabel, configForSlice, ownerConfigName, type ConfigLookup } from "./mapping.js";

/** The cached objects dpo writes, or that carry a config's name. */
export interface LeftBehind {
  /** Nodes: their labels, annotations and taints (NODE_MARKS). */
  nodes: readonly V1Node[];
  /** The plugin DaemonSets and ConfigMaps (owned by their config), the plugin pods (by label). */
  owned: readonly { metadata?: V1ObjectMeta | undefined }[];
  /** The plugins' reports (spec.configName). */
  reports: readonly DeviceNodeState[];
  /** The plugins' ResourceSlices (label); absent where resource.k8s.io/v1 is not served. */
  slices?: readonly SlimResourceSlice[];
}

/**
 * Every config name to reconcile at the start of a term: the configs, then the names that the objects left
 * behind carry (a config's label value is its name up to 63 characters; a longer one's is mapped back when
 * the config exists, and a deleted one's is reconciled by its label value, which the delete path cleans by).
 * Each name once, in that order.
 */
export function configsToReconcileAtStart(configs: ConfigLookup, left: LeftBehind): string[] {
  const found = new Set<string>();
  for (const c of configs.list()) if (c.metadata?.name) found.add(c.metadata.name);
  const byLabel = (value: string | undefined): void => {
    if (value) found.add(configForLabel(configs, value) ?? value);
  };
  for (const node of left.nodes) for (const value of configsMarkedOn(node)) byLabel(value);
  for (const o of left.owned) {
    const owner = ownerConfigName(o.metadata);
    if (owner) found.add(owner);
    else byLabel(o.metadata?.labels?.[LABEL_CONFIG]);
  }
  for (const r of left.reports) if (r.spec?.configName) found.add(r.spec.configName);
  for (const slice of left.slices ?? []) {
    const name = configForSlice(configs, slice);
    if (name) found.add(name);
  }
  return [...found];
}
