// Wires the operator together: informers over the watched kinds, event → config-key mapping, the work
// queue, leader election (workers run only on the leader, and write only behind its fence), and readiness
// for probes.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import {
  EventRecorder,
  KubeObjectClient,
  LeaderElector,
  RESOURCE_SLICES,
  ServerSideApplier,
  UNFENCED,
  WorkQueue,
  kubeLeaseStore,
  observeKubeRequests,
  runWorkers,
  servesGroupVersion,
  sleep,
  systemClock,
  waitForCacheSync,
  type Informer,
  type WriteFence,
} from "../kube/index.js";
import { MANAGED_BY } from "./model/names.js";
import type { RenderContext } from "./render/context.js";
import { ConfigReconciler } from "./controllers/config-reconciler.js";
import { configsToReconcileAtStart } from "./controllers/rediscovery.js";
import { wireConfigEvents } from "./event-wiring.js";
import { createOperatorInformers, type OperatorInformers } from "./informers.js";
import { OperatorMetrics } from "./metrics.js";
import { StorageMigrationRunner } from "./migration/runner.js";
import { probeOnce, probeUntilAnswered } from "./extended-resource-probe.js";
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
  /** How long a Replace fence is on before the old plugin stops (default FENCE_SETTLE_MS). */
  fenceSettleMs?: number;
  /**
   * Called when leadership is lost (the lease could not be renewed within the renew deadline); the
   * process should exit so a restart rejoins cleanly. By then the fence has closed: every write of the
   * workers is refused (NotLeaderError) and their requests in flight are cancelled.
   */
  onLeadershipLost: () => void;
  /**
   * Rewrite configs stored in an older API version and trim the CRD's storedVersions (on the leader).
   * Off for clusters where kube-storage-version-migrator does it. Default on.
   */
  storageMigration?: boolean;
}

export class Operator {
  readonly metrics = new OperatorMetrics();
  private readonly queue: WorkQueue;
  private readonly informers: OperatorInformers;
  private draServed = false;
  /** Waits for resource.k8s.io/v1 to be served, when it was not at start. */
  private draWait: Promise<void> | undefined;
  /** Asks again whether DeviceClass spec.extendedResourceName is kept, after a probe failed. */
  private fieldProbe: Promise<void> | undefined;
  private readonly reconciler: ConfigReconciler;
  private readonly stopController = new AbortController();
  private synced = false;
  private leading = false;
  private workers: Promise<void> | undefined;
  private readonly elector: LeaderElector | undefined;
  /**
   * What every write of the workers (reconciles, their Events, the storage migration) passes just before
   * it is sent: with leader election, open only while this replica holds the lease within its renew
   * deadline (src/kube/fence.ts).
   */
  private readonly fence: WriteFence;
  private electorRun: Promise<void> | undefined;
  /**
   * Events of the webhook's certificates, which a replica may write without leading (a first certificate
   * cannot wait for an election). The workers' Events go through workerEvents, behind the fence.
   */
  readonly events: EventRecorder;
  private readonly workerEvents: EventRecorder;
  private migration: Promise<void> | undefined;

  constructor(private readonly opts: OperatorOptions) {
    const { kubeConfig: kc, logger } = opts;
    observeKubeRequests((method, _path, status) =>
      this.metrics.apiRequests.inc({ verb: method, code: status === 0 ? "none" : String(status) }),
    );
    this.queue = new WorkQueue({ name: "devicepluginconfigs" });
    this.informers = createOperatorInformers(
      kc,
      opts.render.namespace,
      logger.child({ component: "informer" }),
      {
        // Restarts by cause, counted per resource (API faults show here: 410s and failed lists or
        // watches), and recovery, which retries failed configs at once.
        onRestart: (resource, reason) =>
          this.metrics.watchRestarts.inc({ resource: resource.plural, reason }),
        onRecover: () => this.retryAfterRecovery(),
      },
    );
    this.elector = opts.leaderElection.enabled ? this.newElector() : undefined;
    this.fence = this.elector?.fence ?? UNFENCED;
    const recorder = { component: MANAGED_BY, instance: opts.leaderElection.identity, logger };
    this.events = new EventRecorder(kc, recorder);
    this.workerEvents = new EventRecorder(kc, { ...recorder, fence: this.fence });
    const { configs, nodes, pods, failedPods, daemonSets, configMaps, reports } = this.informers;
    const applier = new ServerSideApplier(kc, { fieldManager: MANAGED_BY, force: true, fence: this.fence });
    this.reconciler = new ConfigReconciler({
      configs,
      nodes,
      pods,
      failedPods,
      daemonSets,
      configMaps,
      reports,
      applier,
      // Each config's labels under its own field manager, never forced over another labeller's (ADR 0011).
      nodeLabels: ({ node, fieldManager, labels }) =>
        applier.apply(
          {
            apiVersion: "v1",
            kind: "Node",
            metadata: { name: node, ...(Object.keys(labels).length > 0 ? { labels } : {}) },
          },
          { fieldManager, force: false },
        ),
      objects: new KubeObjectClient(kc, {
        fieldManager: MANAGED_BY,
        propagationPolicy: "Background",
        fence: this.fence,
      }),
      events: this.workerEvents,
      render: opts.render,
      logger,
      metrics: this.metrics,
      statusWriteIntervalMs: opts.statusWriteIntervalMs,
      fenceSettleMs: opts.fenceSettleMs,
    });
    wireConfigEvents(
      this.informers,
      (name) => {
        if (name) this.queue.add(name);
      },
      (name, status) => this.reconciler.isOwnStatus(name, status),
    );
  }

