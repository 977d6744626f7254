// The DevicePluginConfig reconciler: one config name in, the plugin ConfigMap and DaemonSet applied (or
// removed on a resource-name conflict) and the status written when it changed. Reads only informer caches.
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { validateDevicePluginConfig } from "../../api/validate.js";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { DeviceNodeState } from "../../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../api/v1beta1/status.js";
import {
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
  configLabelValue,
  pluginObjectName,
  renderPluginConfigMap,
  renderPluginDaemonSet,
  type RenderContext,
} from "../render/index.js";
import {
  aggregateStatus,
  findResourceNameConflicts,
  previousStatusOf,
  statusEqual,
  withTransitionTimes,
} from "../status/index.js";
import { containsDesired } from "./drift.js";
import { ownerConfigName } from "./mapping.js";
import { findStaleReports } from "./stale-reports.js";
import type { OperatorMetrics } from "../metrics.js";

/** A DevicePluginConfig as the API server returns it: spec not yet checked, status as last written. */
export type StoredConfig = KubernetesObject & { spec?: unknown; status?: unknown };

/** Index names the reconciler expects on its informers. */
export const INDEX_BY_CONFIG = "config";

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
  /** DELETE of the object at `path`; with `uid`, only if the object there still has that uid. */
  deleteObject: (path: string, preconditions?: { uid?: string }) => Promise<void>;
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
/** When to come back for the stale reports left over, or after a delete failed. */
const STALE_REPORT_RETRY_MS = 1_000;
const STALE_REPORT_ERROR_RETRY_MS = 10_000;

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
  private readonly lastStatusWriteAt = new Map<string, number>();
  private readonly now: () => Date;
  private readonly interval: number;

  constructor(private readonly deps: ConfigReconcilerDeps) {
    this.now = deps.now ?? (() => new Date());
    this.interval = deps.statusWriteIntervalMs ?? 500;
  }

  async reconcile(name: string): Promise<ReconcileResult> {
    const { deps } = this;
    const stored = deps.configs.get(name);
    if (!stored) {
      // Garbage collection removes what the config owned; nothing to do but forget it.
      this.written.delete(name);
      this.lastStatusWriteAt.delete(name);
      return {};
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

    const valid: DevicePluginConfig[] = [];
    for (const other of deps.configs.list()) {
      const r = other.metadata?.name === name ? parsed : validateDevicePluginConfig(other);
      if (r.ok) valid.push(r.value);
    }
    const nodes = deps.nodes.list();
    const conflictWith = findResourceNameConflicts(valid, nodes).get(name);

    const objectName = pluginObjectName(name);
    const ns = deps.render.namespace;
    let applyError: string | undefined;
    if (conflictWith !== undefined) {
      await this.removeOwned(name, objectName, ns);
    } else {
      applyError = await this.applyOwned(config);
    }

    const staleRetryMs = await this.deleteStaleReports(config);

    const previous = this.previousStatus(name, stored);
    const { status, events } = aggregateStatus({
      config,
      nodes,
      pods: deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name)),
      reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
      daemonSet: conflictWith === undefined ? deps.daemonSets.get(objectName, ns) : undefined,
      conflictWith,
      applyError,
      previous,
      now: this.now(),
    });
    const written = await this.writeStatus(stored, status, events, previous);
    return soonest(written, staleRetryMs);
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
    const { stale, remaining } = findStaleReports({
      configName: name,
      spec: config.spec,
      reports: deps.reports.byIndex(INDEX_BY_CONFIG, name),
      node: (nodeName) => deps.nodes.get(nodeName),
      nodesSynced: deps.nodes.hasSynced(),
      limit: STALE_REPORT_DELETES_PER_RECONCILE,
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

  /** Applies the ConfigMap and DaemonSet when the cache shows they differ; returns a permanent error. */
  private async applyOwned(config: DevicePluginConfig): Promise<string | undefined> {
    const { deps } = this;
    const ns = deps.render.namespace;
    const configMap = renderPluginConfigMap(config, deps.render) as ApplyObject;
    const daemonSet = renderPluginDaemonSet(config, deps.render) as ApplyObject;
    const desired: [ApplyObject, unknown][] = [
      [configMap, deps.configMaps.get(configMap.metadata.name, ns)],
      [daemonSet, deps.daemonSets.get(daemonSet.metadata.name, ns)],
    ];
    for (const [object, cached] of desired) {
      if (containsDesired(object, cached)) continue;
      try {
        await deps.applier.apply(object);
        deps.metrics.applies.inc({ kind: object.kind });
        deps.logger.info(
          { config: config.metadata.name, kind: object.kind, name: object.metadata.name },
          "applied",
        );
      } catch (err) {
        // Forbidden and Invalid do not heal by retrying the same request: report them in the status.
        if (isForbidden(err) || isInvalid(err)) {
          deps.metrics.applyErrors.inc({ kind: object.kind });
          return `${object.kind} ${ns}/${object.metadata.name}: ${(err as Error).message}`;
        }
        throw err;
      }
    }
    return undefined;
  }

  /** A config that lost a resource-name conflict must not run: delete its DaemonSet and ConfigMap. */
  private async removeOwned(name: string, objectName: string, ns: string): Promise<void> {
    const { deps } = this;
    const targets: [string, V1DaemonSet | V1ConfigMap | undefined][] = [
      [`/apis/apps/v1/namespaces/${ns}/daemonsets/${objectName}`, deps.daemonSets.get(objectName, ns)],
      [`/api/v1/namespaces/${ns}/configmaps/${objectName}`, deps.configMaps.get(objectName, ns)],
    ];
    for (const [path, cached] of targets) {
      if (!cached || ownerConfigName(cached.metadata) !== name) continue;
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
    this.lastStatusWriteAt.set(name, nowMs);
    this.deps.metrics.statusWrites.inc();
    const rv = (result as KubernetesObject).metadata?.resourceVersion;
    if (rv) this.written.set(name, { resourceVersion: rv, status });
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
