// Wires the operator together: informers over the watched kinds, event → config-key mapping, the work
// queue, leader election (workers run only on the leader), and readiness for probes.
import type { KubeConfig, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DeviceNodeState } from "../api/v1beta1/devicenodestate.js";
import { LABEL_CONFIG, LABEL_MANAGED_BY, configLabelValue } from "../contract/names.js";
import {
  CONFIG_MAPS,
  DAEMON_SETS,
  DEVICE_CLASSES,
  DEVICE_NODE_STATES,
  DEVICE_PLUGIN_CONFIGS,
  EventRecorder,
  LeaderElector,
  NODES,
  PODS,
  RESOURCE_SLICES,
  ServerSideApplier,
  WorkQueue,
  createInformer,
  kubeLeaseStore,
  KubeObjectClient,
  observeKubeRequests,
  runWorkers,
  sleep,
  stripManagedFields,
  systemClock,
  waitForCacheSync,
  servesGroupVersion,
  type Informer,
  type InformerRestartReason,
  type ResourceRef,
} from "../kube/index.js";
import { LABEL_NAME, MANAGED_BY, PLUGIN_APP_NAME } from "./render/names.js";
import type { RenderContext } from "./render/context.js";
import {
  ConfigReconciler,
  INDEX_BY_CONFIG,
  INDEX_BY_DRIVER,
  type StoredConfig,
} from "./controllers/config-reconciler.js";
import type { DeviceClass } from "./controllers/dra.js";
import { slimResourceSliceForCache, type SlimResourceSlice } from "./status/published-devices.js";
import { draDeviceClassName } from "../api/v1beta1/spec.js";
import { nodeChangeMatters, ownerConfigName } from "./controllers/mapping.js";
import { slimNodeForCache, slimPodForCache } from "./controllers/cache-transforms.js";
import { nodeMatchesSelector } from "./status/selection.js";
import { OperatorMetrics } from "./metrics.js";
import { StorageMigrationRunner } from "./migration/runner.js";
import { DEVICE_PLUGIN_CONFIG_CRD_NAME } from "../api/crd.js";

/**
 * How often an operator that found resource.k8s.io/v1 not served asks again: an administrator may turn the
 * group on, and the DRA configs should stop saying ResourceAPIUnavailable without an operator restart.
 * One discovery GET per interval, only on clusters without the group.
 */
export const RESOURCE_API_PROBE_INTERVAL_MS = 20_000;

export interface LeaderElectionOptions {
  enabled: boolean;
  /** Lease name in the operator namespace. */
  id: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  render: RenderContext;
  leaderElection: LeaderElectionOptions;
  concurrency: number;
  logger: Logger;
  statusWriteIntervalMs?: number;
  /** Called when leadership is lost; the process should exit so a restart rejoins cleanly. */
  onLeadershipLost: () => void;
  /**
   * Rewrite configs stored in an older API version and trim the CRD's storedVersions (on the leader).
   * Off for clusters where kube-storage-version-migrator does it. Default on.
   */
  storageMigration?: boolean;
}

/** The stored spec's nodeSelector, read without validating the whole spec (this runs per node event). */
function specNodeSelector(obj: StoredConfig): Record<string, string> {
  const selector = (obj.spec as { nodeSelector?: unknown } | undefined)?.nodeSelector;
  return selector !== null && typeof selector === "object" ? (selector as Record<string, string>) : {};
}

function specResourceName(obj: StoredConfig | undefined): string | undefined {
  const spec = obj?.spec as { resourceName?: unknown } | undefined;
  return typeof spec?.resourceName === "string" ? spec.resourceName : undefined;
}

/** The DeviceClass name a stored spec asks for in DRA mode, read without validating the whole spec. */
function specDeviceClassName(obj: StoredConfig): string | undefined {
  const spec = obj.spec as
    | {
        publish?: unknown;
        resourceName?: unknown;
        dra?: { driverName?: string; deviceClass?: { name?: string; selectors?: [] } };
      }
    | undefined;
  if (spec?.publish !== "DRA" || typeof spec.resourceName !== "string") return undefined;
  return draDeviceClassName({
    resourceName: spec.resourceName,
    dra: {
      ...(spec.dra?.driverName !== undefined ? { driverName: spec.dra.driverName } : {}),
      deviceClass: {
        ...(spec.dra?.deviceClass?.name !== undefined ? { name: spec.dra.deviceClass.name } : {}),
        selectors: [],
      },
    },
  });
}