  /**
   * An informer reached the API server again after failing: configs whose reconcile failed meanwhile
   * are retried now, not after the backoff their failures built up during the outage.
   */
  private retryAfterRecovery(): void {
    const retried = this.queue.retryBackedOff();
    if (retried > 0) this.opts.logger.info({ configs: retried }, "API server reachable again; retrying now");
  }

  /** Caches synced: the replica can take over at once. */
  ready(): boolean {
    return this.synced;
  }

  /** Leading, and (with leader election) within the renew deadline: the workers may write now. */
  isLeader(): boolean {
    return this.leading && (this.elector?.isLeader() ?? true);
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
   * Whether the API server keeps DeviceClass spec.extendedResourceName (a server-side dry run, see
   * extended-resource-probe.ts), asked once resource.k8s.io/v1 is served and before configs are
   * reconciled with the answer. A failed probe is asked again every RESOURCE_API_PROBE_INTERVAL_MS in the
   * background (configs say ExtendedResourceSupportUnknown meanwhile), and every config is reconciled
   * again once it answers. The dry run stores nothing, so it needs no leadership.
   */
  private async probeExtendedResourceName(): Promise<void> {
    const opts = {
      // Unfenced: a dry run writes nothing, and the answer is wanted before this replica leads.
      objects: new KubeObjectClient(this.opts.kubeConfig, { fieldManager: MANAGED_BY }),
      logger: this.opts.logger,
    };
    const kept = await probeOnce(opts);
    if (kept !== undefined) {
      this.reconciler.useExtendedResourceNameKept(kept);
      return;
    }
    this.fieldProbe = probeUntilAnswered({
      ...opts,
      retryMs: RESOURCE_API_PROBE_INTERVAL_MS,
      signal: this.stopController.signal,
    }).then((answer) => {
      if (answer === undefined) return;
      this.reconciler.useExtendedResourceNameKept(answer);
      for (const key of this.informers.configs.keys()) this.queue.add(key);
    });
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
      this.informers.slices.start();
      this.informers.deviceClasses.start();
      try {
        await waitForCacheSync([this.informers.slices, this.informers.deviceClasses], signal);
      } catch {
        return; // stopped meanwhile
      }
      await this.probeExtendedResourceName();
      this.reconciler.useDraInformers(this.informers.slices, this.informers.deviceClasses);
      this.opts.logger.info(
        "resource.k8s.io/v1 is served now: configs with publish DRA get their DeviceClass",
      );
      for (const key of this.informers.configs.keys()) this.queue.add(key);
      return;
    }
  }

  private runningInformers(): Informer<never>[] {
    return [
      this.informers.configs,
      this.informers.nodes,
      this.informers.pods,
      this.informers.failedPods,
      this.informers.daemonSets,
      this.informers.configMaps,
      this.informers.reports,
      ...(this.draServed ? [this.informers.slices, this.informers.deviceClasses] : []),
    ] as unknown as Informer<never>[];
  }

  /** Starts the informers, waits for them, and runs the controller (after winning the election, if enabled). */
  async start(): Promise<void> {
    this.draServed = await this.probeDra();
    if (this.draServed) {
      await this.probeExtendedResourceName();
      this.reconciler.useDraInformers(this.informers.slices, this.informers.deviceClasses);
    } else {
      this.opts.logger.warn(
        { intervalMs: RESOURCE_API_PROBE_INTERVAL_MS },
        "resource.k8s.io/v1 is not served: configs with publish DRA are Stalled (ResourceAPIUnavailable) until it is",
      );
      this.draWait = this.awaitResourceApi(this.stopController.signal);
    }
    const informers = this.runningInformers();
    for (const informer of informers) informer.start();
    await waitForCacheSync(informers, this.stopController.signal);
    this.synced = true;
    this.opts.logger.info(
      { configs: this.informers.configs.size(), nodes: this.informers.nodes.size() },
      "caches synced",
    );

    if (this.elector === undefined) {
      this.startWorkers();
      return;
    }
    this.electorRun = this.elector.run(this.stopController.signal);
  }

  private newElector(): LeaderElector {
    const le = this.opts.leaderElection;
    return new LeaderElector({
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
        // The new leader reports the configs; stale copies here would be summed or compared with its.
        this.metrics.forgetAllConfigs();
        if (reason === "lost") {
          this.opts.logger.error({ lease: le.id }, "leadership lost");
          this.opts.onLeadershipLost();
        }
      },
      onNewLeader: (identity) => this.opts.logger.info({ leader: identity }, "leader observed"),
    });
  }

  /** Stops workers (letting running reconciles finish), releases the lease, stops informers. */
  async stop(): Promise<void> {
    await this.queue.shutDown();
    await this.workers;
    this.stopController.abort();
    await this.draWait;
    await this.fieldProbe;
    await this.migration;
    await this.electorRun?.catch(() => undefined);
    await Promise.all(this.runningInformers().map((i) => i.stop()));
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
        events: this.workerEvents,
        fence: this.fence,
        onResult: (result) => this.metrics.storageMigrations.inc({ result }),
      }).run(AbortSignal.any([this.stopController.signal, this.fence.signal]));
    }
    // Every config, and every config name something dpo left carries (a config deleted while no leader
    // ran: a Replace fence, a record, a slice), whose reconcile takes it off (ADR 0009).
    const { configs, nodes, pods, daemonSets, configMaps, reports, slices } = this.informers;
    const left = {
      nodes: nodes.list(),
      owned: [...daemonSets.list(), ...configMaps.list(), ...pods.list()],
      reports: reports.list(),
      ...(this.draServed ? { slices: slices.list() } : {}),
    };
    for (const name of configsToReconcileAtStart(configs, left)) this.queue.add(name);
    this.workers = runWorkers(
      this.queue,
      async (key, signal) => {
        const started = performance.now();
        try {
          const result = await this.reconciler.reconcile(key, AbortSignal.any([signal, this.fence.signal]));
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
}
