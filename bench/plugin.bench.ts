// `make bench-plugin`: the built plugin process with 8 mock devices x 100 replicas, driven by the simulated
// kubelet: start → registered, Allocate latency at 1 and 16 in flight, health change → ListAndWatch, RSS;
// the upstream Go sample device plugin under the same load in the same run, with dpo / Go ratios; and, in
// this process, the GetPreferredAllocation policies on the same 800 devices.
import * as grpc from "@grpc/grpc-js";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync, renameSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AllocationPolicy } from "../src/api/v1beta1/spec.js";
import { preferredAllocation } from "../src/plugin-runtime/devices/allocation.js";
import { advertiseDevices, indexAdvertisedDevices } from "../src/plugin-runtime/devices/sharing.js";
import { DevicePluginClient, type AllocateResponse } from "../src/plugin-runtime/proto/index.js";
import { SimulatedDeviceManager, type SimulatedResource } from "../tools/kubelet-sim/device-manager.js";
import { imageNodeFlags } from "../tools/kubelet-sim/plugin-pod.js";
import { waitFor } from "../tools/cluster/wait.js";
import { formatRatio, percentile } from "../tools/stats.js";

const repo = join(import.meta.dirname, "..");
/** What the image runs: the bundle, with a V8 code cache made once under the same flags (see Dockerfile). */
const dpo = join(repo, "dist", "dpo.js");
/** The unbundled tsc output, measured beside the bundle to show what bundling and the code cache buy. */
const dpoUnbundled = join(repo, "dist", "cli", "main.js");
const RESOURCE = "bench.example/dev";
const DEVICES = 8;
const REPLICAS = 100;
/**
 * The upstream sample device plugin (k8s.io/kubernetes test/images/sample-device-plugin): it registers
 * this resource name with two devices, Dev-1 and Dev-2, both healthy, and has no health source.
 */
const GO_RESOURCE = "example.com/resource";
const GO_DEVICES = 2;
/** Where its Allocate creates one empty file per device id (a path fixed in its source). */
const GO_FAKE_DEVICE_DIR = "/tmp";
const STARTS = Number(process.env["BENCH_STARTS"] ?? 5);
const ALLOCATES = Number(process.env["BENCH_ALLOCATES"] ?? 10_000);
const HEALTH_CHANGES = Number(process.env["BENCH_HEALTH_CHANGES"] ?? 100);
/** Calls before measuring, so the JIT has compiled the hot path as it will have on a long-running node. */
const WARMUP = Number(process.env["BENCH_WARMUP"] ?? 2_000);
/** The Allocates of each plugin are made in this many blocks, the two plugins taking turns block by block. */
const BLOCKS = Number(process.env["BENCH_BLOCKS"] ?? 10);
/** The Node.js flags the container image starts the runtime with (its Dockerfile's ENTRYPOINT). */
const NODE_FLAGS =
  process.env["BENCH_NODE_FLAGS"] !== undefined
    ? process.env["BENCH_NODE_FLAGS"].split(" ").filter(Boolean)
    : imageNodeFlags(readFileSync(join(repo, "Dockerfile"), "utf8"));
const PLUGIN_LOGS = process.env["BENCH_PLUGIN_LOGS"];

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

function rssRatio(a: Rss, b: Rss): string {
  return `${formatRatio(a.total, b.total)} (anonymous ${formatRatio(a.anonymous, b.anonymous)})`;
}

interface Plugin {
  child: ChildProcess;
  /** When the plugin's own program began (performance.now()): start → registered counts from here. */
  launchedAt: Promise<number>;
  stop(): Promise<void>;
}

interface Launch {
  name: string;
  resource: string;
  devices: number;
  start(): Plugin;
}

/** How the process ended: its exit, or the error that kept it from starting (no `unshare`, say). */
function exitOf(child: ChildProcess): Promise<string> {
  return new Promise((resolve) => {
    child.once("exit", (code, signal) => resolve(`code ${code}, signal ${signal}`));
    child.once("error", (err) => resolve(err.message));
  });
}

