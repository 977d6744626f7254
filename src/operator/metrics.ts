// The operator's Prometheus metrics: reconciles, writes it makes, API requests, leadership.
import { MetricsRegistry, type Counter, type Gauge, type Histogram } from "../observability/metrics.js";

export class OperatorMetrics {
  readonly registry = new MetricsRegistry();
  readonly reconciles: Counter = this.registry.counter(
    "dpo_operator_reconciles_total",
    "Reconciles of DevicePluginConfigs, by result (ok, requeue, error).",
  );
  readonly reconcileDuration: Histogram = this.registry.histogram(
    "dpo_operator_reconcile_duration_seconds",
    "Time to reconcile one DevicePluginConfig.",
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  readonly applies: Counter = this.registry.counter(
    "dpo_operator_applies_total",
    "Server-side applies of plugin objects, by kind.",
  );
  readonly applyErrors: Counter = this.registry.counter(
    "dpo_operator_apply_errors_total",
    "Applies refused for good (forbidden, invalid), by kind.",
  );
  readonly statusWrites: Counter = this.registry.counter(
    "dpo_operator_status_writes_total",
    "DevicePluginConfig status writes.",
  );
  readonly statusWritesDeferred: Counter = this.registry.counter(
    "dpo_operator_status_writes_deferred_total",
    "Status writes postponed to keep at most one per config per interval.",
  );
  readonly apiRequests: Counter = this.registry.counter(
    "dpo_operator_api_requests_total",
    "Requests to the API server, by verb (WATCH counts watch starts).",
  );
  readonly leader: Gauge = this.registry.gauge("dpo_operator_leader", "1 while this replica leads.");
  readonly queueDepth: Gauge = this.registry.gauge(
    "dpo_operator_queue_depth",
    "Keys waiting in the work queue.",
  );

  /** The Prometheus text exposition of every metric above, as served on /metrics. */
  render(): Promise<string> {
    return Promise.resolve(this.registry.expose());
  }
}
