// Whether the operator's event loop keeps up, sampled once a second for the whole run: the longest delay
// its own monitor saw since the last scrape (prom-client's nodejs_eventloop_lag_max_seconds, from
// perf_hooks.monitorEventLoopDelay, reset on every scrape), how long the scrape took to be answered, and
// the gaps between the renewals its leader election stored in the Lease. A renewal gap with a quiet loop is
// the API server's (or the machine's) delay; a renewal gap with the loop blocked as long is the operator's.
// The benchmark's own event loops are sampled beside it: the operator reaches the API server through this
// process's relay, which runs on a thread of its own (relay-worker.ts) so that the main thread's work (the
// report writers of every node, lists of thousands of objects) cannot delay the operator's requests; the
// relay thread's delay is what the operator's requests, its Lease renewals included, could meet here.
import type { KubeConfig } from "@kubernetes/client-node";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { kubeRequest } from "../../src/kube/request.js";
import { metricSeries, sumOfSeries } from "./metrics.js";

/** Seconds between samples. */
const SAMPLE_INTERVAL_MS = 1_000;
/** A scrape not answered in this long counts as a loop blocked at least as long. */
const SCRAPE_TIMEOUT_MS = 5_000;
/** A delay or renewal gap this long is printed as it happens (BENCH_VERBOSE). */
const PRINT_OVER_MS = 1_000;

export interface LoopDelaySummary {
  samples: number;
  /** The longest event-loop delay seen, ms, and when (ISO time of the scrape that reported it). */
  maxDelayMs: number;
  maxDelayAt: string | undefined;
  /** Samples whose delay was over a second. */
  overOneSecond: number;
  /** The longest scrape answer, ms (a blocked loop answers late). */
  maxScrapeMs: number;
  /** The longest delay of this process's main event loop (the report writers'), ms, and when. */
  benchMaxDelayMs: number;
  benchMaxDelayAt: string | undefined;
  /** The longest delay of the relay thread's event loop, ms, and when it was read (undefined: not sampled). */
  relayMaxDelayMs: number | undefined;
  relayMaxDelayAt: string | undefined;
  /** The longest gap between two stored renewals of the Lease, ms, and when it ended. */
  maxRenewGapMs: number;
  maxRenewGapAt: string | undefined;
}

export interface LoopDelaySampler {
  /** Stops sampling; what was seen over the run. */
  stop(): LoopDelaySummary;
  /** What was seen so far. */
  summary(): LoopDelaySummary;
}

/**
 * Samples the operator serving /metrics on `port` and holding Lease `namespace`/`lease` until stopped, and
 * the relay thread's loop when given `relayLoopDelayMs` (its longest delay since the previous call).
 */
