// The plugin runtime's Prometheus metrics: devices by health, allocations, Allocate latency,
// registrations, kubelet restarts seen and node-report writes.
import { MetricsRegistry, type Counter, type Gauge, type Histogram } from "../observability/metrics.js";

export class PluginMetrics {
  readonly registry = new MetricsRegistry();
  readonly devices: Gauge = this.registry.gauge(
    "dpo_plugin_devices",
    "Devices advertised to the kubelet, by health.",
  );
  readonly allocations: Counter = this.registry.counter(
    "dpo_plugin_allocations_total",
    "Allocate container requests answered, by result (ok or the gRPC status name).",
  );
  readonly allocateDuration: Histogram = this.registry.histogram(
    "dpo_plugin_allocate_duration_seconds",
    "Time to answer one Allocate call.",
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1],
  );
  readonly preferredAllocations: Counter = this.registry.counter(
    "dpo_plugin_preferred_allocations_total",
    "GetPreferredAllocation calls answered, by result.",
  );
  readonly registrations: Counter = this.registry.counter(
    "dpo_plugin_registrations_total",
    "Registration attempts with the kubelet, by path (kubelet or watcher) and result.",
  );
  readonly registered: Gauge = this.registry.gauge(
    "dpo_plugin_registered",
    "1 while the kubelet has accepted the plugin's current registration.",
  );
  readonly kubeletRestarts: Counter = this.registry.counter(
    "dpo_plugin_kubelet_restarts_total",
    "Kubelet restarts detected (kubelet.sock re-created or the plugin's socket removed).",
  );
  readonly listAndWatchStreams: Gauge = this.registry.gauge(
    "dpo_plugin_list_and_watch_streams",
    "Open ListAndWatch streams.",
  );
  readonly deviceListUpdates: Counter = this.registry.counter(
    "dpo_plugin_device_list_updates_total",
    "Device lists sent on ListAndWatch streams.",
  );
  readonly reportWrites: Counter = this.registry.counter(
    "dpo_plugin_report_writes_total",
    "DeviceNodeState report writes, by result: ok, error, or unchanged (nothing new, so not sent).",
  );

  /** The Prometheus text exposition of every metric above, as served on /metrics. */
  render(): Promise<string> {
    return Promise.resolve(this.registry.expose());
  }
}
