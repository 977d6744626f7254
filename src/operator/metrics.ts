// The operator's Prometheus metrics: reconciles, writes it makes, API requests, leadership, and each
// config's status as series (dpo_config_*), so alerts need no kube-state-metrics.
import { PROBLEM_REASONS, STALLED_REASONS, UPGRADE_PHASES } from "../api/v1beta1/status.js";
import { Counter, Gauge, Histogram, Registry } from "../observability/metrics.js";
import type { ConfigSeries } from "./status/config-series.js";

/** How a storage migration run ended (MigrationOutcome's states), and `error` for a check that threw. */
export const STORAGE_MIGRATION_RESULTS = [
  "UpToDate",
  "Migrated",
  "Failed",
  "StoredVersionsChanged",
  "Aborted",
  "error",
] as const;

/** How a reconcile ended: done, done with a retry asked for, or thrown (retried with backoff). */
export const RECONCILE_RESULTS = ["ok", "requeue", "error"] as const;

export class OperatorMetrics {
  /** A registry of its own, never prom-client's global one: two runtimes (or tests) never share series. */
  readonly registry = new Registry();

  readonly reconciles = new Counter({
    name: "dpo_operator_reconciles_total",
    help: "Reconciles of DevicePluginConfigs, by result (ok, requeue, error).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly reconcileDuration = new Histogram({
    name: "dpo_operator_reconcile_duration_seconds",
    help: "Time to reconcile one DevicePluginConfig.",
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly applies = new Counter({
    name: "dpo_operator_applies_total",
    help: "Server-side applies of plugin objects, by kind.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly applyErrors = new Counter({
    name: "dpo_operator_apply_errors_total",
    help: "Applies refused for good (forbidden, invalid), by kind.",
    labelNames: ["kind"] as const,
    registers: [this.registry],
  });
  readonly statusWrites = new Counter({
    name: "dpo_operator_status_writes_total",
    help: "DevicePluginConfig status writes.",
    registers: [this.registry],
  });
  readonly statusWritesDeferred = new Counter({
    name: "dpo_operator_status_writes_deferred_total",
    help: "Status writes postponed to keep at most one per config per interval.",
    registers: [this.registry],
  });
  readonly apiRequests = new Counter({
    name: "dpo_operator_api_requests_total",
    help: "Requests to the API server, by verb (WATCH counts watch starts) and HTTP status code (none: no response).",
    labelNames: ["verb", "code"] as const,
    registers: [this.registry],
  });
  readonly watchRestarts = new Counter({
    name: "dpo_operator_watch_restarts_total",
    help: "Informer list/watch restarts, by resource and reason (expired: 410 Gone, relisted at once; error: a failed list or watch, retried after a backoff, a watch from where it stopped).",
    labelNames: ["resource", "reason"] as const,
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: "dpo_operator_leader",
    help: "1 while this replica leads.",
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: "dpo_operator_queue_depth",
    help: "Keys waiting in the work queue.",
    registers: [this.registry],
  });
  readonly configWriteState = new Gauge({
    name: "dpo_operator_configs_with_unseen_writes",
    help: "Configs whose Node and workload writes the operator's caches have yet to show: the state it keeps per config between passes.",
    registers: [this.registry],
  });

  // The conversion webhook's series (ConversionWebhookMetrics): it runs in the operator's process, whose
  // registry serves them.
  readonly conversionReviews = new Counter({
    name: "dpo_webhook_conversion_reviews_total",
    help: "ConversionReviews answered, by desired version and result (Success, Failure).",
    labelNames: ["to", "result"] as const,
    registers: [this.registry],
  });
  readonly conversionObjects = new Counter({
    name: "dpo_webhook_converted_objects_total",
    help: "Objects in the ConversionReviews answered, by desired version.",
    labelNames: ["to"] as const,
    registers: [this.registry],
  });
  readonly conversionDuration = new Histogram({
    name: "dpo_webhook_conversion_duration_seconds",
    help: "Time to read, convert and answer one ConversionReview.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  /** The webhook's serving certificate: the certificate the process serves, whichever way it came. */
  readonly webhookCertificateExpiry = new Gauge({
    name: "dpo_webhook_certificate_expiry_timestamp_seconds",
    help: "When the conversion webhook's serving certificate expires, in seconds since the Unix epoch; absent until one is served.",
    registers: [this.registry],
  });

  readonly storageMigrations = new Counter({
    name: "dpo_operator_storage_migrations_total",
    help: "Storage version migrations of DevicePluginConfigs run by the leader, by result (UpToDate, Migrated, Failed, StoredVersionsChanged, Aborted, error: the check itself failed).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly orphanedMarksRemoved = new Counter({
    name: "dpo_operator_orphaned_node_marks_removed_total",
    help: "Marks of configs that no longer exist taken off Nodes by the leader, by place (label, annotation: an upgrade record, taint: a Replace fence).",
    labelNames: ["mark"] as const,
    registers: [this.registry],
  });

  // Each config's status (src/operator/status/config-series.ts), set by the leader on every reconcile and
  // removed with the config or when this replica stops leading, so only the leader serves them.
  readonly configReady = new Gauge({
    name: "dpo_config_ready",
    help: "1 while the DevicePluginConfig's Ready condition is True, else 0.",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configStalled = new Gauge({
    name: "dpo_config_stalled",
    help: "1 for the reason of the DevicePluginConfig's Stalled condition while it is True, 0 for the other reasons; all 0 while it is not stalled.",
    labelNames: ["config", "reason"] as const,
    registers: [this.registry],
  });
  readonly configNodesDesired = new Gauge({
    name: "dpo_config_nodes_desired",
    help: "Nodes the config's plugin should run on (status.nodes.desired).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configNodesReady = new Gauge({
    name: "dpo_config_nodes_ready",
    help: "Nodes whose plugin is ready and registered and whose kubelet advertises what it reports (status.nodes.ready).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configNodesAvailable = new Gauge({
    name: "dpo_config_nodes_available",
    help: "Nodes where a plugin of any revision runs, registered and advertised by the kubelet: the nodes serving devices, old revision included during an upgrade (status.nodes.available).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configNodesUpdated = new Gauge({
    name: "dpo_config_nodes_updated",
    help: "Nodes running the plugin revision of the config's current spec (status.nodes.updated).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configDevicesAdvertised = new Gauge({
    name: "dpo_config_devices_advertised",
    help: "Devices the kubelets advertise for the config's resource, summed over its nodes (status.devices.capacity).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configDevicesAllocatable = new Gauge({
    name: "dpo_config_devices_allocatable",
    help: "Devices the kubelets can allocate for the config's resource: advertised and healthy (status.devices.allocatable).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configDevicesUnhealthy = new Gauge({
    name: "dpo_config_devices_unhealthy",
    help: "Devices the config's plugins report unhealthy (status.devices.unhealthy).",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configProblemNodes = new Gauge({
    name: "dpo_config_problem_nodes",
    help: "Nodes of the config with a problem, by reason (status.problems, counted before the list is cut short).",
    labelNames: ["config", "reason"] as const,
    registers: [this.registry],
  });
  readonly admissionRejectedPods = new Gauge({
    name: "dpo_admission_rejected_pods",
    help: "Pods the kubelets of the config's nodes rejected at admission for its resource (UnexpectedAdmissionError, as after a node reboot on the device plugin path) that still exist; the status's AdmissionRejected problems and Events name them.",
    labelNames: ["config"] as const,
    registers: [this.registry],
  });
  readonly configRolloutPhase = new Gauge({
    name: "dpo_config_rollout_phase",
    help: "1 for the phase of the config's plugin rollout (status.upgrade.phase), 0 for the others; all 0 before its first rollout.",
    labelNames: ["config", "phase"] as const,
    registers: [this.registry],
  });

  constructor() {
    // A counter's first increment is invisible to increase() unless the series existed before it.
    for (const result of STORAGE_MIGRATION_RESULTS) this.storageMigrations.inc({ result }, 0);
    for (const result of RECONCILE_RESULTS) this.reconciles.inc({ result }, 0);
  }

  /** Sets every dpo_config_* series of `config` from its status. */
  recordConfig(config: string, series: ConfigSeries): void {
    this.configReady.set({ config }, series.ready ? 1 : 0);
    this.configNodesDesired.set({ config }, series.nodesDesired);
    this.configNodesReady.set({ config }, series.nodesReady);
    this.configNodesAvailable.set({ config }, series.nodesAvailable);
    this.configNodesUpdated.set({ config }, series.nodesUpdated);
    this.configDevicesAdvertised.set({ config }, series.devicesAdvertised);
    this.configDevicesAllocatable.set({ config }, series.devicesAllocatable);
    this.configDevicesUnhealthy.set({ config }, series.devicesUnhealthy);
    this.admissionRejectedPods.set({ config }, series.admissionRejectedPods ?? 0);
    for (const reason of STALLED_REASONS) {
      this.configStalled.set({ config, reason }, series.stalledReason === reason ? 1 : 0);
    }
    for (const reason of PROBLEM_REASONS) {
      this.configProblemNodes.set({ config, reason }, series.problemNodes[reason] ?? 0);
    }
    for (const phase of UPGRADE_PHASES) {
      this.configRolloutPhase.set({ config, phase }, series.rolloutPhase === phase ? 1 : 0);
    }
  }

  /** The dpo_config_* gauges labelled by config alone. */
  private configGauges(): Gauge<"config">[] {
    return [
      this.configReady,
      this.configNodesDesired,
      this.configNodesReady,
      this.configNodesAvailable,
      this.configNodesUpdated,
      this.configDevicesAdvertised,
      this.configDevicesAllocatable,
      this.configDevicesUnhealthy,
      this.admissionRejectedPods,
    ];
  }

  /** Removes every dpo_config_* series of `config` (deleted, or no longer this replica's to report). */
  forgetConfig(config: string): void {
    for (const gauge of this.configGauges()) gauge.remove({ config });
    for (const reason of STALLED_REASONS) this.configStalled.remove({ config, reason });
    for (const reason of PROBLEM_REASONS) this.configProblemNodes.remove({ config, reason });
    for (const phase of UPGRADE_PHASES) this.configRolloutPhase.remove({ config, phase });
  }

  /** Removes the dpo_config_* series of every config, when this replica stops leading. */
  forgetAllConfigs(): void {
    for (const gauge of this.configGauges()) gauge.reset();
    this.configStalled.reset();
    this.configProblemNodes.reset();
    this.configRolloutPhase.reset();
  }

  /** The Prometheus text exposition of every metric above, as served on /metrics. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