export function sampleLoopDelay(
  kc: KubeConfig,
  port: number,
  namespace: string,
  lease: string,
  verbose: boolean,
  relayLoopDelayMs?: () => Promise<number>,
): LoopDelaySampler {
  const s: LoopDelaySummary = {
    samples: 0,
    maxDelayMs: 0,
    maxDelayAt: undefined,
    overOneSecond: 0,
    maxScrapeMs: 0,
    benchMaxDelayMs: 0,
    benchMaxDelayAt: undefined,
    relayMaxDelayMs: undefined,
    relayMaxDelayAt: undefined,
    maxRenewGapMs: 0,
    maxRenewGapAt: undefined,
  };
  let lastRenew: number | undefined;
  let stopped = false;
  const own = monitorEventLoopDelay({ resolution: 10 });
  own.enable();
  const say = (text: string) => {
    if (verbose) console.error(`bench-operator: ${new Date().toISOString()} ${text}`);
  };

  const scrape = async (): Promise<void> => {
    const started = performance.now();
    const lag = await Promise.race([
      metricSeries(port, "nodejs_eventloop_lag_max_seconds").then((series) => sumOfSeries(series) * 1000),
      new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), SCRAPE_TIMEOUT_MS).unref()),
    ]).catch(() => undefined);
    const scrapeMs = performance.now() - started;
    s.maxScrapeMs = Math.max(s.maxScrapeMs, scrapeMs);
    if (lag === undefined) {
      say(`operator /metrics not answered within ${SCRAPE_TIMEOUT_MS} ms`);
      return;
    }
    s.samples++;
    // The delay ending in this scrape's answer may be in neither figure alone: the longer one counts.
    const delay = Math.max(lag, scrapeMs);
    if (delay > s.maxDelayMs) {
      s.maxDelayMs = delay;
      s.maxDelayAt = new Date().toISOString();
    }
    if (delay > 1000) s.overOneSecond++;
    if (delay > PRINT_OVER_MS)
      say(
        `operator event loop delayed ${lag.toFixed(0)} ms (its monitor), /metrics answered in ${scrapeMs.toFixed(0)} ms`,
      );
  };

  const readLease = async (): Promise<void> => {
    const object = await kubeRequest<{ spec?: { renewTime?: string } }>(kc, {
      method: "GET",
      path: `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${lease}`,
    }).catch(() => undefined);
    const renewed = object?.spec?.renewTime === undefined ? NaN : Date.parse(object.spec.renewTime);
    if (Number.isNaN(renewed)) return;
    if (lastRenew !== undefined && renewed > lastRenew) {
      const gap = renewed - lastRenew;
      if (gap > s.maxRenewGapMs) {
        s.maxRenewGapMs = gap;
        s.maxRenewGapAt = new Date(renewed).toISOString();
      }
      if (gap > PRINT_OVER_MS * 4) say(`the operator's Lease renewed ${gap} ms after its previous renewal`);
    }
    if (lastRenew === undefined || renewed > lastRenew) lastRenew = renewed;
  };

  const sampleOwn = (): void => {
    const delay = own.max / 1e6;
    own.reset();
    if (delay > s.benchMaxDelayMs) {
      s.benchMaxDelayMs = delay;
      s.benchMaxDelayAt = new Date().toISOString();
    }
    if (delay > PRINT_OVER_MS)
      say(`the benchmark's main event loop (report writers) delayed ${delay.toFixed(0)} ms`);
  };

  const sampleRelay = async (): Promise<void> => {
    if (relayLoopDelayMs === undefined) return;
    const delay = await relayLoopDelayMs().catch(() => undefined);
    if (delay === undefined) return;
    if (s.relayMaxDelayMs === undefined || delay > s.relayMaxDelayMs) {
      s.relayMaxDelayMs = delay;
      s.relayMaxDelayAt = new Date().toISOString();
    }
    if (delay > PRINT_OVER_MS) say(`the relay thread's event loop delayed ${delay.toFixed(0)} ms`);
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      const next = performance.now() + SAMPLE_INTERVAL_MS;
      sampleOwn();
      await Promise.all([scrape(), readLease(), sampleRelay()]);
      const wait = next - performance.now();
      if (wait > 0 && !stopped) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  };
  void loop();
  return {
    stop: () => {
      stopped = true;
      sampleOwn();
      own.disable();
      return { ...s };
    },
    summary: () => ({ ...s }),
  };
}

/** The summary as a table cell. */
export function describeLoopDelay(s: LoopDelaySummary): string {
  return (
    `event loop: max ${s.maxDelayMs.toFixed(0)} ms${s.maxDelayAt === undefined ? "" : ` at ${s.maxDelayAt.slice(11, 19)}`}, ` +
    `${s.overOneSecond} of ${s.samples} 1 s samples over 1 s, slowest /metrics answer ${s.maxScrapeMs.toFixed(0)} ms; ` +
    `the benchmark's own (writers): max ${s.benchMaxDelayMs.toFixed(0)} ms${s.benchMaxDelayAt === undefined ? "" : ` at ${s.benchMaxDelayAt.slice(11, 19)}`}; ` +
    (s.relayMaxDelayMs === undefined
      ? ""
      : `its relay thread: max ${s.relayMaxDelayMs.toFixed(0)} ms${s.relayMaxDelayAt === undefined ? "" : ` at ${s.relayMaxDelayAt.slice(11, 19)}`}; `) +
    `Lease renewals at most ${(s.maxRenewGapMs / 1000).toFixed(1)} s apart` +
    (s.maxRenewGapAt === undefined ? "" : ` (at ${s.maxRenewGapAt.slice(11, 19)})`)
  );
}
