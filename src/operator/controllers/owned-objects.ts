// The plugin objects a config owns, read from the caches by its label and checked by owner reference.
import type { V1ConfigMap, V1DaemonSet } from "@kubernetes/client-node";
import { configLabelValue } from "../../contract/names.js";
import { ownerConfigName, ownerUid } from "./mapping.js";
import { INDEX_BY_CONFIG, type ConfigReconcilerDeps } from "./reconciler-deps.js";

/** The config's DaemonSets (by label, and owned by this very config: a namesake's leftovers are not). */
export function ownedDaemonSets(deps: ConfigReconcilerDeps, name: string): V1DaemonSet[] {
  const uid = deps.configs.get(name)?.metadata?.uid;
  return deps.daemonSets
    .byIndex(INDEX_BY_CONFIG, configLabelValue(name))
    .filter((ds) => ownerConfigName(ds.metadata) === name && (uid === undefined || ownerUid(ds) === uid));
}

/** The config's ConfigMaps (by label, and owned by the config of that name). */
export function ownedConfigMaps(deps: ConfigReconcilerDeps, name: string): V1ConfigMap[] {
  return deps.configMaps
    .byIndex(INDEX_BY_CONFIG, configLabelValue(name))
    .filter((cm) => ownerConfigName(cm.metadata) === name);
}
