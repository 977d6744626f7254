// Wires the operator together: informers over the watched kinds, event → config-key mapping, the work
// queue, leader election (workers run only on the leader), and readiness for probes.
import type { KubeConfig, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DeviceNodeState } from "../api/v1beta1/devicenodestate.js";
import {
  CONFIG_MAPS,
  DAEMON_SETS,
  DEVICE_NODE_STATES,
  DEVICE_PLUGIN_CONFIGS,
  EventRecorder,
  LeaderElector,
  NODES,
  PODS,
  ServerSideApplier,
  WorkQueue,
  createInformer,
  kubeLeaseStore,
  kubeRequest,
  observeKubeRequests,
  runWorkers,
  stripManagedFields,
  waitForCacheSync,
  type Informer,
} from "../kube/index.js";
import {
  LABEL_CONFIG,
  LABEL_MANAGED_BY,
  LABEL_NAME,
  MANAGED_BY,
  PLUGIN_APP_NAME,
  configLabelValue,
} from "./render/names.js";
import type { RenderContext } from "./render/context.js";
import { ConfigReconciler, INDEX_BY_CONFIG, type StoredConfig } from "./controllers/config-reconciler.js";
import { nodeChangeMatters, ownerConfigName } from "./controllers/mapping.js";
import { slimNodeForCache } from "./controllers/cache-transforms.js";
import { nodeMatchesSelector } from "./status/selection.js";
import { OperatorMetrics } from "./metrics.js";
import { StorageMigrationRunner } from "./migration/runner.js";
import { DEVICE_PLUGIN_CONFIG_CRD_NAME } from "../api/crd.js";

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

export class Operator {
  readonly metrics = new OperatorMetrics();
  private readonly queue: WorkQueue;
  private readonly configs: Informer<StoredConfig>;
  private readonly nodes: Informer<V1Node>;
  private readonly pods: Informer<V1Pod>;
  private readonly daemonSets: Informer<V1DaemonSet>;
  private readonly configMaps: Informer<V1ConfigMap>;
  private readonly reports: Informer<DeviceNodeState>;
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
    observeKubeRequests((method) => this.metrics.apiRequests.inc({ verb: method }));
    this.queue = new WorkQueue({ name: "devicepluginconfigs" });
    const informerLog = logger.child({ component: "informer" });
    // managedFields go from every cached kind; Nodes keep only what the operator reads. DaemonSets and
    // ConfigMaps keep the rest: drift detection (containsDesired) compares them whole with the render.
    this.configs = createInformer<StoredConfig>(kc, {
      resource: DEVICE_PLUGIN_CONFIGS,
      logger: informerLog,
      transform: stripManagedFields,
    });
    this.nodes = createInformer<V1Node>(kc, {
      resource: NODES,
      logger: informerLog,
      transform: slimNodeForCache,
    });
    this.pods = createInformer<V1Pod>(kc, {
      resource: PODS,
      transform: stripManagedFields,
      namespace: ns,
      labelSelector: `${LABEL_NAME}=${PLUGIN_APP_NAME}`,
      logger: informerLog,
    });
    const ownedSelector = `${LABEL_MANAGED_BY}=${MANAGED_BY}`;
    this.daemonSets = createInformer<V1DaemonSet>(kc, {
      resource: DAEMON_SETS,
      transform: stripManagedFields,
      namespace: ns,
      labelSelector: ownedSelector,
      logger: informerLog,
    });
    this.configMaps = createInformer<V1ConfigMap>(kc, {
      resource: CONFIG_MAPS,
      transform: stripManagedFields,
      namespace: ns,
      labelSelector: ownedSelector,
      logger: informerLog,
    });
    this.reports = createInformer<DeviceNodeState>(kc, {
      resource: DEVICE_NODE_STATES,
      transform: stripManagedFields,
      namespace: ns,
      logger: informerLog,
    });
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
      deleteObject: (path, preconditions) =>
        kubeRequest(kc, {
          method: "DELETE",
          path,
          query: { propagationPolicy: "Background" },
          ...(preconditions === undefined
            ? {}
            : { body: { apiVersion: "v1", kind: "DeleteOptions", preconditions } }),
        }).then(() => undefined),
      createObject: (path, body) =>
        kubeRequest(kc, { method: "POST", path, query: { fieldManager: MANAGED_BY }, body }).then(
          () => undefined,
        ),
      updateObject: (path, body) =>
        kubeRequest(kc, { method: "PUT", path, query: { fieldManager: MANAGED_BY }, body }).then(
          () => undefined,
        ),
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

  /** Caches synced: the replica can take over at once. */
  ready(): boolean {
    return this.synced;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Starts the informers, waits for them, and runs the controller (after winning the election, if enabled). */
  async start(): Promise<void> {
    const informers = [this.configs, this.nodes, this.pods, this.daemonSets, this.configMaps, this.reports];
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
    await this.migration;
    await this.electorRun?.catch(() => undefined);
    await Promise.all(
      [this.configs, this.nodes, this.pods, this.daemonSets, this.configMaps, this.reports].map((i) =>
        i.stop(),
      ),
    );
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

  private wireEvents(): void {
    this.configs.onAdd((c) => {
      this.enqueue(c.metadata?.name);
      this.enqueueSameResource(specResourceName(c));
    });
    this.configs.onUpdate((old, cur) => {
      // Our own status writes come back as updates; only spec (generation) or metadata changes matter.
      const specChanged = old.metadata?.generation !== cur.metadata?.generation;
      const labelsChanged = JSON.stringify(old.metadata?.labels) !== JSON.stringify(cur.metadata?.labels);
      if (
        !specChanged &&
        !labelsChanged &&
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
