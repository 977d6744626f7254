// Reconcile step: the DRA objects of a config (spec.publish: DRA), its DeviceClass and the ResourceSlices
// nobody else removes, and the device counts its slices publish. The decisions are ../dra.ts'.
import type { DevicePluginConfig } from "../../../api/v1beta1/config.js";
import { draDeviceClassName, draDriverName } from "../../../api/v1beta1/spec.js";
import {
  DEVICE_CLASSES,
  RESOURCE_SLICES,
  isAlreadyExists,
  isConflict,
  isNotFound,
} from "../../../kube/index.js";
import { configLabelValue } from "../../../contract/names.js";
import {
  kubeletTruth,
  publishedDevicesByNode,
  type DeviceTruth,
  type PathTruth,
  type SlimResourceSlice,
} from "../../status/index.js";
import type { PublishMode } from "../../../api/v1beta1/publish.js";
import { decideDeviceClass, findSlicesToDelete, ownedByConfig } from "../dra.js";
import { ownedDaemonSets } from "../owned-objects.js";
import { publishModeOfDaemonSet } from "../../upgrade/daemonset-state.js";
import { ownedBy } from "../../upgrade/observe.js";
import {
  CLEANUP_ERROR_RETRY_MS,
  CLEANUP_RETRY_MS,
  INDEX_BY_CONFIG,
  INDEX_BY_DRIVER,
  WRITE_CONFLICT_RETRY_MS,
  soonerRetry,
  type StepDeps,
} from "../reconciler-deps.js";

/** ResourceSlices deleted per reconcile (config gone, left DRA, node no longer targeted). */
const SLICE_DELETES_PER_RECONCILE = 50;

/** What the DRA side of a reconcile found: the status's device truth and a DeviceClass conflict. */
export interface DraOutcome {
  truth?: DeviceTruth;
  /** Devices per node that the slices publish, for the upgrade gate; once the slice cache is complete. */
  publishedDevices?: ReadonlyMap<string, number>;
  /** The same in either mode (an entry wherever a slice exists), for a publish switch's ordering. */
  sliceDevices?: ReadonlyMap<string, number>;
  deviceClassConflict?: string;
  retryMs?: number;
}

/**
 * Whether the API server serves resource.k8s.io/v1: the operator hands over the DRA informers once it
 * has found the group served (manager.ts), and never otherwise.
 */
export function resourceApiServed(deps: StepDeps): boolean {
  return deps.slices !== undefined && deps.deviceClasses !== undefined;
}

/**
 * The DRA side of a config: its DeviceClass created, kept current, or left alone when another owns the
 * name; classes it owns under another name (or at all, once it left DRA) deleted; its stale
 * ResourceSlices deleted; and, for a DRA config, the published devices per node for the status and the
 * upgrade gate. `mayOwnClass` is false while the config yields to another for its resource name.
 * `extendedResourceName` is what the class maps (extendedResourceMapping's name: only where the API
 * server keeps the field); while no probe has answered, the class keeps the name it has.
 */
