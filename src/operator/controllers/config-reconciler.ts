// The DevicePluginConfig reconciler: one config name in, its objects brought to what the spec asks and its
// status written when it changed. Reads only informer caches; each step of a pass is in steps/.
import type { V1Node } from "@kubernetes/client-node";
import { validateDevicePluginConfig } from "../../api/validate.js";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../api/v1beta1/config.js";
import type { Informer, ReconcileResult } from "../../kube/index.js";
import { configLabelValue } from "../../contract/names.js";
import { renderRevision } from "../render/index.js";
import { revisionObjectName } from "../model/names.js";
import { pluginRunsOnNode } from "../model/targeting.js";
import { withDefaultTolerations } from "../render/pod-defaults.js";
import { effectivePluginPolicy, pluginPolicyRefusals, type PolicyRefusal } from "../render/plugin-policy.js";
import { transitionEvents } from "../status/transition-events.js";
import { INDEX_BY_RESOURCE, rejectedPodsByNode } from "../status/admission-rejections.js";
import { SelfHealEvents } from "../status/self-heals.js";
import { revisionOfDaemonSet } from "../upgrade/daemonset-state.js";
import {
  aggregateStatus,
  cdiKindConflict,
  cdiSpecKindOf,
  configSeries,
  invalidSpecStatus,
  resolveResourceNames,
  sharedAllocationsKept,
  type InvalidConfig,
  type Resolution,
  type SlimResourceSlice,
} from "../status/index.js";
import { extendedResourceMapping, extendedResourceNameChoice } from "../status/extended-resource.js";
import { RecordClock } from "../upgrade/record-clock.js";
import {
  INDEX_BY_CONFIG,
  soonest,
  soonerRetry,
  type CachedDeviceClass,
  type ConfigReconcilerDeps,
  type StepDeps,
  type StoredConfig,
} from "./reconciler-deps.js";
import { ownedDaemonSets } from "./owned-objects.js";
import { deleteReportsOfGoneConfig, deleteStaleReports } from "./steps/delete-stale-reports.js";
import { cleanupWritesPending, stripNodeLabels } from "./steps/node-label-cleanup.js";
import { removeOrphanedMarks } from "./steps/orphaned-marks.js";
import { labelServedNodes, labelWritesPending, unlabelConfig } from "./steps/device-labels.js";
import { deleteSlices, reconcileDraObjects, resourceApiServed } from "./steps/dra-objects.js";
import {
  applyPluginWorkloads,
  forgetRolloutWrites,
  rolloutWritesPending,
  removePluginWorkloads,
  type WorkloadOutcome,
} from "./steps/plugin-workloads.js";
import { giveIncumbentsBack } from "./steps/takeover.js";
import { StatusWrites } from "./steps/status-writes.js";

export {
  INDEX_BY_CONFIG,
  INDEX_BY_DRIVER,
  type ConfigReconcilerDeps,
  type StoredConfig,
} from "./reconciler-deps.js";

export class ConfigReconciler {
  private readonly deps: StepDeps;
  private readonly statusWrites: StatusWrites;
  /** Mirrors the plugins' self-heals as Events on the config (status/self-heals.ts). */
  private readonly selfHeals = new SelfHealEvents();

  constructor(deps: ConfigReconcilerDeps) {
    this.deps = {
      ...deps,
      now: deps.now ?? (() => new Date()),
      recordClock: deps.recordClock ?? new RecordClock(),
    };
    this.statusWrites = new StatusWrites(this.deps, deps.statusWriteIntervalMs ?? 500);
  }

  /** The DRA informers, once the operator knows the API server serves resource.k8s.io/v1. */
  useDraInformers(slices: Informer<SlimResourceSlice>, deviceClasses: Informer<CachedDeviceClass>): void {
    this.deps.slices = slices;
    this.deps.deviceClasses = deviceClasses;
  }

  /** What the dry-run probe found: whether the API server keeps DeviceClass spec.extendedResourceName. */
  useExtendedResourceNameKept(kept: boolean): void {
    this.deps.extendedResourceNameKept = kept;
  }

  /**
   * Whether `status` is the one this replica wrote last for the config: its own writes come back as
   * updates and need no reconcile; any other status change (another writer, an older replica, a user's
   * `kubectl edit --subresource=status`) does, so the truth is put back.
   */
  isOwnStatus(name: string, status: unknown): boolean {
    return this.statusWrites.isOwn(name, status);
  }

  /**
   * `signal` aborts when this replica may no longer write (leadership lost) or the queue shuts down: the
   * reconcile stops between its steps, and the writers' own fence cancels the request in flight.
   */
  async reconcile(name: string, signal?: AbortSignal): Promise<ReconcileResult> {
    try {
      return await this.reconcileConfig(name, signal);
    } finally {
      // What the operator keeps per config between passes, for its bound to be watched (and tested) from outside.
      this.deps.metrics.configWriteState.set(
        cleanupWritesPending(this.deps) + rolloutWritesPending(this.deps) + labelWritesPending(this.deps),
      );
    }
  }

