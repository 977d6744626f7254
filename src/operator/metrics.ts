// The operator's Prometheus metrics: reconciles, writes it makes, API requests, leadership.
import { Counter, Gauge, Histogram, Registry } from "../observability/metrics.js";

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

  /** The Prometheus text exposition of every metric above, as served on /metrics. */
  render(): Promise<string> {
    return this.registry.metrics();
  }
}