function startDpo(dir: string, config: string, entry: string, compileCache: string | undefined): Plugin {
  const env: NodeJS.ProcessEnv = { ...process.env, DPO_LOG_LEVEL: PLUGIN_LOGS ?? "warn" };
  // A pod's environment has neither; a machine-wide CA bundle would add every root certificate to the RSS.
  delete env["NODE_COMPILE_CACHE"];
  delete env["NODE_EXTRA_CA_CERTS"];
  if (compileCache !== undefined) env["NODE_COMPILE_CACHE"] = compileCache;
  const spawnedAt = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...NODE_FLAGS,
      entry,
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
    { stdio: ["ignore", PLUGIN_LOGS ? "inherit" : "ignore", "inherit"], env },
  );
  const exited = exitOf(child);
  return {
    child,
    launchedAt: Promise.resolve(spawnedAt),
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * The sample plugin dials the kubelet at the fixed /var/lib/kubelet/device-plugins/kubelet.sock and, left
 * to its defaults as in its image, serves its own socket in that directory (PLUGIN_SOCK_DIR moves only its
 * own socket, not the kubelet's). So it runs in a private mount namespace where that directory is the
 * simulated kubelet's: a tmpfs over /var/lib (nothing of the host's /var/lib is touched or needed: the
 * binary is static) with the directory bind-mounted into it. The wrapper writes one byte to stdout just
 * before it execs the plugin, so the namespace's set-up is not counted in start → registered.
 */
const GO_NAMESPACE_SCRIPT = [
  "set -eu",
  "mount -t tmpfs -o size=1m,mode=0755 dpo-bench /var/lib",
  "mkdir -p /var/lib/kubelet/device-plugins",
  'mount --bind "$1" /var/lib/kubelet/device-plugins',
  "printf x",
  `exec "$2"${PLUGIN_LOGS ? "" : " 2>/dev/null"}`,
].join("\n");

function startGoPlugin(dir: string, binary: string): Plugin {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // What it reads (sampledeviceplugin.go): the defaults are what its image runs with, autoregistration
  // at start and no CDI spec file.
  delete env["PLUGIN_SOCK_DIR"];
  delete env["REGISTER_CONTROL_FILE"];
  delete env["CDI_ENABLED"];
  // Root has CAP_SYS_ADMIN for a mount namespace; anyone else maps themselves to root in a user namespace.
  const namespace = process.getuid?.() === 0 ? ["--mount"] : ["--user", "--map-root-user", "--mount"];
  const child = spawn("unshare", [...namespace, "sh", "-c", GO_NAMESPACE_SCRIPT, "sh", dir, binary], {
    stdio: ["ignore", "pipe", "inherit"],
    env,
  });
  const exited = exitOf(child);
  const launchedAt = new Promise<number>((resolve, reject) => {
    child.stdout.once("data", () => resolve(performance.now()));
    child.once("error", reject);
    void exited.then((how) => reject(new Error(`Go plugin's mount namespace: ${how}`)));
  });
  // Only start → registered awaits it, once registered; an early end is reported from there.
  launchedAt.catch(() => undefined);
  child.stdout.resume();
  return {
    child,
    launchedAt,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Milliseconds from the plugin's launch to the simulated kubelet holding its full device list. */
async function startToRegistered(
  kubelet: SimulatedDeviceManager,
  launch: Launch,
): Promise<{ plugin: Plugin; ms: number }> {
  let onDevices: ((r: SimulatedResource) => void) | undefined;
  const registered = new Promise<number>((resolve) => {
    onDevices = (r) => {
      if (r.resourceName === launch.resource && r.connected && r.devices.length === launch.devices) {
        resolve(performance.now());
      }
    };
    kubelet.on("devices", onDevices);
  });
  const plugin = launch.start();
  const exited = exitOf(plugin.child).then((how) => {
    throw new Error(`${launch.name} ended (${how}) before it registered`);
  });
  try {
    const at = await Promise.race([registered, exited]);
    return { plugin, ms: at - (await plugin.launchedAt) };
  } finally {
    kubelet.off("devices", onDevices!);
    exited.catch(() => undefined);
  }
}

function allocateOnce(client: DevicePluginClient, id: string): Promise<AllocateResponse> {
  return new Promise((resolve, reject) =>
    client.allocate({ containerRequests: [{ devicesIds: [id] }] }, (err, res) =>
      err ? reject(err) : resolve(res),
    ),
  );
}

interface AllocateRun {
  latencies: number[];
  seconds: number;
}

/** `total` Allocates with `inFlight` at a time, one device id per request, the ids in turn; appended to `into`. */
async function allocateLatencies(
  client: DevicePluginClient,
  ids: string[],
  total: number,
  inFlight: number,
  into: AllocateRun = { latencies: [], seconds: 0 },
): Promise<AllocateRun> {
  let next = 0;
  const offset = into.latencies.length;
  async function worker(): Promise<void> {
    while (next < total) {
      const i = next++;
      const started = performance.now();
      await allocateOnce(client, ids[(offset + i) % ids.length]!);
      into.latencies.push(performance.now() - started);
    }
  }
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlight }, () => worker()));
  into.seconds += (performance.now() - started) / 1000;
  return into;
}