export class Operator {
  readonly metrics = new OperatorMetrics();
  private readonly queue: WorkQueue;
  private readonly configs: Informer<StoredConfig>;
  private readonly nodes: Informer<V1Node>;
  private readonly pods: Informer<V1Pod>;
  private readonly daemonSets: Informer<V1DaemonSet>;
  private readonly configMaps: Informer<V1ConfigMap>;
  private readonly reports: Informer<DeviceNodeState>;
  /** resource.k8s.io/v1: started only when the API server serves it (Kubernetes 1.34+). */
  private readonly slices: Informer<SlimResourceSlice>;
  private readonly deviceClasses: Informer<DeviceClass & { metadata?: { name?: string } }>;
  private draServed = false;
  /** Waits for resource.k8s.io/v1 to be served, when it was not at start. */
  private draWait: Promise<void> | undefined;
  private readonly reconciler: ConfigReconciler;
  private readonly stopController = new AbortController();
  private synced = false;
  private leading = false;
  private workers: Promise<void> | undefined;
  private elector: LeaderElector | undefined;
  private electorRun: Promise<void> | undefined;
  /** Events of the operator (reconciles, storage migration, the webhook's certificates), correlated. */
  readonly events: EventRecorder;
  private migration: Promise<void> | undefined;

  constructor(private readonly opts: OperatorOptions) {
    const { kubeConfig: kc, logger } = opts;
    const ns = opts.render.namespace;
    observeKubeRequests((method, _path, status) =>
      this.metrics.apiRequests.inc({ verb: method, code: status === 0 ? "none" : String(status) }),
    );
    this.queue = new WorkQueue({ name: "devicepluginconfigs" });
    const informerLog = logger.child({ component: "informer" });
    // managedFields go from every cached kind; Nodes and plugin Pods keep only what the operator reads.
    // DaemonSets and ConfigMaps keep the rest: drift detection (containsDesired) compares them whole with the render.
    this.configs = createInformer<StoredConfig>(kc, {
      resource: DEVICE_PLUGIN_CONFIGS,
      logger: informerLog,
      ...this.informerHooks(DEVICE_PLUGIN_CONFIGS),
      transform: stripManagedFields,
    });
    this.nodes = createInformer<V1Node>(kc, {
      resource: NODES,
      logger: informerLog,
      ...this.informerHooks(NODES),
      transform: slimNodeForCache,
    });
    this.pods = createInformer<V1Pod>(kc, {
      resource: PODS,
      transform: slimPodForCache,
      namespace: ns,
      labelSelector: `${LABEL_NAME}=${PLUGIN_APP_NAME}`,
      logger: informerLog,
      ...this.informerHooks(PODS),
    });
    const ownedSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    this.daemonSets = createInformer<V1DaemonSet>(kc, {
      resource: DAEMON_SETS,
      transform: stripManagedFields,
      namespace: ns,
      labelSelector: ownedSelector,
      logger: informerLog,
      ...this.informerHooks(DAEMON_SETS),
    });
    this.configMaps = createInformer<V1ConfigMap>(kc, {
      resource: CONFIG_MAPS,
      transform: stripManagedFields,
      namespace: ns,
      labelSelector: ownedSelector,
      logger: informerLog,
      ...this.informerHooks(CONFIG_MAPS),
    });
    this.reports = createInformer<DeviceNodeState>(kc, {
      resource: DEVICE_NODE_STATES,
      transform: stripManagedFields,
      namespace: ns,
      logger: informerLog,
      ...this.informerHooks(DEVICE_NODE_STATES),
    });
    // Only what the status, the upgrade gate and the cleanup read of a slice (see SlimResourceSlice).
    this.slices = createInformer<SlimResourceSlice>(kc, {
      resource: RESOURCE_SLICES,
      logger: informerLog,
      ...this.informerHooks(RESOURCE_SLICES),
      transform: slimResourceSliceForCache,
    });
    // Every class, not only the operator's: a namesake it does not own must be seen to be reported.
    this.deviceClasses = createInformer<DeviceClass & { metadata?: { name?: string } }>(kc, {
      resource: DEVICE_CLASSES,
      logger: informerLog,
      ...this.informerHooks(DEVICE_CLASSES),
      transform: stripManagedFields,
    });
    this.slices.addIndex(INDEX_BY_CONFIG, (sl) => {
      const v = sl.metadata.labels?.[LABEL_CONFIG];
      return v ? [v] : [];
    });
    this.slices.addIndex(INDEX_BY_DRIVER, (sl) => (sl.spec.driver ? [sl.spec.driver] : []));
    this.pods.addIndex(INDEX_BY_CONFIG, (p) => {
      const v = p.metadata?.labels?.[LABEL_CONFIG];
      return v ? [v] : [];
    });
    this.reports.addIndex(INDEX_BY_CONFIG, (r) => (r.spec?.configName ? [r.spec.configName] : []));
    const byConfigLabel = (o: { metadata?: { labels?: Record<string, string> } }) => {
      const v = o.metadata?.labels?.[LABEL_CONFIG];
      return v ? [v] : [];
    };
    this.daemonSets.addIndex(INDEX_BY_CONFIG, byConfigLabel);
    this.configMaps.addIndex(INDEX_BY_CONFIG, byConfigLabel);

    this.reconciler = new ConfigReconciler({
      configs: this.configs,
      nodes: this.nodes,
      pods: this.pods,
      daemonSets: this.daemonSets,
      configMaps: this.configMaps,
      reports: this.reports,
      applier: new ServerSideApplier(kc, { fieldManager: MANAGED_BY, force: true }),
      objects: new KubeObjectClient(kc, { fieldManager: MANAGED_BY, propagationPolicy: "Background" }),
      events: (this.events = new EventRecorder(kc, {
        component: MANAGED_BY,
        instance: opts.leaderElection.identity,
        logger,
      })),
      render: opts.render,
      logger,
      metrics: this.metrics,
      statusWriteIntervalMs: opts.statusWriteIntervalMs,
    });
    this.wireEvents();
  }

