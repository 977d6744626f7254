// `make bench-plugin`: the built plugin process with 8 mock devices x 100 replicas, driven by the simulated
// kubelet: start → registered, Allocate latency at 1 and 16 in flight, health change → ListAndWatch, RSS;
// and, in this process, the GetPreferredAllocation policies on the same 800 devices.
import * as grpc from "@grpc/grpc-js";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AllocationPolicy } from "../src/api/v1beta1/spec.js";
import { preferredAllocation } from "../src/plugin-runtime/devices/allocation.js";
import { advertiseDevices, indexAdvertisedDevices } from "../src/plugin-runtime/devices/sharing.js";
import { DevicePluginClient, type AllocateResponse } from "../src/plugin-runtime/proto/index.js";
import { SimulatedDeviceManager } from "../test/kubelet-sim/device-manager.js";
import { waitFor } from "../tools/cluster/wait.js";

const repo = join(import.meta.dirname, "..");
/** What the image runs: the bundle, with a V8 code cache made once under the same flags (see Dockerfile). */
const dpo = join(repo, "dist", "dpo.js");
/** The unbundled tsc output, measured beside the bundle to show what bundling and the code cache buy. */
const dpoUnbundled = join(repo, "dist", "cli", "main.js");
const RESOURCE = "bench.example/dev";
const DEVICES = 8;
const REPLICAS = 100;
const STARTS = Number(process.env["BENCH_STARTS"] ?? 5);
const ALLOCATES = Number(process.env["BENCH_ALLOCATES"] ?? 10_000);
const HEALTH_CHANGES = Number(process.env["BENCH_HEALTH_CHANGES"] ?? 100);
/** Calls before measuring, so the JIT has compiled the hot path as it will have on a long-running node. */
const WARMUP = Number(process.env["BENCH_WARMUP"] ?? 2_000);
/** The Node.js flags the container image starts the runtime with (see Dockerfile). */
const NODE_FLAGS = (process.env["BENCH_NODE_FLAGS"] ?? "--max-semi-space-size=1 --lite-mode")
  .split(" ")
  .filter(Boolean);

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx] ?? NaN;
}

interface Rss {
  total: number;
  /** Private memory: the heap, malloc and stacks. */
  anonymous: number;
  /** Pages of mapped files, mostly the node binary's code and data, shared by every Node process on a machine. */
  file: number;
}

function rssMiB(pid: number): Rss {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string): number =>
    Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1]) / 1024;
  return { total: field("VmRSS"), anonymous: field("RssAnon"), file: field("RssFile") };
}

function formatRss(rss: Rss): string {
  return `${rss.total.toFixed(1)} MiB (anonymous ${rss.anonymous.toFixed(1)}, file-backed ${rss.file.toFixed(1)})`;
}

interface Plugin {
  child: ChildProcess;
  stop(): Promise<void>;
}

interface Launch {
  name: string;
  entry: string;
  /** NODE_COMPILE_CACHE for the plugin process, or undefined for none. */
  compileCache?: string;
}

