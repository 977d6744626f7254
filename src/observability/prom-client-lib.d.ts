// Types of the prom-client modules src/observability/metrics.ts loads one by one: each file's
// `module.exports` is the class (or function) the package's index exports under the same name.
declare module "prom-client/lib/registry.js" {
  import type { Registry } from "prom-client";
  const registry: typeof Registry;
  export = registry;
}
declare module "prom-client/lib/counter.js" {
  import type { Counter } from "prom-client";
  const counter: typeof Counter;
  export = counter;
}
declare module "prom-client/lib/gauge.js" {
  import type { Gauge } from "prom-client";
  const gauge: typeof Gauge;
  export = gauge;
}
declare module "prom-client/lib/histogram.js" {
  import type { Histogram } from "prom-client";
  const histogram: typeof Histogram;
  export = histogram;
}
declare module "prom-client/lib/defaultMetrics.js" {
  import type { collectDefaultMetrics } from "prom-client";
  const collect: typeof collectDefaultMetrics;
  export = collect;
}
