// The plugin runtime's Prometheus metrics: devices by health, each device with the pod holding it,
// allocations, Allocate and DRA prepare/unprepare latency, registrations, kubelet restarts seen,
// PodResources reads and node-report writes.
import type { MetricValue } from "prom-client";
import { Counter, Gauge, Histogram, Registry } from "../observability/metrics.js";
import type { Health } from "./devices/types.js";
import type { DeviceSeries } from "./podresources/allocations.js";

const DEVICE_LABELS = ["resource", "device", "namespace", "pod", "container"] as const;
type DeviceLabel = (typeof DEVICE_LABELS)[number];

/**
 * A gauge with one series per row of the last recordDeviceSeries, made from the rows when scraped. Nothing
 * is kept per series in between but the rows: prom-client's Gauge keeps a label object, a hash key and a
 * value object per series in a map: for the two device gauges at 800 time-sliced replicas, about 0.2 MiB
 * of the idle plugin's heap and 0.3 MiB of its RSS (docs/benchmarks.md). It has what prom-client's Registry
 * reads of a metric (the name, help, type and `get()`) and its label names, as prom-client's metrics have.
 */
export class DeviceSeriesGauge {
  readonly type = "gauge" as const;
  readonly aggregator = "sum" as const;
  readonly labelNames = DEVICE_LABELS;
  private resource = "";
  private rows: readonly DeviceSeries[] = [];

  constructor(
    readonly name: string,
    readonly help: string,
    /** The row's value in this gauge; undefined leaves the row out. */
    private readonly valueOf: (row: DeviceSeries) => number | undefined,
    registry: Registry,
  ) {
    // The Registry's type names prom-client's own metric classes; it reads only what this class has.
    registry.registerMetric(this as unknown as Gauge);
  }

  /** The rows of `resource` from now on, in place of those before. */
  set(resource: string, rows: readonly DeviceSeries[]): void {
    this.resource = resource;
    this.rows = rows;
  }

  /** What prom-client's metrics give their Registry (whose `type` it types as an enum but reads as text). */
  get(): Promise<{
    name: string;
    help: string;
    type: "gauge";
    aggregator: "sum";
    values: MetricValue<DeviceLabel>[];
  }> {
    const values: MetricValue<DeviceLabel>[] = [];
    for (const row of this.rows) {
      const value = this.valueOf(row);
      if (value === undefined) continue;
      const { device, namespace, pod, container } = row;
      values.push({ labels: { resource: this.resource, device, namespace, pod, container }, value });
    }
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values,
    });
  }
}

/** Buckets of the DRA prepare and unprepare latencies: from a file write alone to a slow API server. */
const DRA_CALL_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

export class PluginMetrics {
  /** A registry of its own, never prom-client's global one: two runtimes (or tests) never share series. */
  readonly registry = new Registry();