export async function reconcileDraObjects(
  deps: StepDeps,
  config: DevicePluginConfig,
  mayOwnClass: boolean,
  extendedResourceName?: string,
): Promise<DraOutcome> {
  const { slices, deviceClasses } = deps;
  const name = config.metadata.name;
  const isDra = config.spec.publish === "DRA";
  const outcome: DraOutcome = {};
  if (slices === undefined || deviceClasses === undefined) {
    if (isDra)
      outcome.truth = { kind: "ResourceSlices", driver: draDriverName(config.spec), published: new Map() };
    return outcome;
  }
  const retry = (ms: number | undefined) => {
    const sooner = soonerRetry(outcome.retryMs, ms);
    if (sooner !== undefined) outcome.retryMs = sooner;
  };
  const wanted = isDra && mayOwnClass ? draDeviceClassName(config.spec) : undefined;
  if (wanted !== undefined && deviceClasses.hasSynced()) {
    const existing = deviceClasses.get(wanted);
    const mapped =
      deps.extendedResourceNameKept === undefined
        ? existing?.spec?.extendedResourceName
        : extendedResourceName;
    const action = decideDeviceClass(config, existing, mapped);
    try {
      if (action.kind === "Create") {
        await deps.objects.create(DEVICE_CLASSES, action.object);
        deps.logger.info({ config: name, deviceClass: wanted }, "created the DeviceClass");
      } else if (action.kind === "Update") {
        await deps.objects.update(DEVICE_CLASSES, action.object);
        deps.logger.info({ config: name, deviceClass: wanted }, "put the DeviceClass back as rendered");
      } else if (action.kind === "Conflict") {
        outcome.deviceClassConflict = action.message;
      }
    } catch (err) {
      // Lost a race with the cache (someone created or changed it meanwhile): judge again soon.
      if (!(isAlreadyExists(err) || isConflict(err) || isNotFound(err))) throw err;
      retry(WRITE_CONFLICT_RETRY_MS);
    }
  }
  // Classes this very config owns but no longer wants: a renamed class, or all of them off DRA.
  for (const cls of deviceClasses.list()) {
    const clsName = cls.metadata?.name ?? "";
    if (clsName === wanted || !ownedByConfig(cls, config.metadata.uid) || cls.metadata?.deletionTimestamp)
      continue;
    try {
      await deps.objects.delete(DEVICE_CLASSES, { name: clsName }, { uid: cls.metadata?.uid || undefined });
      deps.logger.info(
        { config: name, deviceClass: clsName },
        "deleted a DeviceClass the config no longer wants",
      );
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }
  retry(await deleteSlices(deps, name, config));
  const driver = draDriverName(config.spec);
  if (slices.hasSynced())
    outcome.sliceDevices = publishedDevicesByNode(slices.byIndex(INDEX_BY_DRIVER, driver), driver);
  const rest: PathTruth = isDra
    ? draTruth(config, outcome.sliceDevices ?? new Map<string, number>())
    : kubeletTruth(config.spec.resourceName);
  outcome.truth = switchTruth(config, pluginPaths(deps, name), outcome.sliceDevices, rest);
  // Before the slice cache is complete, the gate would read every node as empty: leave it to Node
  // allocatable (which holds nothing in DRA mode, so it waits) rather than record zero baselines.
  if (isDra && outcome.sliceDevices !== undefined) outcome.publishedDevices = outcome.sliceDevices;
  return outcome;
}

/**
 * The path each node's running plugin pod of the config publishes through (its DaemonSet's mode), where
 * one runs. During a switch of spec.publish, nodes differ: a node whose DRA plugin still runs keeps its
 * slices (the switch deletes them once the pod is gone), and each node's devices are counted on its path.
 * Running, terminating or not: a pod that never started publishes nothing, and on a node without a
 * kubelet it would never leave.
 */
function pluginPaths(deps: StepDeps, name: string): Map<string, PublishMode> {
  const sets = ownedDaemonSets(deps, name).map((ds) => ({ ds, mode: publishModeOfDaemonSet(ds) }));
  const paths = new Map<string, PublishMode>();
  for (const pod of deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name))) {
    const node = pod.spec?.nodeName;
    if (pod.status?.phase !== "Running" || node === undefined) continue;
    const owner = sets.find((s) => ownedBy(pod, s.ds));
    if (owner !== undefined && paths.get(node) !== "DRA") paths.set(node, owner.mode);
  }
  return paths;
}

/**
 * The DRA path's truth: the devices the node's slices publish, a time-sliced device counting once per
 * share, as the plugin's report counts its replicas.
 */
function draTruth(config: DevicePluginConfig, published: ReadonlyMap<string, number>): PathTruth {
  const { sharing } = config.spec;
  const sharesPerDevice = sharing.strategy === "TimeSlicing" ? (sharing.replicas ?? 1) : 1;
  return { kind: "ResourceSlices", driver: draDriverName(config.spec), published, sharesPerDevice };
}