  /**
   * An informer reached the API server again after failing: configs whose reconcile failed meanwhile
   * are retried now, not after the backoff their failures built up during the outage.
   */
  private retryAfterRecovery(): void {
    const retried = this.queue.retryBackedOff();
    if (retried > 0) this.opts.logger.info({ configs: retried }, "API server reachable again; retrying now");
  }

  /**
   * What every informer of the operator reports: its restarts by cause, counted per resource (API faults
   * show here: 410s and failed lists or watches), and its recovery, which retries failed configs at once.
   */
  private informerHooks(resource: ResourceRef): {
    onRestart: (reason: InformerRestartReason) => void;
    onRecover: () => void;
  } {
    return {
      onRestart: (reason) => this.metrics.watchRestarts.inc({ resource: resource.plural, reason }),
      onRecover: () => this.retryAfterRecovery(),
    };
  }

  /** Caches synced: the replica can take over at once. */
  ready(): boolean {
    return this.synced;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /**
   * Whether the API server serves resource.k8s.io/v1 (DRA is GA in 1.34). Older clusters, and clusters
   * that turned the group off, do not: the operator then runs without its DRA informers rather than
   * waiting forever for them to sync, and DRA configs say so in their status (Stalled,
   * ResourceAPIUnavailable) until it is served. Another error than 404 counts as served: the informers
   * retry like the others do.
   */
  private async probeDra(): Promise<boolean> {
    try {
      return await servesGroupVersion(this.opts.kubeConfig, RESOURCE_SLICES);
    } catch {
      return true;
    }
  }

  /**
   * Asks again every RESOURCE_API_PROBE_INTERVAL_MS until the API server serves resource.k8s.io/v1, then
   * starts the DRA informers, hands them to the reconciler once synced and reconciles every config again,
   * so DRA configs publish and leave ResourceAPIUnavailable without an operator restart.
   */
  private async awaitResourceApi(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(systemClock, RESOURCE_API_PROBE_INTERVAL_MS, signal);
      if (signal.aborted || !(await this.probeDra())) continue;
      // From here stop() stops the DRA informers too, synced or not.
      this.draServed = true;
      this.slices.start();
      this.deviceClasses.start();
      try {
        await waitForCacheSync([this.slices, this.deviceClasses], signal);
      } catch {
        return; // stopped meanwhile
      }
      this.reconciler.useDraInformers(this.slices, this.deviceClasses);
      this.opts.logger.info(
        "resource.k8s.io/v1 is served now: configs with publish DRA get their DeviceClass",
      );
      for (const key of this.configs.keys()) this.queue.add(key);
      return;
    }
  }

  private informers(): Informer<never>[] {
    return [
      this.configs,
      this.nodes,
      this.pods,
      this.daemonSets,
      this.configMaps,
      this.reports,
      ...(this.draServed ? [this.slices, this.deviceClasses] : []),
    ] as unknown as Informer<never>[];
  }

