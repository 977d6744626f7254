// `make bench-plugin`: the built plugin process with 8 mock devices x 100 replicas, driven by the simulated
// kubelet: start → registered, Allocate latency at 1 and 16 in flight, health change → ListAndWatch, RSS.
import * as grpc from "@grpc/grpc-js";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DevicePluginClient, type AllocateResponse } from "../src/plugin-runtime/proto/index.js";
import { SimulatedDeviceManager } from "../test/kubelet-sim/device-manager.js";
import { waitFor } from "../tools/cluster/wait.js";

const repo = join(import.meta.dirname, "..");
const dpo = join(repo, "dist", "cli", "main.js");
const RESOURCE = "bench.example/dev";
const DEVICES = 8;
const REPLICAS = 100;
const STARTS = Number(process.env["BENCH_STARTS"] ?? 5);
const ALLOCATES = Number(process.env["BENCH_ALLOCATES"] ?? 10_000);
const HEALTH_CHANGES = Number(process.env["BENCH_HEALTH_CHANGES"] ?? 100);
/** Calls before measuring, so the JIT has compiled the hot path as it will have on a long-running node. */
const WARMUP = Number(process.env["BENCH_WARMUP"] ?? 2_000);
/** The Node.js flags the container image starts the runtime with (see Dockerfile). */
const NODE_FLAGS = (process.env["BENCH_NODE_FLAGS"] ?? "--max-semi-space-size=1 --lite-mode --no-expose-wasm")
  .split(" ")
  .filter(Boolean);

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx] ?? NaN;
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
  return kb / 1024;
}

interface Plugin {
  child: ChildProcess;
  stop(): Promise<void>;
}

function startPlugin(dir: string, config: string): Plugin {
  const child = spawn(
    process.execPath,
    [
      ...NODE_FLAGS,
      dpo,
      "plugin",
      "--config",
      config,
      "--device-plugin-dir",
      dir,
      "--metrics-addr",
      "0",
      "--health-addr",
      "0",
    ],
    {
      stdio: ["ignore", process.env["BENCH_PLUGIN_LOGS"] ? "inherit" : "ignore", "inherit"],
      env: { ...process.env, DPO_LOG_LEVEL: process.env["BENCH_PLUGIN_LOGS"] ?? "warn" },
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

  try {
    // Start → registered with the full device list, measured from spawn.
    const startTimes: number[] = [];
    for (let i = 0; i < STARTS; i++) {
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
      const p = startPlugin(dir, config);
      startTimes.push(await registered);
      if (i < STARTS - 1) await p.stop();
      else {
        await runSteadyState(p, kubelet, healthFile, results);
        await p.stop();
      }
    }
    const startP50 = percentile(startTimes, 50);
    const startMax = Math.max(...startTimes);
    results.unshift({
      metric: `process start → registered (${STARTS} starts)`,
      value: `p50 ${startP50.toFixed(0)} ms, max ${startMax.toFixed(0)} ms`,
      target: "≤ 500 ms",
      ok: startMax <= 500,
    });
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
    value: `${rssIdle.toFixed(1)} MiB`,
    target: "≤ 60 MiB",
    ok: rssIdle <= 60,
  });
  results.push({
    metric: `RSS after ${WARMUP + ALLOCATES} Allocates (${WARMUP} warm-up)`,
    value: `${rssAfter.toFixed(1)} MiB`,
    target: "≤ 80 MiB",
    ok: rssAfter <= 80,
  });
  client.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