function formatAllocates(run: AllocateRun): string {
  const p50 = percentile(run.latencies, 50);
  const p99 = percentile(run.latencies, 99);
  return `p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms (${(run.latencies.length / run.seconds).toFixed(0)}/s)`;
}

function allocateRatio(a: AllocateRun, b: AllocateRun): string {
  return (
    `p50 ${formatRatio(percentile(a.latencies, 50), percentile(b.latencies, 50))}, ` +
    `p99 ${formatRatio(percentile(a.latencies, 99), percentile(b.latencies, 99))}`
  );
}

/** One row of the table: dpo's figure, the Go sample plugin's where it has one, and their ratio. */
interface Result {
  metric: string;
  value: string;
  go?: string;
  ratio?: string;
  target: string;
  /** Targets missed, by name; empty when every target holds. */
  missed: string[];
}

/**
 * GetPreferredAllocation's decision alone (no gRPC), per policy, on 8 devices x 100 replicas over two NUMA
 * nodes with a 16-device request: the pure function the server calls, measured here rather than timed in
 * a unit test. Runs in this process, before the plugin processes, with Node's default flags.
 */
function preferredAllocationPerCall(): Result {
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
    missed: worst <= 1 ? [] : ["≤ 1 ms"],
  };
}

async function main(): Promise<void> {
  const goBinary = execFileSync(join(repo, "tools", "cluster", "build-sample-device-plugin.sh"), {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
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
  const results: Result[] = [];
  const preferred = preferredAllocationPerCall();
  const running: Plugin[] = [];

  try {
    // The code cache the image ships, made the way the Dockerfile makes it.
    const compileCache = join(work, "compile-cache");
    execFileSync(process.execPath, [...NODE_FLAGS, dpo, "plugin", "--help"], {
      env: { ...process.env, NODE_COMPILE_CACHE: compileCache },
      stdio: "ignore",
    });
    const dpoLaunch = (name: string, entry: string, cache?: string): Launch => ({
      name,
      resource: RESOURCE,
      devices: DEVICES * REPLICAS,
      start: () => startDpo(dir, config, entry, cache),
    });
    const image = dpoLaunch("bundled + code cache, as the image runs", dpo, compileCache);
    const go: Launch = {
      name: "Go sample device plugin",
      resource: GO_RESOURCE,
      devices: GO_DEVICES,
      start: () => startGoPlugin(dir, goBinary),
    };
    const launches = [
      dpoLaunch("unbundled (dist/cli/main.js)", dpoUnbundled),
      dpoLaunch("bundled (dist/dpo.js)", dpo),
      image,
      go,
    ];
    // Start → registered with the full device list; the launches take turns so machine noise falls on
    // each alike. The last start of the image and of the Go plugin go on to the steady-state figures.
    const startTimes = new Map<Launch, number[]>(launches.map((l) => [l, []]));
    const steady = new Map<Launch, Plugin>();
    for (let i = 0; i < STARTS; i++) {
      for (const launch of launches) {
        const { plugin, ms } = await startToRegistered(kubelet, launch);
        running.push(plugin);
        startTimes.get(launch)!.push(ms);
        if (i === STARTS - 1 && (launch === image || launch === go)) {
          steady.set(launch, plugin);
        } else {
          await plugin.stop();
          running.splice(running.indexOf(plugin), 1);
        }
      }
    }
    await runSteadyState(kubelet, steady.get(image)!, steady.get(go)!, healthFile, results);

    const p50 = (launch: Launch): number => percentile(startTimes.get(launch)!, 50);
    const startRow = (launch: Launch): string => {
      const times = startTimes.get(launch)!;
      return `p50 ${p50(launch).toFixed(0)} ms, max ${Math.max(...times).toFixed(0)} ms`;
    };
    const dpoOnly = launches.filter((l) => l !== go && l !== image);
    results.unshift(
      ...dpoOnly.map((launch) => ({
        metric: `process start → registered, ${launch.name} (${STARTS} starts)`,
        value: `${startRow(launch)} (image / this: ${formatRatio(p50(image), p50(launch))})`,
        target: "(reported)",
        missed: [],
      })),
      {
        metric: `process start → registered, ${image.name} (${STARTS} starts)`,
        value: startRow(image),
        go: startRow(go),
        ratio: `p50 ${formatRatio(p50(image), p50(go))}`,
        target: "≤ 500 ms",
        missed: Math.max(...startTimes.get(image)!) <= 500 ? [] : ["≤ 500 ms"],
      },
    );
    results.push(preferred);
  } finally {
    for (const plugin of running) await plugin.stop();
    await kubelet.stop();
    rmSync(work, { recursive: true, force: true });
    // The empty files the Go plugin's Allocate made for its two devices.
    for (let i = 1; i <= GO_DEVICES; i++) {
      const file = join(GO_FAKE_DEVICE_DIR, `Dev-${i}`);
      const st = (() => {
        try {
          return lstatSync(file);
        } catch {
          return undefined;
        }
      })();
      if (st?.isFile() && st.size === 0) rmSync(file, { force: true });
    }
  }

  console.log(
    `\nbench-plugin: ${DEVICES} mock devices x ${REPLICAS} replicas (${DEVICES * REPLICAS} advertised); ` +
      `Go: the upstream sample device plugin (${GO_RESOURCE}, ${GO_DEVICES} devices)\n`,
  );
  console.log("| metric | dpo | Go sample plugin | dpo / Go | target | |");
  console.log("|---|---|---|---|---|---|");
  for (const r of results) {
    const status = r.missed.length === 0 ? "ok" : `MISSED (${r.missed.join(", ")})`;
    console.log(
      `| ${r.metric} | ${r.value} | ${r.go ?? "—"} | ${r.ratio ?? "—"} | ${r.target} | ${status} |`,
    );
  }
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  console.log(
    `\nnode ${process.version} ${NODE_FLAGS.join(" ")}, ${new Date().toISOString()}, load average ${load}`,
  );
}

/** The block sizes that split `total` calls into `blocks` turns. */
function blockSizes(total: number, blocks: number): number[] {
  return Array.from(
    { length: blocks },
    (_, i) => Math.floor(((i + 1) * total) / blocks) - Math.floor((i * total) / blocks),
  );
}

async function runSteadyState(
  kubelet: SimulatedDeviceManager,
  dpoPlugin: Plugin,
  goPlugin: Plugin,
  healthFile: string,
  results: Result[],
): Promise<void> {
  const connect = (resource: string): { client: DevicePluginClient; ids: string[]; r: SimulatedResource } => {
    const r = kubelet.resources.get(resource)!;
    const client = new DevicePluginClient(
      `unix://${join(kubelet.socketPath, "..", r.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    return { client, ids: r.devices.map((d) => d.ID), r };
  };
  const dpoSide = { ...connect(RESOURCE), pid: dpoPlugin.child.pid! };
  const goSide = { ...connect(GO_RESOURCE), pid: goPlugin.child.pid! };
  const sides = [dpoSide, goSide];

  // Idle: registered and serving, no call made yet; two seconds for start-up garbage to be collected.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const [dpoIdle, goIdle] = sides.map((s) => rssMiB(s.pid)) as [Rss, Rss];
  for (const s of sides) await allocateLatencies(s.client, s.ids, WARMUP, 1);

  // The two plugins take turns, block by block, so a burst of machine load falls on both alike.
  const turns = async (total: number, inFlight: number): Promise<[AllocateRun, AllocateRun]> => {
    const runs: [AllocateRun, AllocateRun] = [
      { latencies: [], seconds: 0 },
      { latencies: [], seconds: 0 },
    ];
    for (const size of blockSizes(total, BLOCKS)) {
      for (const [i, s] of sides.entries()) await allocateLatencies(s.client, s.ids, size, inFlight, runs[i]);
    }
    return runs;
  };
  const [dpoOne, goOne] = await turns(Math.floor(ALLOCATES / 2), 1);
  const [dpoSixteen, goSixteen] = await turns(ALLOCATES - Math.floor(ALLOCATES / 2), 16);
  const [dpoAfter, goAfter] = sides.map((s) => rssMiB(s.pid)) as [Rss, Rss];

  const oneMissed: string[] = [];
  if (percentile(dpoOne.latencies, 99) > 2) oneMissed.push("p99 ≤ 2 ms");
  if (percentile(dpoOne.latencies, 99) > 3 * percentile(goOne.latencies, 99)) oneMissed.push("p99 ratio ≤ 3");
  results.push({
    metric: `Allocate, 1 in flight (${dpoOne.latencies.length} calls each)`,
    value: formatAllocates(dpoOne),
    go: formatAllocates(goOne),
    ratio: allocateRatio(dpoOne, goOne),
    target: "p99 ≤ 2 ms, p99 ratio ≤ 3",
    missed: oneMissed,
  });
  results.push({
    metric: `Allocate, 16 in flight (${dpoSixteen.latencies.length} calls each)`,
    value: formatAllocates(dpoSixteen),
    go: formatAllocates(goSixteen),
    ratio: allocateRatio(dpoSixteen, goSixteen),
    target: "(reported)",
    missed: [],
  });

  // Health change → the kubelet's ListAndWatch stream shows it (the Go sample plugin has no health source).
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
      () => dpoSide.r.devices.find((d) => d.ID === "dev-3::0")?.health === want,
      { timeoutMs: 5_000, intervalMs: 1 },
    );
    latencies.push(performance.now() - written);
  }
  results.push({
    metric: `health change → ListAndWatch (${HEALTH_CHANGES} changes)`,
    value: `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms`,
    target: "p99 ≤ 100 ms",
    missed: percentile(latencies, 99) <= 100 ? [] : ["p99 ≤ 100 ms"],
  });
  results.push({
    metric: "RSS idle (registered, no call yet)",
    value: formatRss(dpoIdle),
    go: formatRss(goIdle),
    ratio: rssRatio(dpoIdle, goIdle),
    target: "≤ 2.2× Go, ≤ 75 MiB",
    missed: [
      ...(dpoIdle.total <= 2.2 * goIdle.total ? [] : ["≤ 2.2× Go"]),
      ...(dpoIdle.total <= 75 ? [] : ["≤ 75 MiB"]),
    ],
  });
  results.push({
    metric: `RSS after ${WARMUP + ALLOCATES} Allocates (${WARMUP} warm-up)`,
    value: formatRss(dpoAfter),
    go: formatRss(goAfter),
    ratio: rssRatio(dpoAfter, goAfter),
    target: "≤ 80 MiB",
    missed: dpoAfter.total <= 80 ? [] : ["≤ 80 MiB"],
  });
  for (const s of sides) s.client.close();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
