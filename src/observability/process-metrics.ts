// The process metrics docs/metrics.md documents (`process_*`, `nodejs_*`: CPU, memory, file descriptors,
// heap, event-loop lag, GC), for the plugin, written without prom-client's default collectors: the same
// families, help, types and labels as prom-client's collectDefaultMetrics (a unit test holds the two to the
// same families), read from the process when scraped. prom-client's collectors cost the plugin's idle RSS
// about 2 MiB (ADR 0008); the operator keeps them (metrics.ts, collectProcessMetrics).
import { readdirSync, readFileSync } from "node:fs";
import { constants, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { getHeapSpaceStatistics } from "node:v8";

type Labels = Readonly<Record<string, string>>;
interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  samples: [suffix: string, labels: Labels, value: number][];
}

const GC_BUCKETS = [0.001, 0.01, 0.1, 1, 2, 5];
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
};

/** A value as prom-client writes it. */
function formatValue(value: number): string {
  if (Number.isNaN(value)) return "Nan";
  if (!Number.isFinite(value)) return value < 0 ? "-Inf" : "+Inf";
  return `${value}`;
}

function formatLabels(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  return `{${entries.map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"')}"`).join(",")}}`;
}

/** How many of each kind a list holds, by constructor name (handles, requests) or by itself (resources). */
function countBy(items: readonly unknown[], key: (item: unknown) => string | undefined): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) {
    const k = key(item);
    if (k !== undefined) counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  return counts;
}

/** `Max open files`' soft limit from /proc/self/limits, read once. */
function maxFds(): number | undefined {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s+/)[3];
    return soft === undefined || soft === "unlimited" ? undefined : Number(soft);
  } catch {
    return undefined;
  }
}

/** VmRSS, VmSize and VmData from /proc/self/status, in bytes. */
function memoryStatus(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const line of readFileSync("/proc/self/status", "utf8").split("\n")) {
      const m = /^(VmRSS|VmSize|VmData):\s+(\d+) kB/.exec(line);
      if (m) out.set(m[1]!, Number(m[2]) * 1024);
    }
  } catch {
    // Not Linux: the families are written without samples.
  }
  return out;
}

type Internals = NodeJS.Process & { _getActiveHandles?(): unknown[]; _getActiveRequests?(): unknown[] };
const constructorName = (item: unknown): string | undefined =>
  (item as { constructor?: { name?: string } } | null)?.constructor?.name;

/** The process's metrics, observed from the call on: GC durations and the event loop's delays. */
export class ProcessMetrics {
  private readonly delay: ReturnType<typeof monitorEventLoopDelay>;
  private readonly gc: PerformanceObserver;
  private readonly gcSeries = new Map<string, { buckets: number[]; sum: number; count: number }>();
  private readonly maxFds = maxFds();
  private lag = 0;

  constructor() {
    this.delay = monitorEventLoopDelay({ resolution: 10 });
    this.delay.enable();
    this.gc = new PerformanceObserver((list) => {
      const entry = list.getEntries()[0];
      const detail = (entry as { detail?: { kind?: number } } | undefined)?.detail;
      const kind = GC_KINDS[detail?.kind ?? -1];
      if (entry === undefined || kind === undefined) return;
      const seconds = entry.duration / 1000;
      const series = this.gcSeries.get(kind) ?? { buckets: GC_BUCKETS.map(() => 0), sum: 0, count: 0 };
      this.gcSeries.set(kind, series);
      GC_BUCKETS.forEach((le, i) => {
        if (seconds <= le) series.buckets[i]!++;
      });
      series.sum += seconds;
      series.count++;
    });
    this.gc.observe({ entryTypes: ["gc"] });
  }

  /** Stops observing (tests). */
  stop(): void {
    this.delay.disable();
    this.gc.disconnect();
  }

  /** The exposition text of every family, in prom-client's order. */
  render(): string {
    return `${this.families()
      .map((f) => {
        const lines = [`# HELP ${f.name} ${f.help}`, `# TYPE ${f.name} ${f.type}`];
        for (const [suffix, labels, value] of f.samples) {
          lines.push(`${f.name}${suffix}${formatLabels(labels)} ${formatValue(value)}`);
        }
        return lines.join("\n");
      })
      .join("\n\n")}\n`;
  }

  private families(): Family[] {
    const cpu = process.cpuUsage();
    const memory = memoryStatus();
    const heap = process.memoryUsage();
    const internals = process as Internals;
    const handles = countBy(internals._getActiveHandles?.() ?? [], constructorName);
    const requests = countBy(internals._getActiveRequests?.() ?? [], constructorName);
    const resources = countBy(process.getActiveResourcesInfo(), (r) => String(r));
    let openFds: number | undefined;
    try {
      openFds = readdirSync("/proc/self/fd").length - 1;
    } catch {
      openFds = undefined;
    }
    // The lag is measured from this scrape to the next turn of the loop and reported on the next scrape,
    // as prom-client does; the delay histogram restarts with each scrape.
    const start = process.hrtime.bigint();
    setImmediate(() => (this.lag = Number(process.hrtime.bigint() - start) / 1e9));
    const d = this.delay;
    const delays: [string, string, number][] = [
      ["min", "The minimum recorded event loop delay.", d.min],
      ["max", "The maximum recorded event loop delay.", d.max],
      ["mean", "The mean of the recorded event loop delays.", d.mean],
      ["stddev", "The standard deviation of the recorded event loop delays.", d.stddev],
      ["p50", "The 50th percentile of the recorded event loop delays.", d.percentile(50)],
      ["p90", "The 90th percentile of the recorded event loop delays.", d.percentile(90)],
      ["p99", "The 99th percentile of the recorded event loop delays.", d.percentile(99)],
    ];
    d.reset();
    const one = (value: number | undefined): Family["samples"] =>
      value === undefined ? [] : [["", {}, value]];
    const byType = (counts: Map<string, number>): Family["samples"] =>
      [...counts].map(([type, n]) => ["", { type }, n]);
    const total = (counts: Map<string, number>): number => [...counts.values()].reduce((a, b) => a + b, 0);
    const spaces = getHeapSpaceStatistics().map((s) => ({
      space: s.space_name.slice(0, s.space_name.indexOf("_space")),
      s,
    }));
    const [major, minor, patch] = process.versions.node.split(".");
    const gc: Family["samples"] = [];
    for (const [kind, series] of this.gcSeries) {
      GC_BUCKETS.forEach((le, i) => gc.push(["_bucket", { le: String(le), kind }, series.buckets[i]!]));
      gc.push(["_bucket", { le: "+Inf", kind }, series.count]);
      gc.push(["_sum", { kind }, series.sum]);
      gc.push(["_count", { kind }, series.count]);
    }
    return [
      {
        name: "process_cpu_user_seconds_total",
        help: "Total user CPU time spent in seconds.",
        type: "counter",
        samples: one(cpu.user / 1e6),
      },
      {
        name: "process_cpu_system_seconds_total",
        help: "Total system CPU time spent in seconds.",
        type: "counter",
        samples: one(cpu.system / 1e6),
      },
      {
        name: "process_cpu_seconds_total",
        help: "Total user and system CPU time spent in seconds.",
        type: "counter",
        samples: one((cpu.user + cpu.system) / 1e6),
      },
      {
        name: "process_start_time_seconds",
        help: "Start time of the process since unix epoch in seconds.",
        type: "gauge",
        samples: one(Math.round(Date.now() / 1000 - process.uptime())),
      },
      {
        name: "process_resident_memory_bytes",
        help: "Resident memory size in bytes.",
        type: "gauge",
        samples: one(memory.get("VmRSS")),
      },
      {
        name: "process_virtual_memory_bytes",
        help: "Virtual memory size in bytes.",
        type: "gauge",
        samples: one(memory.get("VmSize")),
      },
      {
        name: "process_heap_bytes",
        help: "Process heap size in bytes.",
        type: "gauge",
        samples: one(memory.get("VmData")),
      },
      {
        name: "process_open_fds",
        help: "Number of open file descriptors.",
        type: "gauge",
        samples: one(openFds),
      },
      {
        name: "process_max_fds",
        help: "Maximum number of open file descriptors.",
        type: "gauge",
        samples: one(this.maxFds),
      },
      {
        name: "nodejs_eventloop_lag_seconds",
        help: "Lag of event loop in seconds.",
        type: "gauge",
        samples: one(this.lag),
      },
      ...delays.map(([stat, help, nanos]): Family => ({
        name: `nodejs_eventloop_lag_${stat}_seconds`,
        help,
        type: "gauge",
        samples: one(nanos / 1e9),
      })),
      {
        name: "nodejs_active_resources",
        help: "Number of active resources that are currently keeping the event loop alive, grouped by async resource type.",
        type: "gauge",
        samples: byType(resources),
      },
      {
        name: "nodejs_active_resources_total",
        help: "Total number of active resources.",
        type: "gauge",
        samples: one(total(resources)),
      },
      {
        name: "nodejs_active_handles",
        help: "Number of active libuv handles grouped by handle type. Every handle type is C++ class name.",
        type: "gauge",
        samples: byType(handles),
      },
      {
        name: "nodejs_active_handles_total",
        help: "Total number of active handles.",
        type: "gauge",
        samples: one(total(handles)),
      },
      {
        name: "nodejs_active_requests",
        help: "Number of active libuv requests grouped by request type. Every request type is C++ class name.",
        type: "gauge",
        samples: byType(requests),
      },
      {
        name: "nodejs_active_requests_total",
        help: "Total number of active requests.",
        type: "gauge",
        samples: one(total(requests)),
      },
      {
        name: "nodejs_heap_size_total_bytes",
        help: "Process heap size from Node.js in bytes.",
        type: "gauge",
        samples: one(heap.heapTotal),
      },
      {
        name: "nodejs_heap_size_used_bytes",
        help: "Process heap size used from Node.js in bytes.",
        type: "gauge",
        samples: one(heap.heapUsed),
      },
      {
        name: "nodejs_external_memory_bytes",
        help: "Node.js external memory size in bytes.",
        type: "gauge",
        samples: one(heap.external),
      },
      ...(["total", "used", "available"] as const).map((kind): Family => ({
        name: `nodejs_heap_space_size_${kind}_bytes`,
        help: `Process heap space size ${kind} from Node.js in bytes.`,
        type: "gauge",
        samples: spaces.map(({ space, s }) => [
          "",
          { space },
          kind === "total" ? s.space_size : kind === "used" ? s.space_used_size : s.space_available_size,
        ]),
      })),
      {
        name: "nodejs_version_info",
        help: "Node.js version info.",
        type: "gauge",
        samples: [["", { version: process.version, major: major!, minor: minor!, patch: patch! }, 1]],
      },
      {
        name: "nodejs_gc_duration_seconds",
        help: "Garbage collection duration by kind, one of major, minor, incremental or weakcb.",
        type: "histogram",
        samples: gc,
      },
    ];
  }
}
