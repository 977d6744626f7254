// The DevicePluginConfig reconciler: one config name in, the plugin ConfigMap and DaemonSet applied (or
// removed on a resource-name conflict) and the status written when it changed. Reads only informer caches.
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { validateDevicePluginConfig } from "../../api/validate.js";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../api/v1beta1/status.js";
import { configLabelValue } from "../../contract/names.js";
import {
  isAlreadyExists,
  isConflict,
  isForbidden,
  isInvalid,
  type ApplyObject,
  isNotFound,
  type EventRecorder,
  type Informer,
  type ReconcileResult,
  type ServerSideApplier,
} from "../../kube/index.js";
import {
  LABEL_REVISION,
  renderPluginConfigMap,
  revisionObjectName,
  type RenderContext,
} from "../render/index.js";
import { decideRollout, revisionOfDaemonSet, type RolloutDecision } from "../upgrade/rollout.js";
import { pluginRunsOnNode } from "../status/selection.js";
import {
  aggregateStatus,
  findResourceNameConflicts,
  previousStatusOf,
  statusEqual,
  withTransitionTimes,
} from "../status/index.js";
import { containsDesired } from "./drift.js";
import { ownerConfigName, ownerUid } from "./mapping.js";
import { findStaleReports } from "./stale-reports.js";
import { decideDeviceClass, findSlicesToDelete, ownedByConfig, type DeviceClass } from "./dra.js";
import { draDeviceClassName, draDriverName } from "../../api/v1beta1/spec.js";
import { publishedDevicesByNode, type DeviceTruth, type SlimResourceSlice } from "../status/index.js";
import type { OperatorMetrics } from "../metrics.js";

/** A DevicePluginConfig as the API server returns it: spec not yet checked, status as last written. */
export type StoredConfig = KubernetesObject & { spec?: unknown; status?: unknown };

/** Index names the reconciler expects on its informers. */
export const INDEX_BY_CONFIG = "config";
/** ResourceSlices by spec.driver. */
export const INDEX_BY_DRIVER = "driver";

export interface ConfigReconcilerDeps {
  configs: Informer<StoredConfig>;
  nodes: Informer<V1Node>;
  /** Plugin pods, indexed by INDEX_BY_CONFIG on their `dpo.dev/config` label. */
  pods: Informer<V1Pod>;
  daemonSets: Informer<V1DaemonSet>;
  configMaps: Informer<V1ConfigMap>;
  /** DeviceNodeStates, indexed by INDEX_BY_CONFIG on spec.configName. */
  reports: Informer<DeviceNodeState>;
  applier: ServerSideApplier;
  /**
   * ResourceSlices (slim, see slimResourceSliceForCache) and DeviceClasses, when the API server serves
   * resource.k8s.io/v1. Without them DRA configs get no DeviceClass and no slice cleanup, and their
   * device counts read as none.
   */
  slices?: Informer<SlimResourceSlice> | undefined;
  deviceClasses?: Informer<DeviceClass & { metadata?: { name?: string } }> | undefined;
  /** DELETE of the object at `path`; with `uid`, only if the object there still has that uid. */
  deleteObject: (path: string, preconditions?: { uid?: string }) => Promise<void>;
  /** POST of a new object to the collection at `path` (fails with AlreadyExists). */
  createObject: (path: string, object: object) => Promise<void>;
  /** PUT of the object at `path`, with the resourceVersion it carries (fails with Conflict when stale). */
  updateObject: (path: string, object: object) => Promise<void>;
  events: EventRecorder;
  render: RenderContext;
  logger: Logger;
  metrics: OperatorMetrics;
  now?: () => Date;
  /** At most one status write per config in this interval, so 5000 node updates are not 5000 writes. */
  statusWriteIntervalMs?: number;
}

/** Stale DeviceNodeStates deleted per reconcile: a drained node pool must not stall the other configs. */
const STALE_REPORT_DELETES_PER_RECONCILE = 20;
/** When to come back after a write lost a race (a stale cache, another writer). */
const WRITE_CONFLICT_RETRY_MS = 500;
/** When to come back for the stale reports left over, or after a delete failed. */
const STALE_REPORT_RETRY_MS = 1_000;
const STALE_REPORT_ERROR_RETRY_MS = 10_000;
/** ResourceSlices deleted per reconcile (config gone, left DRA, node no longer targeted). */
const SLICE_DELETES_PER_RECONCILE = 50;
const DEVICE_CLASSES_PATH = "/apis/resource.k8s.io/v1/deviceclasses";
const RESOURCE_SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices";