  /** Starts the informers, waits for them, and runs the controller (after winning the election, if enabled). */
  async start(): Promise<void> {
    this.draServed = await this.probeDra();
    if (this.draServed) {
      this.reconciler.useDraInformers(this.slices, this.deviceClasses);
    } else {
      this.opts.logger.warn(
        { intervalMs: RESOURCE_API_PROBE_INTERVAL_MS },
        "resource.k8s.io/v1 is not served: configs with publish DRA are Stalled (ResourceAPIUnavailable) until it is",
      );
      this.draWait = this.awaitResourceApi(this.stopController.signal);
    }
    const informers = this.informers();
    for (const informer of informers) informer.start();
    await waitForCacheSync(informers, this.stopController.signal);
    this.synced = true;
    this.opts.logger.info({ configs: this.configs.size(), nodes: this.nodes.size() }, "caches synced");

    const le = this.opts.leaderElection;
    if (!le.enabled) {
      this.startWorkers();
      return;
    }
    this.elector = new LeaderElector({
      store: kubeLeaseStore(this.opts.kubeConfig, { namespace: this.opts.render.namespace, name: le.id }),
      identity: le.identity,
      leaseDurationMs: le.leaseDurationMs,
      renewDeadlineMs: le.renewDeadlineMs,
      retryPeriodMs: le.retryPeriodMs,
      releaseOnCancel: true,
      logger: this.opts.logger.child({ component: "leader-election" }),
      onStartedLeading: () => this.startWorkers(),
      onStoppedLeading: (reason) => {
        this.leading = false;
        this.metrics.leader.set({}, 0);
        if (reason === "lost") {
          this.opts.logger.error({ lease: le.id }, "leadership lost");
          this.opts.onLeadershipLost();
        }
      },
      onNewLeader: (identity) => this.opts.logger.info({ leader: identity }, "leader observed"),
    });
    this.electorRun = this.elector.run(this.stopController.signal);
  }

  /** Stops workers (letting running reconciles finish), releases the lease, stops informers. */
  async stop(): Promise<void> {
    await this.queue.shutDown();
    await this.workers;
    this.stopController.abort();
    await this.draWait;
    await this.migration;
    await this.electorRun?.catch(() => undefined);
    await Promise.all(this.informers().map((i) => i.stop()));
    observeKubeRequests(undefined);
  }

  private startWorkers(): void {
    if (this.workers) return;
    this.leading = true;
    this.metrics.leader.set({}, 1);
    this.opts.logger.info({ concurrency: this.opts.concurrency }, "started leading; reconciling");
    if (this.opts.storageMigration !== false) {
      this.migration = new StorageMigrationRunner({
        kubeConfig: this.opts.kubeConfig,
        crdName: DEVICE_PLUGIN_CONFIG_CRD_NAME,
        logger: this.opts.logger.child({ component: "storage-migration" }),
        events: this.events,
      }).run(this.stopController.signal);
    }
    for (const key of this.configs.keys()) this.queue.add(key);
    // Slices of configs deleted while no leader ran: their label brings the name back for cleanup.
    if (this.draServed) for (const slice of this.slices.list()) this.enqueueForSlice(slice);
    this.workers = runWorkers(
      this.queue,
      async (key) => {
        const started = performance.now();
        try {
          const result = await this.reconciler.reconcile(key);
          this.metrics.reconciles.inc({ result: result.requeueAfterMs !== undefined ? "requeue" : "ok" });
          return result;
        } catch (err) {
          this.metrics.reconciles.inc({ result: "error" });
          throw err;
        } finally {
          const seconds = (performance.now() - started) / 1000;
          this.metrics.reconcileDuration.observe({}, seconds);
          this.opts.logger.debug({ config: key, ms: Math.round(seconds * 1000) }, "reconciled");
          this.metrics.queueDepth.set({}, this.queue.len());
        }
      },
      { concurrency: this.opts.concurrency, logger: this.opts.logger },
    );
  }

  private enqueue(name: string | undefined): void {
    if (name) this.queue.add(name);
  }

  /**
   * A node change concerns the configs that select the node before or after it (and, for conflicts, the
   * configs sharing their resource name); with many configs, not every node event wakes every config.
   */
  private enqueueForNode(old: V1Node | undefined, cur: V1Node | undefined): void {
    for (const config of this.configs.list()) {
      const selector = specNodeSelector(config);
      if ((old && nodeMatchesSelector(old, selector)) || (cur && nodeMatchesSelector(cur, selector))) {
        this.enqueue(config.metadata?.name);
        this.enqueueSameResource(specResourceName(config));
      }
    }
  }