/** The status's device truth: the spec's path, or per node while nodes run the other path's plugin. */
function switchTruth(
  config: DevicePluginConfig,
  paths: ReadonlyMap<string, PublishMode>,
  sliceDevices: ReadonlyMap<string, number> | undefined,
  rest: PathTruth,
): DeviceTruth {
  const byNode = new Map<string, PathTruth>();
  for (const [node, path] of paths) {
    if (path === config.spec.publish) continue;
    byNode.set(
      node,
      path === "DRA"
        ? draTruth(config, sliceDevices ?? new Map<string, number>())
        : kubeletTruth(config.spec.resourceName),
    );
  }
  return byNode.size === 0 ? rest : { kind: "PerNode", byNode, rest };
}

/**
 * Deletes (a bounded batch of) the ResourceSlices labelled with the config that nobody else removes
 * (see findSlicesToDelete); `config` undefined: the config is gone. Returns when to come back.
 */
export async function deleteSlices(
  deps: StepDeps,
  name: string,
  config: DevicePluginConfig | undefined,
): Promise<number | undefined> {
  const slices = deps.slices;
  if (slices === undefined || !slices.hasSynced()) return undefined;
  const label = configLabelValue(name);
  // A config gone, but another with the same label value (a long, hashed name) still there: not ours.
  if (
    config === undefined &&
    deps.configs.list().some((c) => configLabelValue(c.metadata?.name ?? "") === label)
  ) {
    return undefined;
  }
  const { slices: doomed, remaining } = findSlicesToDelete({
    configLabel: label,
    config,
    slices: slices.byIndex(INDEX_BY_CONFIG, label),
    node: (n) => deps.nodes.get(n),
    nodesSynced: deps.nodes.hasSynced(),
    draPluginOn:
      config === undefined
        ? undefined
        : new Set([...pluginPaths(deps, name)].flatMap(([node, path]) => (path === "DRA" ? [node] : []))),
    limit: SLICE_DELETES_PER_RECONCILE,
  });
  let retryMs = remaining > 0 ? CLEANUP_RETRY_MS : undefined;
  for (const { slice, reason } of doomed) {
    try {
      await deleteSlice(deps, name, slice, { reason }, "deleted ResourceSlice");
    } catch (err) {
      deps.logger.warn(
        { config: name, slice: slice.metadata.name, err: String(err) },
        "could not delete ResourceSlice; retrying later",
      );
      retryMs = CLEANUP_ERROR_RETRY_MS;
    }
  }
  return retryMs;
}

/**
 * Deletes one slice, if it is still the one the cache showed (uid precondition), and logs it. A 404 or
 * 409 (gone already, or a new slice under the name, judged afresh next time) is done; other errors throw.
 */
async function deleteSlice(
  deps: StepDeps,
  config: string,
  slice: SlimResourceSlice,
  fields: Record<string, string>,
  message: string,
): Promise<void> {
  const sliceName = slice.metadata.name ?? "";
  try {
    await deps.objects.delete(RESOURCE_SLICES, { name: sliceName }, { uid: slice.metadata.uid || undefined });
    deps.logger.info({ config, slice: sliceName, node: slice.spec.nodeName, ...fields }, message);
  } catch (err) {
    if (!isNotFound(err) && !isConflict(err)) throw err;
  }
}

/**
 * A publish switch leaving DRA on `node` (its DRA plugin pod gone): the node's ResourceSlices of the
 * config go, so the device plugin can start there without both paths advertising the name.
 */
export async function deleteNodeSlices(deps: StepDeps, name: string, node: string): Promise<void> {
  const slices = deps.slices;
  if (slices === undefined || !slices.hasSynced()) return;
  for (const slice of slices.byIndex(INDEX_BY_CONFIG, configLabelValue(name))) {
    if (slice.spec.nodeName !== node || slice.metadata.deletionTimestamp) continue;
    await deleteSlice(deps, name, slice, {}, "deleted ResourceSlice: the node leaves DRA");
  }
}