function startPlugin(dir: string, config: string, launch: Launch): Plugin {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DPO_LOG_LEVEL: process.env["BENCH_PLUGIN_LOGS"] ?? "warn",
  };
  // A pod's environment has neither; a machine-wide CA bundle would add every root certificate to the RSS.
  delete env["NODE_COMPILE_CACHE"];
  delete env["NODE_EXTRA_CA_CERTS"];
  if (launch.compileCache !== undefined) env["NODE_COMPILE_CACHE"] = launch.compileCache;
  const child = spawn(
    process.execPath,
    [
      ...NODE_FLAGS,
      launch.entry,
      "plugin",
      "--config",
      config,
      "--device-plugin-dir",
      dir,
      // Serve /metrics (and the probes) as the DaemonSet does, so its memory is in the figures.
      "--metrics-addr",
      "127.0.0.1:0",
      "--health-addr",
      "0",
    ],
    {
      stdio: ["ignore", process.env["BENCH_PLUGIN_LOGS"] ? "inherit" : "ignore", "inherit"],
      env,
    },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    child,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

function allocateOnce(client: DevicePluginClient, id: string): Promise<AllocateResponse> {
  return new Promise((resolve, reject) =>
    client.allocate({ containerRequests: [{ devicesIds: [id] }] }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

async function allocateLatencies(client: DevicePluginClient, ids: string[], total: number, inFlight: number) {
  const latencies: number[] = [];
  let next = 0;
  async function worker(): Promise<void> {
    while (next < total) {
      const i = next++;
      const started = performance.now();
      await allocateOnce(client, ids[i % ids.length]!);
      latencies.push(performance.now() - started);
    }
  }
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlight }, () => worker()));
  return { latencies, seconds: (performance.now() - started) / 1000 };
}

/**
 * GetPreferredAllocation's decision alone (no gRPC), per policy, on 8 devices x 100 replicas over two NUMA
 * nodes with a 16-device request: the pure function the server calls, measured here rather than timed in
 * a unit test. Runs in this process, before the plugin processes, with Node's default flags.
 */
function preferredAllocationPerCall(): { metric: string; value: string; target: string; ok: boolean } {
  const devices = indexAdvertisedDevices(
    advertiseDevices(
      Array.from({ length: DEVICES }, (_, i) => ({
        id: `dev-${i}`,
        numaNode: i % 2,
        health: "Healthy" as const,
        reason: "",
        attributes: {},
      })),
      { strategy: "TimeSlicing", replicas: REPLICAS, failRequestsGreaterThanOne: false },
    ),
  );
  const request = { available: [...devices.keys()].reverse(), mustInclude: ["dev-5::50"], size: 16 };
  const policies: AllocationPolicy[] = ["Packed", "Spread", "NUMAAligned", "None"];
  const perCall = policies.map((policy) => {
    for (let i = 0; i < 200; i++) preferredAllocation(policy, devices, request);
    const runs = 2_000;
    const started = performance.now();
    for (let i = 0; i < runs; i++) preferredAllocation(policy, devices, request);
    return { policy, ms: (performance.now() - started) / runs };
  });
  const worst = Math.max(...perCall.map((p) => p.ms));
  return {
    metric: `GetPreferredAllocation decision, in process, size 16 of ${DEVICES * REPLICAS}`,
    value: perCall.map((p) => `${p.policy} ${p.ms.toFixed(3)} ms`).join(", "),
    target: "≤ 1 ms per call",
    ok: worst <= 1,
  };
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "dpo-bench-"));
  const dir = join(work, "dp");
  const healthFile = join(work, "health.json");
  const config = join(work, "config.yaml");
  writeFileSync(healthFile, "{}");
  writeFileSync(
    config,
    [
      "apiVersion: dpo.dev/v1beta1",
      "kind: DevicePluginConfig",
      "metadata: { name: bench }",
      "spec:",
      `  resourceName: ${RESOURCE}`,
      `  backend: { type: Mock, mock: { devices: ${DEVICES}, idPrefix: dev, numaNodes: 2, healthFile: ${healthFile} } }`,
      `  sharing: { strategy: TimeSlicing, replicas: ${REPLICAS} }`,
      "  topology: { allocationPolicy: Packed }",
    ].join("\n"),
  );
  const kubelet = new SimulatedDeviceManager({ dir });
  await kubelet.start();
  const results: { metric: string; value: string; target: string; ok: boolean }[] = [];
  const preferred = preferredAllocationPerCall();

  try {
    // The code cache the image ships, made the way the Dockerfile makes it.
    const compileCache = join(work, "compile-cache");
    execFileSync(process.execPath, [...NODE_FLAGS, dpo, "plugin", "--help"], {
      env: { ...process.env, NODE_COMPILE_CACHE: compileCache },
      stdio: "ignore",
    });
    const launches: Launch[] = [
      { name: "unbundled (dist/cli/main.js)", entry: dpoUnbundled },
      { name: "bundled (dist/dpo.js)", entry: dpo },
      { name: "bundled + code cache, as the image runs", entry: dpo, compileCache },
    ];
    const image = launches[launches.length - 1]!;
    // Start → registered with the full device list, measured from spawn; the launches take turns so
    // machine noise falls on each alike. The image's last start goes on to the steady-state figures.
    const startTimes = new Map<Launch, number[]>(launches.map((l) => [l, []]));
    for (let i = 0; i < STARTS; i++) {
      for (const launch of launches) {
        const spawnedAt = performance.now();
        const registered = new Promise<number>((resolve) => {
          const onDevices = (r: { resourceName: string; devices: unknown[] }): void => {
            if (r.resourceName === RESOURCE && r.devices.length === DEVICES * REPLICAS) {
              kubelet.off("devices", onDevices);
              resolve(performance.now() - spawnedAt);
            }
          };
          kubelet.on("devices", onDevices);
        });
        const p = startPlugin(dir, config, launch);
        startTimes.get(launch)!.push(await registered);
        if (launch === image && i === STARTS - 1) await runSteadyState(p, kubelet, healthFile, results);
        await p.stop();
      }
    }
    const imageP50 = percentile(startTimes.get(image)!, 50);
    for (const launch of [...launches].reverse()) {
      const times = startTimes.get(launch)!;
      const p50 = percentile(times, 50);
      const max = Math.max(...times);
      results.unshift({
        metric: `process start → registered, ${launch.name} (${STARTS} starts)`,
        value:
          `p50 ${p50.toFixed(0)} ms, max ${max.toFixed(0)} ms` +
          (launch === image ? "" : ` (image / this: ${(imageP50 / p50).toFixed(2)})`),
        target: launch === image ? "≤ 500 ms" : "(reported)",
        ok: launch !== image || max <= 500,
      });
    }
    results.push(preferred);
  } finally {
    await kubelet.stop();
    rmSync(work, { recursive: true, force: true });
  }

  console.log(
    `\nbench-plugin: ${DEVICES} mock devices x ${REPLICAS} replicas (${DEVICES * REPLICAS} advertised)\n`,
  );
  console.log("| metric | result | target | |");
  console.log("|---|---|---|---|");
  for (const r of results)
    console.log(`| ${r.metric} | ${r.value} | ${r.target} | ${r.ok ? "ok" : "MISSED"} |`);
  console.log(`\nnode ${process.version} ${NODE_FLAGS.join(" ")}, ${new Date().toISOString()}`);
}