  readonly devices = new Gauge({
    name: "dpo_plugin_devices",
    help: "Devices advertised to the kubelet, by health.",
    labelNames: ["resource", "health"] as const,
    registers: [this.registry],
  });
  /**
   * One series per device the kubelet knows (its ids: one per replica under time-slicing), labelled
   * with the container holding it (empty labels when free), from the kubelet's PodResources API.
   * Absent until the kubelet first answered: "free" would be a guess.
   */
  readonly deviceAllocated = new DeviceSeriesGauge(
    "dpo_plugin_device_allocated",
    "1 when the kubelet has allocated the device to the container in the pod, namespace and container labels, 0 when free.",
    (row) => row.allocated,
    this.registry,
  );
  /** The same series as deviceAllocated, so an unhealthy device shows the pod that uses it. */
  readonly deviceHealthy = new DeviceSeriesGauge(
    "dpo_plugin_device_healthy",
    "1 when the advertised device is healthy, 0 when not; pod, namespace and container name its holder, if any.",
    (row) => row.healthy,
    this.registry,
  );
  readonly podResourcesUp = new Gauge({
    name: "dpo_plugin_pod_resources_up",
    help: "1 when the last read of the kubelet's PodResources API succeeded, 0 when it failed.",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly podResourcesErrors = new Counter({
    name: "dpo_plugin_pod_resources_errors_total",
    help: "Failed reads of the kubelet's PodResources API, by gRPC status (UNAVAILABLE when the socket is missing).",
    labelNames: ["resource", "code"] as const,
    registers: [this.registry],
  });
  readonly allocations = new Counter({
    name: "dpo_plugin_allocations_total",
    help: "Allocate container requests answered, by result (ok or the gRPC status name).",
    labelNames: ["resource", "result"] as const,
    registers: [this.registry],
  });
  readonly allocateDuration = new Histogram({
    name: "dpo_plugin_allocate_duration_seconds",
    help: "Time to answer one Allocate call.",
    labelNames: ["resource"] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1],
    registers: [this.registry],
  });
  /**
   * DRA mode's counterparts of Allocate: the kubelet waits on them before a pod's containers start (prepare)
   * and before its claims can be reused (unprepare). A prepare reads each claim from the API server, so it
   * takes milliseconds to seconds; the kubelet gives up on one after 45 s.
   */
  readonly draPrepareDuration = new Histogram({
    name: "dpo_plugin_dra_prepare_duration_seconds",
    help: "Time to answer one NodePrepareResources call (DRA), all its claims together.",
    labelNames: ["resource"] as const,
    buckets: DRA_CALL_BUCKETS,
    registers: [this.registry],
  });
  readonly draUnprepareDuration = new Histogram({
    name: "dpo_plugin_dra_unprepare_duration_seconds",
    help: "Time to answer one NodeUnprepareResources call (DRA), all its claims together.",
    labelNames: ["resource"] as const,
    buckets: DRA_CALL_BUCKETS,
    registers: [this.registry],
  });
  readonly preferredAllocations = new Counter({
    name: "dpo_plugin_preferred_allocations_total",
    help: "GetPreferredAllocation calls answered, by result.",
    labelNames: ["resource", "result"] as const,
    registers: [this.registry],
  });
  readonly registrations = new Counter({
    name: "dpo_plugin_registrations_total",
    help: "Registration attempts with the kubelet, by path (kubelet or watcher) and result.",
    labelNames: ["resource", "path", "result"] as const,
    registers: [this.registry],
  });
  readonly reregistrations = new Counter({
    name: "dpo_plugin_reregistrations_total",
    help: "Times the plugin registered again by itself, by reason (CapacityLost: the kubelet handed out fewer devices than the plugin advertised as healthy for longer than --capacity-heal-after).",
    labelNames: ["resource", "reason"] as const,
    registers: [this.registry],
  });
  readonly registered = new Gauge({
    name: "dpo_plugin_registered",
    help: "1 while the kubelet has accepted the plugin's current registration.",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly kubeletRestarts = new Counter({
    name: "dpo_plugin_kubelet_restarts_total",
    help: "Kubelet restarts detected (kubelet.sock re-created or the plugin's socket removed).",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly listAndWatchStreams = new Gauge({
    name: "dpo_plugin_list_and_watch_streams",
    help: "Open ListAndWatch streams.",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly deviceListUpdates = new Counter({
    name: "dpo_plugin_device_list_updates_total",
    help: "Device lists sent on ListAndWatch streams.",
    labelNames: ["resource"] as const,
    registers: [this.registry],
  });
  readonly reportWrites = new Counter({
    name: "dpo_plugin_report_writes_total",
    help: "DeviceNodeState report writes, by result: ok, error, or unchanged (nothing new, so not sent).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });

  /**
   * `dpo_plugin_devices` for the advertised devices of `resource`, by health. Reset first so that label
   * sets that disappeared stop being exported; nothing scrapes in between.
   */
  recordDeviceCounts(resource: string, advertised: readonly { readonly health: Health }[]): void {
    let healthy = 0;
    for (const d of advertised) if (d.health === "Healthy") healthy++;
    this.devices.reset();
    this.devices.set({ health: "Healthy", resource }, healthy);
    this.devices.set({ health: "Unhealthy", resource }, advertised.length - healthy);
  }

  /**
   * One series per row in dpo_plugin_device_healthy and (once the kubelet answered)
   * dpo_plugin_device_allocated, labelled with its holder. The rows replace the last ones whole on every
   * change of the devices or of their holders, so a device that moves or goes leaves no series behind.
   */
  recordDeviceSeries(resource: string, rows: readonly DeviceSeries[]): void {
    this.deviceAllocated.set(resource, rows);
    this.deviceHealthy.set(resource, rows);
  }

  /** The Prometheus text exposition of every metric above, as served on /metrics. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
