// A small Prometheus metrics registry (counters, gauges, histograms with labels) and its text exposition.

type Labels = Readonly<Record<string, string>>;

function labelKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}="${escapeLabelValue(labels[k] ?? "")}"`)
    .join(",");
}

function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function formatNumber(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "+Inf";
  if (n === -Infinity) return "-Inf";
  return String(n);
}

interface Metric {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge" | "histogram";
  expose(): string[];
}

export class Counter implements Metric {
  readonly type = "counter";
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    const key = labelKey(labels);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelKey(labels)) ?? 0;
  }
  expose(): string[] {
    return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${formatNumber(v)}`);
  }
}

export class Gauge implements Metric {
  readonly type = "gauge";
  private values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  set(labels: Labels, value: number): void {
    this.values.set(labelKey(labels), value);
  }
  get(labels: Labels = {}): number | undefined {
    return this.values.get(labelKey(labels));
  }
  /** Replaces every series at once, so label sets that disappeared stop being exported. */
  replaceAll(series: readonly { labels: Labels; value: number }[]): void {
    this.values = new Map(series.map((s) => [labelKey(s.labels), s.value]));
  }
  expose(): string[] {
    return [...this.values].map(([k, v]) => `${this.name}${k ? `{${k}}` : ""} ${formatNumber(v)}`);
  }
}

export class Histogram implements Metric {
  readonly type = "histogram";
  private readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
  ) {}
  observe(labels: Labels, value: number): void {
    const key = labelKey(labels);
    let s = this.series.get(key);
    if (!s) {
      s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    for (let i = 0; i < this.buckets.length; i++) {
      if (value <= (this.buckets[i] ?? Infinity)) s.counts[i] = (s.counts[i] ?? 0) + 1;
    }
    s.sum += value;
    s.count += 1;
  }
  expose(): string[] {
    const lines: string[] = [];
    for (const [k, s] of this.series) {
      const prefix = k ? `${k},` : "";
      this.buckets.forEach((b, i) =>
        lines.push(`${this.name}_bucket{${prefix}le="${formatNumber(b)}"} ${s.counts[i]}`),
      );
      lines.push(`${this.name}_bucket{${prefix}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${k ? `{${k}}` : ""} ${formatNumber(s.sum)}`);
      lines.push(`${this.name}_count${k ? `{${k}}` : ""} ${s.count}`);
    }
    return lines;
  }
}

export class MetricsRegistry {
  private readonly metrics: Metric[] = [];
  counter(name: string, help: string): Counter {
    return this.register(new Counter(name, help));
  }
  gauge(name: string, help: string): Gauge {
    return this.register(new Gauge(name, help));
  }
  histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return this.register(new Histogram(name, help, buckets));
  }
  private register<M extends Metric>(m: M): M {
    if (this.metrics.some((x) => x.name === m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.metrics.push(m);
    return m;
  }
  /** Prometheus text exposition format 0.0.4. */
  expose(): string {
    const out: string[] = [];
    for (const m of this.metrics) {
      out.push(`# HELP ${m.name} ${m.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`);
      out.push(`# TYPE ${m.name} ${m.type}`);
      out.push(...m.expose());
    }
    return out.join("\n") + "\n";
  }
}