  private async reconcileConfig(name: string, signal?: AbortSignal): Promise<ReconcileResult> {
    const { deps } = this;
    signal?.throwIfAborted();
    const stored = deps.configs.get(name);
    if (!stored) {
      // Garbage collection removes what the config owned (its DeviceClass too); its ResourceSlices carry
      // no owner reference (the plugins write them), so they are deleted here. No finalizer: it would
      // leave configs undeletable while the operator is down or uninstalled; a slice whose config is
      // gone brings its label's name back to this queue (manager.ts), so the sweep also happens after a
      // restart that missed the delete.
      this.statusWrites.forget(name);
      this.selfHeals.forget(name);
      deps.metrics.forgetConfig(name);
      forgetRolloutWrites(deps, name);
      const slicesRetry = await deleteSlices(deps, name, undefined);
      // An incumbent it took over gets its fields back: its pods return to the nodes dpo's plugin served.
      const incumbentsRetry = await giveIncumbentsBack(deps, name);
      const reportsRetry = await deleteReportsOfGoneConfig(deps, name);
      // Only the Nodes that carry something of the config: a name that never was a config (a report's
      // configName) must not cost a visit of every Node.
      return soonest(
        soonest(
          soonest(soonest(soonest({}, slicesRetry), reportsRetry), incumbentsRetry),
          await unlabelConfig(deps, name),
        ),
        await removeOrphanedMarks(deps, name),
      );
    }
    if (stored.metadata?.deletionTimestamp) {
      // Being deleted (foreground cascade): re-applying the DaemonSet would fight the garbage collector.
      return {};
    }
    const parsed = validateDevicePluginConfig(stored);
    if (!parsed.ok) {
      const message = parsed.errors.map((e) => `${e.path}: ${e.message}`).join("; ");
      deps.logger.warn({ config: name, err: message }, "stored config does not validate; not applying it");
      const status = invalidSpecStatus(stored, message, deps.now());
      deps.metrics.recordConfig(name, configSeries(status));
      return this.statusWrites.write(stored, status, []);
    }
    // With the default tolerations in its spec: which nodes its plugin runs on follows its pods' tolerations.
    const config = withDefaultTolerations(parsed.value, deps.render.pluginPodDefaults);
    const refusals = pluginPolicyRefusals(config.spec, effectivePluginPolicy(deps.render));
    if (refusals.length > 0) return this.refuse(stored, name, refusals);
    const nodes = deps.nodes.list();
    const resolution = this.resolveResourceName(config, nodes);
    const { conflictWith, targeting } = resolution;

    const extendedResource = {
      resourceApiServed: resourceApiServed(deps),
      fieldKept: deps.extendedResourceNameKept,
    };
    const mapping = extendedResourceMapping({
      resourceName: config.spec.resourceName,
      publish: config.spec.publish,
      choice: extendedResourceNameChoice(config.spec),
      ...extendedResource,
    });
    const dra = await reconcileDraObjects(deps, config, conflictWith === undefined, mapping.name);
    signal?.throwIfAborted();
    // The current spec as one revision, rendered once for the pass: its DaemonSets' node affinity carries
    // the terms decided among the configs of the resource name. The rollout and the status read it.
    const desired = renderRevision(
      config,
      targeting === undefined ? deps.render : { ...deps.render, targeting },
    );
    let workloads: WorkloadOutcome | undefined;
    if (conflictWith !== undefined) await removePluginWorkloads(deps, name);
    else
      workloads = await applyPluginWorkloads(deps, config, desired, nodes, {
        publishedDevices: dra.publishedDevices,
        targeting,
        sliceDevices: dra.sliceDevices,
        mapping: { switchToDraMayStart: mapping.switchToDraMayStart, ...mapping.condition },
      });
    // Nodes the plugin does not run on (any more) keep none of its labels.
    const serves = (n: V1Node) => conflictWith === undefined && pluginRunsOnNode(n, config.spec, targeting);
    const labelsRetry = await stripNodeLabels(deps, name, serves);
    signal?.throwIfAborted();
    const staleRetryMs = await deleteStaleReports(deps, config, targeting);
    signal?.throwIfAborted();

    const decision = workloads?.decision;
    const previous = this.statusWrites.previous(name, stored);
    const reports = deps.reports.byIndex(INDEX_BY_CONFIG, name);
    const { status, events, problemCounts, admissionRejectedPods } = aggregateStatus({
      config,
      nodes,
      pods: deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name)),
      reports,
      daemonSet:
        decision === undefined
          ? undefined
          : ownedDaemonSets(deps, name).find((ds) => revisionOfDaemonSet(ds) === decision.revision),
      daemonSetName: decision === undefined ? undefined : revisionObjectName(name, decision.revision),
      configHash: desired.configHash,
      upgrade: decision?.status,
      upgradeProblems: decision?.problems,
      admissionRejections: rejectedPodsByNode(
        deps.failedPods?.byIndex(INDEX_BY_RESOURCE, config.spec.resourceName) ?? [],
        config.spec.resourceName,
      ),
      upgradeModes: decision?.modes,
      resourceApiServed: config.spec.publish === "DRA" ? extendedResource.resourceApiServed : undefined,
      extendedResource,
      sharedAllocationsKept: sharedAllocationsOf(deps, config),
      conflictWith,
      resolution,
      applyError: workloads?.applyError,
      takeover: workloads?.takeover,
      deviceTruth: dra.truth,
      deviceClassConflict: dra.deviceClassConflict,
      previous,
      now: deps.now(),
    });
    // Before the write: a deferred or failed write still leaves the metrics at what the status says now.
    deps.metrics.recordConfig(name, configSeries(status, problemCounts, admissionRejectedPods));
    // At once, not with the status write: a heal may leave the status as it was, and a write may wait.
    for (const e of this.selfHeals.events(name, reports, deps.now().getTime())) {
      const involved = { apiVersion: API_VERSION, kind: KIND, metadata: { name, uid: stored.metadata?.uid } };
      void deps.events.record(involved, e.type, e.reason, e.message);
    }
    const written = await this.statusWrites.write(stored, status, events, previous);
    // After the status: a batch of Node applies must not delay what the status says (ADR 0011).
    signal?.throwIfAborted();
    const deviceLabelsRetry = await labelServedNodes(deps, config, serves);
    return soonest(
      soonest(soonest(soonest(written, staleRetryMs), workloads?.retryMs), dra.retryMs),
      soonerRetry(labelsRetry, deviceLabelsRetry),
    );
  }

  /**
   * A config the operator's plugin policy refuses gets no workloads (its plugin pods would run what the
   * admin did not allow, as root on its nodes) and a status and Warning Event naming each refused field.
   */
  private async refuse(
    stored: StoredConfig,
    name: string,
    refusals: readonly PolicyRefusal[],
  ): Promise<ReconcileResult> {
    const { deps } = this;
    const message = refusals.map((r) => `${r.field}: ${r.message}`).join("; ");
    deps.logger.warn({ config: name, err: message }, "config refused by the plugin policy; not applying it");
    await removePluginWorkloads(deps, name);
    const labelsRetry = soonerRetry(
      await stripNodeLabels(deps, name, () => false),
      await unlabelConfig(deps, name),
    );
    const previous = this.statusWrites.previous(name, stored);
    const status = invalidSpecStatus(stored, message, deps.now(), "RefusedByPolicy");
    const events = transitionEvents(previous, status.conditions ?? [], [], false);
    deps.metrics.recordConfig(name, configSeries(status));
    return soonest(await this.statusWrites.write(stored, status, events, previous), labelsRetry);
  }

  /**
   * How this config shares its resource name (the config it yields to, if any; the nodes it steps back
   * from for higher priorities). Decided among every stored config of this resource name, valid or not:
   * only those are validated (the stored spec's resourceName read as is first), and nodes are read only
   * if two of equal priority may overlap. An older config whose stored spec does not validate keeps its
   * plugins running, so it holds the name against this one (status/conflicts.ts).
   */
  private resolveResourceName(config: DevicePluginConfig, nodes: readonly V1Node[]): Resolution {
    const name = config.metadata.name;
    const valid: DevicePluginConfig[] = [config];
    const invalid: InvalidConfig[] = [];
    for (const other of this.deps.configs.list()) {
      const otherName = other.metadata?.name;
      if (otherName === undefined || otherName === name) continue;
      if ((other.spec as { resourceName?: unknown } | undefined)?.resourceName !== config.spec.resourceName)
        continue;
      const r = validateDevicePluginConfig(other);
      if (!r.ok) {
        invalid.push({
          metadata: { name: otherName, creationTimestamp: other.metadata?.creationTimestamp },
          spec: other.spec,
        });
      } else if (
        r.value.spec.resourceName === config.spec.resourceName &&
        // A config the plugin policy refuses has no plugin anywhere: nothing to step back for.
        pluginPolicyRefusals(r.value.spec, effectivePluginPolicy(this.deps.render)).length === 0
      )
        valid.push(r.value);
    }
    const resolution = resolveResourceNames(valid, nodes, invalid).get(name)!;
    if (resolution.conflictWith !== undefined || cdiSpecKindOf(config.spec) === undefined) return resolution;
    // Configs of other resource names only matter if they write a CDI spec too: only those are validated.
    const writers = this.deps.configs
      .list()
      .filter((other) => other.metadata?.name !== name && (other.spec as { cdi?: unknown } | undefined)?.cdi)
      .map((other) => validateDevicePluginConfig(other))
      .flatMap((r) => (r.ok ? [r.value] : []));
    return { ...resolution, ...cdiKindConflict(config, writers) };
  }
}

/**
 * What the config's stored slices show of allowMultipleAllocations (dra-sharing.ts), for a time-sliced
 * DRA config whose slice cache is complete; undefined otherwise.
 */
function sharedAllocationsOf(deps: StepDeps, config: DevicePluginConfig): boolean | undefined {
  const slices = deps.slices;
  if (config.spec.publish !== "DRA" || config.spec.sharing.strategy !== "TimeSlicing") return undefined;
  if (slices === undefined || !slices.hasSynced()) return undefined;
  return sharedAllocationsKept(slices.byIndex(INDEX_BY_CONFIG, configLabelValue(config.metadata.name)));
}