/** What the DRA side of a reconcile found: the status's device truth and a DeviceClass conflict. */
interface DraOutcome {
  truth?: DeviceTruth;
  publishedDevices?: ReadonlyMap<string, number>;
  deviceClassConflict?: string;
  retryMs?: number;
}

/** The status we wrote last and the resourceVersion it produced, until the cache has caught up with it. */
interface WrittenStatus {
  resourceVersion: string;
  status: DevicePluginConfigStatus;
}

/** Orders resourceVersions the way client-go's mutation cache does: as integers when both are. */
function newerOrSame(candidate: string | undefined, reference: string): boolean {
  if (candidate === undefined) return false;
  if (/^\d+$/.test(candidate) && /^\d+$/.test(reference)) return BigInt(candidate) >= BigInt(reference);
  return candidate === reference;
}

export class ConfigReconciler {
  private readonly written = new Map<string, WrittenStatus>();
  /** The last status this replica wrote per config, to tell its own writes from someone else's. */
  private readonly lastWritten = new Map<string, DevicePluginConfigStatus>();
  private readonly lastStatusWriteAt = new Map<string, number>();
  private readonly now: () => Date;
  private readonly interval: number;

  constructor(private readonly deps: ConfigReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.interval = deps.statusWriteIntervalMs ?? 500;
  }

  /** The DRA informers, once the operator knows the API server serves resource.k8s.io/v1. */
  useDraInformers(
    slices: Informer<SlimResourceSlice>,
    deviceClasses: Informer<DeviceClass & { metadata?: { name?: string } }>,
  ): void {
    this.deps.slices = slices;
    this.deps.deviceClasses = deviceClasses;
  }