  /** Configs sharing a resource name decide conflicts together: a change to one concerns them all. */
  private enqueueSameResource(resourceName: string | undefined): void {
    if (!resourceName) return;
    for (const c of this.configs.list()) {
      if (specResourceName(c) === resourceName) this.enqueue(c.metadata?.name);
    }
  }

  private configForLabel(value: string | undefined): string | undefined {
    if (!value) return undefined;
    if (this.configs.get(value) && configLabelValue(value) === value) return value;
    return this.configs.list().find((c) => configLabelValue(c.metadata?.name ?? "") === value)?.metadata
      ?.name;
  }

  /**
   * A slice concerns the config of its label; a label no config has is a deleted config's (for names up to
   * 63 characters the label is the name), whose reconcile deletes the slice.
   */
  private enqueueForSlice(slice: SlimResourceSlice): void {
    const label = slice.metadata.labels?.[LABEL_CONFIG];
    if (!label) return;
    this.enqueue(this.configForLabel(label) ?? label);
  }

  /** A DeviceClass concerns its owner, and the configs that want its name (a namesake came or went). */
  private enqueueForDeviceClass(cls: DeviceClass & { metadata?: { name?: string } }): void {
    this.enqueue(ownerConfigName(cls.metadata));
    const name = cls.metadata?.name;
    for (const c of this.configs.list()) {
      if (name !== undefined && specDeviceClassName(c) === name) this.enqueue(c.metadata?.name);
    }
  }

  private wireEvents(): void {
    this.slices.onAdd((sl) => this.enqueueForSlice(sl));
    this.slices.onUpdate((_old, cur) => this.enqueueForSlice(cur));
    this.slices.onDelete((sl) => this.enqueueForSlice(sl));
    this.deviceClasses.onAdd((c) => this.enqueueForDeviceClass(c));
    this.deviceClasses.onUpdate((_old, cur) => this.enqueueForDeviceClass(cur));
    this.deviceClasses.onDelete((c) => this.enqueueForDeviceClass(c));
    this.configs.onAdd((c) => {
      this.enqueue(c.metadata?.name);
      this.enqueueSameResource(specResourceName(c));
    });
    this.configs.onUpdate((old, cur) => {
      // Our own status writes come back as updates and change nothing; the spec (generation), labels,
      // deletion, or a status someone else wrote do.
      const specChanged = old.metadata?.generation !== cur.metadata?.generation;
      const labelsChanged = JSON.stringify(old.metadata?.labels) !== JSON.stringify(cur.metadata?.labels);
      const foreignStatus =
        JSON.stringify(old.status) !== JSON.stringify(cur.status) &&
        !this.reconciler.isOwnStatus(cur.metadata?.name ?? "", cur.status);
      if (
        !specChanged &&
        !labelsChanged &&
        !foreignStatus &&
        old.metadata?.deletionTimestamp === cur.metadata?.deletionTimestamp
      ) {
        return;
      }
      this.enqueue(cur.metadata?.name);
      this.enqueueSameResource(specResourceName(old));
      this.enqueueSameResource(specResourceName(cur));
    });
    this.configs.onDelete((c) => {
      this.enqueue(c.metadata?.name);
      this.enqueueSameResource(specResourceName(c));
    });
    this.nodes.onAdd((n) => this.enqueueForNode(undefined, n));
    this.nodes.onDelete((n) => this.enqueueForNode(n, undefined));
    this.nodes.onUpdate((old, cur) => {
      if (nodeChangeMatters(old, cur)) this.enqueueForNode(old, cur);
    });
    const byLabel = (p: V1Pod): void => this.enqueue(this.configForLabel(p.metadata?.labels?.[LABEL_CONFIG]));
    this.pods.onAdd(byLabel);
    this.pods.onUpdate((_old, cur) => byLabel(cur));
    this.pods.onDelete(byLabel);
    const byOwner = (o: V1DaemonSet | V1ConfigMap): void => this.enqueue(ownerConfigName(o.metadata));
    this.daemonSets.onAdd(byOwner);
    this.daemonSets.onUpdate((_old, cur) => byOwner(cur));
    this.daemonSets.onDelete(byOwner);
    this.configMaps.onAdd(byOwner);
    this.configMaps.onUpdate((_old, cur) => byOwner(cur));
    this.configMaps.onDelete(byOwner);
    const byReport = (r: DeviceNodeState): void => this.enqueue(r.spec?.configName);
    this.reports.onAdd(byReport);
    this.reports.onUpdate((_old, cur) => byReport(cur));
    this.reports.onDelete(byReport);
  }
}