async function runSteadyState(
  plugin: Plugin,
  kubelet: SimulatedDeviceManager,
  healthFile: string,
  results: { metric: string; value: string; target: string; ok: boolean }[],
): Promise<void> {
  const pid = plugin.child.pid!;
  const r = kubelet.resources.get(RESOURCE)!;
  const client = new DevicePluginClient(
    `unix://${join(kubelet.socketPath, "..", r.endpoint)}`,
    grpc.credentials.createInsecure(),
  );
  const ids = r.devices.map((d) => d.ID);

  // Idle: registered and serving, no call made yet; two seconds for start-up garbage to be collected.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const rssIdle = rssMiB(pid);
  await allocateLatencies(client, ids, WARMUP, 1);

  const one = await allocateLatencies(client, ids, Math.floor(ALLOCATES / 2), 1);
  const sixteen = await allocateLatencies(client, ids, ALLOCATES - Math.floor(ALLOCATES / 2), 16);
  const rssAfter = rssMiB(pid);

  results.push({
    metric: "Allocate, 1 in flight",
    value: `p50 ${percentile(one.latencies, 50).toFixed(3)} ms, p99 ${percentile(one.latencies, 99).toFixed(3)} ms (${(one.latencies.length / one.seconds).toFixed(0)}/s)`,
    target: "p99 ≤ 2 ms",
    ok: percentile(one.latencies, 99) <= 2,
  });
  results.push({
    metric: "Allocate, 16 in flight",
    value: `p50 ${percentile(sixteen.latencies, 50).toFixed(3)} ms, p99 ${percentile(sixteen.latencies, 99).toFixed(3)} ms (${(sixteen.latencies.length / sixteen.seconds).toFixed(0)}/s)`,
    target: "(reported)",
    ok: true,
  });

  // Health change → the kubelet's ListAndWatch stream shows it.
  const latencies: number[] = [];
  for (let i = 0; i < HEALTH_CHANGES; i++) {
    const unhealthy = i % 2 === 0;
    const want = unhealthy ? "Unhealthy" : "Healthy";
    const tmp = `${healthFile}.tmp`;
    writeFileSync(tmp, JSON.stringify(unhealthy ? { "dev-3": "Unhealthy" } : {}));
    const written = performance.now();
    renameSync(tmp, healthFile);
    await waitFor(
      `dev-3 to become ${want} on the stream`,
      () => r.devices.find((d) => d.ID === "dev-3::0")?.health === want,
      { timeoutMs: 5_000, intervalMs: 1 },
    );
    latencies.push(performance.now() - written);
  }
  results.push({
    metric: `health change → ListAndWatch (${HEALTH_CHANGES} changes)`,
    value: `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    target: "p99 ≤ 100 ms",
    ok: percentile(latencies, 99) <= 100,
  });
  results.push({
    metric: "RSS idle",
    value: formatRss(rssIdle),
    target: "≤ 60 MiB",
    ok: rssIdle.total <= 60,
  });
  results.push({
    metric: `RSS after ${WARMUP + ALLOCATES} Allocates (${WARMUP} warm-up)`,
    value: formatRss(rssAfter),
    target: "≤ 80 MiB",
    ok: rssAfter.total <= 80,
  });
  client.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