  /**
   * Whether the API server serves resource.k8s.io/v1: the operator hands over the DRA informers once it
   * has found the group served (manager.ts), and never otherwise.
   */
  private resourceApiServed(): boolean {
    return this.deps.slices !== undefined && this.deps.deviceClasses !== undefined;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const { deps } = this;
    const stored = deps.configs.get(name);
    if (!stored) {
      // Garbage collection removes what the config owned (its DeviceClass too); its ResourceSlices carry
      // no owner reference (the plugins write them), so they are deleted here. No finalizer: it would
      // leave configs undeletable while the operator is down or uninstalled; a slice whose config is
      // gone brings its label's name back to this queue (manager.ts), so the sweep also happens after a
      // restart that missed the delete.
      this.written.delete(name);
      this.lastWritten.delete(name);
      this.lastStatusWriteAt.delete(name);
      const retryMs = await this.deleteSlices(name, undefined);
      return retryMs === undefined ? {} : { requeueAfterMs: retryMs };
    }
    if (stored.metadata?.deletionTimestamp) {
      // Being deleted (foreground cascade): re-applying the DaemonSet would fight the garbage collector.
      return {};
    }
    const parsed = validateDevicePluginConfig(stored);
    if (!parsed.ok) {
      const message = parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; ");
      deps.logger.warn({ config: name, err: message }, "stored config does not validate; not applying it");
      return this.writeStatus(stored, this.invalidSpecStatus(stored, message), []);
    }
    const config = parsed.value;

    // Conflicts are decided among the configs of this resource name: only those are validated (the
    // stored spec's resourceName read as is first), and nodes are read only if two of them overlap.
    const valid: DevicePluginConfig[] = [config];
    for (const other of deps.configs.list()) {
      if (other.metadata?.name === name) continue;
      if ((other.spec as { resourceName?: unknown } | undefined)?.resourceName !== config.spec.resourceName)
        continue;
      const r = validateDevicePluginConfig(other);
      if (r.ok && r.value.spec.resourceName === config.spec.resourceName) valid.push(r.value);
    }
    const nodes = deps.nodes.list();
    const conflictWith = findResourceNameConflicts(valid, nodes).get(name);

    const dra = await this.reconcileDra(config, conflictWith === undefined);

    let applyError: string | undefined;
    let decision: RolloutDecision | undefined;
    let rolloutRetryMs: number | undefined;
    if (conflictWith !== undefined) {
      await this.removeOwned(name);
    } else {
      ({
        applyError,
        decision,
        retryMs: rolloutRetryMs,
      } = await this.applyOwned(config, nodes, dra.publishedDevices));
    }

    const staleRetryMs = await this.deleteStaleReports(config);

    const previous = this.previousStatus(name, stored);
    const { status, events } = aggregateStatus({
      config,
      nodes,
      pods: deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name)),
      reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
      daemonSet:
        decision === undefined
          ? undefined
          : this.ownedDaemonSets(name).find((ds) => revisionOfDaemonSet(ds) === decision.revision),
      daemonSetName: decision === undefined ? undefined : revisionObjectName(name, decision.revision),
      upgrade: decision?.status,
      upgradeProblems: decision?.problems,
      upgradeModes: decision?.modes,
      resourceApiServed: config.spec.publish === "DRA" ? this.resourceApiServed() : undefined,
      conflictWith,
      applyError,
      deviceTruth: dra.truth,
      deviceClassConflict: dra.deviceClassConflict,
      previous,
      now: this.now(),
    });
    const written = await this.writeStatus(stored, status, events, previous);
    return soonest(soonest(soonest(written, staleRetryMs), rolloutRetryMs), dra.retryMs);
  }

  /**
   * Deletes (a bounded batch of) the config's DeviceNodeStates whose node left the cluster or is no longer
   * one the plugin runs on: no plugin is left to update or remove them, and they would stay forever. Also
   * those under a name an earlier plugin version used, once the report under the current name exists:
   * the new plugin does not know the old name, so nothing else would remove them.
   * Returns when to come back, if there is more to do.
   */
  private async deleteStaleReports(config: DevicePluginConfig): Promise<number | undefined> {
    const { deps } = this;
    const name = config.metadata.name;
    // Revisions are judged only against a synced cache that shows at least one DaemonSet: before the
    // first one exists, every report would look like one of a revision that is gone.
    const daemonSets = deps.daemonSets.hasSynced() ? this.ownedDaemonSets(name) : [];
    const { stale, remaining } = findStaleReports({
      configName: name,
      spec: config.spec,
      reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
      node: (nodeName) => deps.nodes.get(nodeName),
      nodesSynced: deps.nodes.hasSynced(),
      limit: STALE_REPORT_DELETES_PER_RECONCILE,
      revisions: daemonSets.length > 0 ? new Set(daemonSets.map(revisionOfDaemonSet)) : undefined,
      now: this.now().getTime(),
    });
    let retryMs = remaining > 0 ? STALE_REPORT_RETRY_MS : undefined;
    for (const { report, reason, replacedBy } of stale) {
      const reportName = report.metadata.name;
      const path = `/apis/dpo.dev/v1beta1/namespaces/${deps.render.namespace}/devicenodestates/${reportName}`;
      const uid = typeof report.metadata["uid"] === "string" ? report.metadata["uid"] : undefined;
      try {
        await deps.deleteObject(path, uid === undefined ? undefined : { uid });
        deps.logger.info(
          {
            config: name,
            node: report.spec.nodeName,
            report: reportName,
            reason,
            ...(replacedBy !== undefined ? { replacedBy } : {}),
          },
          reason === "Superseded"
            ? "deleted DeviceNodeState superseded by the report under its current name"
            : "deleted stale DeviceNodeState",
        );
      } catch (err) {
        // 404: someone else deleted it. 409: the uid precondition failed, so it is a new report that the
        // next reconcile judges afresh. Both are done as far as this one is concerned.
        if (isNotFound(err) || isConflict(err)) continue;
        deps.logger.warn(
          { config: name, node: report.spec.nodeName, report: reportName, err: String(err) },
          "could not delete stale DeviceNodeState; retrying later",
        );
        retryMs = STALE_REPORT_ERROR_RETRY_MS;
      }
    }
    return retryMs;
  }

  /**
   * The DRA side of a config: its DeviceClass created, kept current, or left alone when another owns the
   * name; classes it owns under another name (or at all, once it left DRA) deleted; its stale
   * ResourceSlices deleted; and, for a DRA config, the published devices per node for the status and the
   * upgrade gate. `mayOwnClass` is false while the config yields to another for its resource name.
   */
  private async reconcileDra(config: DevicePluginConfig, mayOwnClass: boolean): Promise<DraOutcome> {
    const { deps } = this;
    const { slices, deviceClasses } = deps;
    const name = config.metadata.name;
    const isDra = config.spec.publish === "DRA";
    const outcome: DraOutcome = {};
    if (slices === undefined || deviceClasses === undefined) {
      if (isDra)
        outcome.truth = { kind: "ResourceSlices", driver: draDriverName(config.spec), published: new Map() };
      return outcome;
    }
    const retry = (ms: number) => {
      outcome.retryMs = outcome.retryMs === undefined ? ms : Math.min(outcome.retryMs, ms);
    };
    const wanted = isDra && mayOwnClass ? draDeviceClassName(config.spec) : undefined;
    if (wanted !== undefined && deviceClasses.hasSynced()) {
      const action = decideDeviceClass(config, deviceClasses.get(wanted));
      try {
        if (action.kind === "Create") {
          await deps.createObject(DEVICE_CLASSES_PATH, action.object);
          deps.logger.info({ config: name, deviceClass: wanted }, "created the DeviceClass");
        } else if (action.kind === "Update") {
          await deps.updateObject(`${DEVICE_CLASSES_PATH}/${encodeURIComponent(wanted)}`, action.object);
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
        await deps.deleteObject(`${DEVICE_CLASSES_PATH}/${encodeURIComponent(clsName)}`, {
          ...(cls.metadata?.uid ? { uid: cls.metadata.uid } : {}),
        });
        deps.logger.info(
          { config: name, deviceClass: clsName },
          "deleted a DeviceClass the config no longer wants",
        );
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
    }
    const sliceRetry = await this.deleteSlices(name, config);
    if (sliceRetry !== undefined) retry(sliceRetry);
    if (isDra) {
      const driver = draDriverName(config.spec);
      const published = slices.hasSynced()
        ? publishedDevicesByNode(slices.byIndex(INDEX_BY_DRIVER, driver), driver)
        : new Map<string, number>();
      outcome.truth = { kind: "ResourceSlices", driver, published };
      // Before the slice cache is complete, the gate would read every node as empty: leave it to Node
      // allocatable (which holds nothing in DRA mode, so it waits) rather than record zero baselines.
      if (slices.hasSynced()) outcome.publishedDevices = published;
    }
    return outcome;
  }

  /**
   * Deletes (a bounded batch of) the ResourceSlices labelled with the config that nobody else removes
   * (see findSlicesToDelete); `config` undefined: the config is gone. Returns when to come back.
   */
  private async deleteSlices(
    name: string,
    config: DevicePluginConfig | undefined,
  ): Promise<number | undefined> {
    const { deps } = this;
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
      limit: SLICE_DELETES_PER_RECONCILE,
    });
    let retryMs = remaining > 0 ? STALE_REPORT_RETRY_MS : undefined;
    for (const { slice, reason } of doomed) {
      const sliceName = slice.metadata.name ?? "";
      try {
        await deps.deleteObject(`${RESOURCE_SLICES_PATH}/${encodeURIComponent(sliceName)}`, {
          ...(slice.metadata.uid ? { uid: slice.metadata.uid } : {}),
        });
        deps.logger.info(
          { config: name, slice: sliceName, node: slice.spec.nodeName, reason },
          "deleted ResourceSlice",
        );
      } catch (err) {
        if (isNotFound(err) || isConflict(err)) continue;
        deps.logger.warn(
          { config: name, slice: sliceName, err: String(err) },
          "could not delete ResourceSlice; retrying later",
        );
        retryMs = STALE_REPORT_ERROR_RETRY_MS;
      }
    }
    return retryMs;
  }

  /** The config's DaemonSets (by label, and owned by this very config: a namesake's leftovers are not). */
  private ownedDaemonSets(name: string): V1DaemonSet[] {
    const uid = this.deps.configs.get(name)?.metadata?.uid;
    return this.deps.daemonSets
      .byIndex(INDEX_BY_CONFIG, configLabelValue(name))
      .filter((ds) => ownerConfigName(ds.metadata) === name && (uid === undefined || ownerUid(ds) === uid));
  }

  private ownedConfigMaps(name: string): V1ConfigMap[] {
    return this.deps.configMaps
      .byIndex(INDEX_BY_CONFIG, configLabelValue(name))
      .filter((cm) => ownerConfigName(cm.metadata) === name);
  }

  /**
   * Moves the plugin DaemonSets one step (see upgrade/rollout.ts): the current revision's ConfigMap
   * first, then the rollout's writes in order, then ConfigMaps of revisions that are gone. A write that
   * loses a race (409) stops the pass and comes back soon; Forbidden and Invalid do not heal by retrying
   * and are returned for the status.
   */
  private async applyOwned(
    config: DevicePluginConfig,
    nodes: readonly V1Node[],
    publishedDevices: ReadonlyMap<string, number> | undefined,
  ): Promise<{ applyError?: string; decision: RolloutDecision; retryMs?: number }> {
    const { deps } = this;
    const name = config.metadata.name;
    const ns = deps.render.namespace;
    const decision = decideRollout({
      config,
      render: deps.render,
      daemonSets: this.ownedDaemonSets(name),
      nodes: nodes.filter((n) => pluginRunsOnNode(n, config.spec)),
      pods: deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name)),
      reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
      publishedDevices,
      now: this.now().getTime(),
    });
    const configMap = renderPluginConfigMap(config, deps.render, decision.revision) as ApplyObject;
    const dsPath = (dsName: string) => `/apis/apps/v1/namespaces/${ns}/daemonsets/${dsName}`;
    const fail = (kind: string, objectName: string, err: unknown) => {
      deps.metrics.applyErrors.inc({ kind });
      return `${kind} ${ns}/${objectName}: ${(err as Error).message}`;
    };
    try {
      if (!containsDesired(configMap, deps.configMaps.get(configMap.metadata.name, ns))) {
        await deps.applier.apply(configMap);
        deps.metrics.applies.inc({ kind: "ConfigMap" });
        deps.logger.info({ config: name, kind: "ConfigMap", name: configMap.metadata.name }, "applied");
      }
    } catch (err) {
      if (isForbidden(err) || isInvalid(err)) {
        return { applyError: fail("ConfigMap", configMap.metadata.name, err), decision };
      }
      throw err;
    }
    for (const write of decision.writes) {
      const dsName = write.kind === "Delete" ? write.name : (write.daemonSet.metadata?.name ?? "");
      try {
        if (write.kind === "Create") {
          await deps.createObject(`/apis/apps/v1/namespaces/${ns}/daemonsets`, write.daemonSet);
        } else if (write.kind === "Update") {
          await deps.updateObject(dsPath(dsName), write.daemonSet);
        } else {
          await deps.deleteObject(dsPath(dsName), write.uid === undefined ? undefined : { uid: write.uid });
        }
        deps.metrics.applies.inc({ kind: "DaemonSet" });
        deps.logger.info({ config: name, daemonSet: dsName, write: write.kind }, "plugin DaemonSet written");
      } catch (err) {
        if (isConflict(err) || isAlreadyExists(err) || isNotFound(err)) {
          deps.logger.debug(
            { config: name, daemonSet: dsName, write: write.kind, err: String(err) },
            "lost a race writing a plugin DaemonSet; planning again from the cache",
          );
          return { decision, retryMs: WRITE_CONFLICT_RETRY_MS };
        }
        if (isForbidden(err) || isInvalid(err))
          return { applyError: fail("DaemonSet", dsName, err), decision };
        throw err;
      }
    }
    const involved = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, uid: config.metadata.uid },
    };
    for (const e of decision.events) void deps.events.record(involved, e.type, e.reason, e.message);
    await this.deleteUnusedConfigMaps(name, decision.liveRevisions, decision.writes);
    return {
      decision,
      ...(decision.requeueAfterMs !== undefined ? { retryMs: decision.requeueAfterMs } : {}),
    };
  }

  /** ConfigMaps of revisions no DaemonSet runs any more (deleted by this pass, or earlier). */
  private async deleteUnusedConfigMaps(
    name: string,
    live: ReadonlySet<string>,
    writes: RolloutDecision["writes"],
  ): Promise<void> {
    const deleted = new Set(writes.flatMap((w) => (w.kind === "Delete" ? [w.revision] : [])));
    const ns = this.deps.render.namespace;
    for (const cm of this.ownedConfigMaps(name)) {
      const revision = cm.metadata?.labels?.[LABEL_REVISION] ?? "";
      if (live.has(revision) && !deleted.has(revision)) continue;
      const cmName = cm.metadata?.name ?? "";
      try {
        await this.deps.deleteObject(`/api/v1/namespaces/${ns}/configmaps/${cmName}`, {
          ...(cm.metadata?.uid ? { uid: cm.metadata.uid } : {}),
        });
        this.deps.logger.info(
          { config: name, configMap: cmName },
          "deleted the ConfigMap of a revision that is gone",
        );
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
    }
  }

  /** A config that lost a resource-name conflict must not run: delete its DaemonSets and ConfigMaps. */
  private async removeOwned(name: string): Promise<void> {
    const { deps } = this;
    const ns = deps.render.namespace;
    const targets: string[] = [
      ...this.ownedDaemonSets(name).map(
        (ds) => `/apis/apps/v1/namespaces/${ns}/daemonsets/${ds.metadata?.name}`,
      ),
      ...this.ownedConfigMaps(name).map((cm) => `/api/v1/namespaces/${ns}/configmaps/${cm.metadata?.name}`),
    ];
    for (const path of targets) {
      try {
        await deps.deleteObject(path);
        deps.logger.info(
          { config: name, path },
          "deleted: the config yields to an older one for its resource name",
        );
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  }

  /**
   * Whether `status` is the one this replica wrote last for the config: its own writes come back as
   * updates and need no reconcile; any other status change (another writer, an older replica, a user's
   * `kubectl edit --subresource=status`) does, so the truth is put back.
   */
  isOwnStatus(name: string, status: unknown): boolean {
    const mine = this.lastWritten.get(name);
    return mine !== undefined && statusEqual(mine, status as DevicePluginConfigStatus | undefined);
  }

  /**
   * The status to compare against: the cache's, unless our own last write has not reached the cache yet
   * (then the cache would make us write, and announce, the same transition twice).
   */
  private previousStatus(name: string, stored: StoredConfig): DevicePluginConfigStatus | undefined {
    const mine = this.written.get(name);
    const rv = stored.metadata?.resourceVersion;
    if (mine && !newerOrSame(rv, mine.resourceVersion)) return mine.status;
    this.written.delete(name);
    return previousStatusOf(stored);
  }

  private async writeStatus(
    stored: StoredConfig,
    status: DevicePluginConfigStatus,
    events: readonly { type: "Normal" | "Warning"; reason: string; message: string }[],
    previous: DevicePluginConfigStatus | undefined = previousStatusOf(stored),
  ): Promise<ReconcileResult> {
    const name = stored.metadata!.name!;
    if (statusEqual(previous, status)) return {};
    const nowMs = this.now().getTime();
    const last = this.lastStatusWriteAt.get(name);
    if (last !== undefined && nowMs - last < this.interval) {
      this.deps.metrics.statusWritesDeferred.inc();
      return { requeueAfterMs: this.interval - (nowMs - last) };
    }
    const object = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name },
      status,
    };
    const result = await this.deps.applier.applyStatus(object);
    // The interval runs from the write's answer, not its start: a slow write followed by a quick one
    // would otherwise land closer than the interval at the API server, and on its watchers.
    this.lastStatusWriteAt.set(name, this.now().getTime());
    this.deps.metrics.statusWrites.inc();
    const rv = (result as KubernetesObject).metadata?.resourceVersion;
    if (rv) this.written.set(name, { resourceVersion: rv, status });
    this.lastWritten.set(name, status);
    const involved = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, uid: stored.metadata?.uid, resourceVersion: rv },
    };
    for (const e of events) void this.deps.events.record(involved, e.type, e.reason, e.message);
    return {};
  }

  private invalidSpecStatus(stored: StoredConfig, message: string): DevicePluginConfigStatus {
    const generation = stored.metadata?.generation ?? 0;
    const previous = previousStatusOf(stored);
    const bounded = message.length > 1024 ? `${message.slice(0, 1023)}…` : message;
    return {
      ...previous,
      observedGeneration: generation,
      conditions: withTransitionTimes(
        [
          {
            type: "Ready",
            status: "False",
            reason: "InvalidSpec",
            message: bounded,
            observedGeneration: generation,
          },
          {
            type: "Reconciling",
            status: "False",
            reason: "InvalidSpec",
            message: "the spec must be fixed",
            observedGeneration: generation,
          },
          {
            type: "Stalled",
            status: "True",
            reason: "InvalidSpec",
            message: bounded,
            observedGeneration: generation,
          },
          {
            type: "Degraded",
            status: "Unknown",
            reason: "InvalidSpec",
            message: "not evaluated",
            observedGeneration: generation,
          },
        ],
        previous?.conditions,
        this.now(),
      ),
    };
  }
}

/** The reconcile result that comes back at the earlier of the two times. */
function soonest(result: ReconcileResult, retryMs: number | undefined): ReconcileResult {
  if (retryMs === undefined) return result;
  if (result.requeueAfterMs === undefined || retryMs < result.requeueAfterMs)
    return { ...result, requeueAfterMs: retryMs };
  return result;
}
