// `make bench-operator`: the built operator against a real control plane with 100 and 5000 KWOK nodes.
// No plugin processes: node capacity is patched the way the kubelet does it, and each node's
// DeviceNodeState is written by the plugin's own report writer (src/plugin-runtime/report), one per node
// in this process, each with a token bound to the node's plugin pod (tools/cluster/report-fleet.ts).
// Reports config create → DaemonSet, node capacity change → CR status (p50/p99), operator RSS, API
// requests of the operator and of all report writers while idle, the operator's status writes under a
// health flap storm (10% of the nodes flipping a device once a second), and the status object's size.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  type V1DaemonSet,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { AUDIT_STATUS_WRITES, parseAuditLog } from "../tools/cluster/audit.js";
import {
  auditLogPath,
  buildOrReuseBinaries,
  startCluster,
  type ClusterHandle,
} from "../tools/cluster/cluster.js";
import {
  createMemoryCgroup,
  deploymentMemoryLimit,
  deploymentNodeFlags,
  deploymentRuntimeEnv,
  inCgroup,
  memoryBytes,
  type MemoryCgroup,
} from "./memory-cgroup.js";
import { growToNodes } from "./support.js";
import { kubeRequest } from "../src/kube/request.js";
import {
  freePort,
  startTcpRelay,
  type RelayedConnection,
  type TcpRelay,
} from "../tools/cluster/tcp-relay.js";
import { ReportFleet } from "../tools/cluster/report-fleet.js";
import { loadKubeconfig, type ApiCredentials } from "../src/plugin-runtime/report/api-client.js";
import { LABEL_REVISION } from "../src/operator/render/names.js";
import { maxInWindow, minGap } from "../tools/stats.js";
import { waitFor } from "../tools/cluster/wait.js";
import { percentile } from "../tools/stats.js";

const repo = join(import.meta.dirname, "..");
const dpo = join(repo, "dist", "dpo.js");
const NODE_COUNTS = (process.env["BENCH_NODES"] ?? "100,5000").split(",").map(Number);
const CREATES = Number(process.env["BENCH_CREATES"] ?? 20);
const CAPACITY_CHANGES = Number(process.env["BENCH_CAPACITY_CHANGES"] ?? 40);
const IDLE_SECONDS = Number(process.env["BENCH_IDLE_SECONDS"] ?? 60);
/** The flap storm: this share of the nodes flips one device's health once a second, for this long. */
const FLAP_SHARE = Number(process.env["BENCH_FLAP_SHARE"] ?? 0.1);
const FLAP_SECONDS = Number(process.env["BENCH_FLAP_SECONDS"] ?? 60);
const DEVICES_PER_NODE = 4;
/**
 * The simulated kubelets beyond 1000 nodes. At 5000 nodes with a kubelet's own 40 s leases (renewed
 * every 10 s) and conditions refreshed every 10–12 s, KWOK (4 at a time) falls behind at about 60
 * writes/s of the 800/s needed, and half the nodes go NotReady. With leases of 160 s (renewed every
 * 40 s) it renewed about 35/s of the 125/s needed on a machine shared with other work, and 482 nodes
 * went NotReady in 12 min. Leases of 10 min (renewed every 2.5 min, about 33/s) and conditions every
 * 2–2.4 min (a kubelet reports unchanged status every 5 min) keep them Ready. The operator watches no
 * Lease; the Node updates it sees stay more frequent than a kubelet's.
 */
const PACING = { nodeLeaseDurationSeconds: 600, heartbeatIntervalMs: 120_000, parallelism: 16 };
/** The operator's status coalescing interval (statusWriteIntervalMs): at most one write per config in it. */
const STATUS_WRITE_INTERVAL_MS = 500;
const DEPLOYMENT = readFileSync(
  join(import.meta.dirname, "..", "config", "manager", "deployment.yaml"),
  "utf8",
);
/** The Node flags the operator Deployment starts `dpo operator` with (config/manager/deployment.yaml). */
const NODE_FLAGS =
  process.env["BENCH_NODE_FLAGS"] === undefined
    ? deploymentNodeFlags(DEPLOYMENT)
    : process.env["BENCH_NODE_FLAGS"].split(" ").filter(Boolean);
const RESOURCE = "bench.example/dev";
/**
 * The operator runs under this memory limit (a memory cgroup), as its pod would: the Deployment's own
 * limit by default, `none` for none.
 */
const MEMORY_LIMIT =
  process.env["BENCH_OPERATOR_MEMORY_LIMIT"] ?? deploymentMemoryLimit(DEPLOYMENT) ?? "none";

function operatorMemoryLimit(nodeCount: number): MemoryCgroup | { reason: string } {
  if (MEMORY_LIMIT === "none") return { reason: "BENCH_OPERATOR_MEMORY_LIMIT=none" };
  return createMemoryCgroup(`dpo-bench-operator-${process.pid}-${nodeCount}`, memoryBytes(MEMORY_LIMIT));
}
const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const run = promisify(execFile);

/** CPU seconds (user + system) the process has used, from /proc (clock ticks are 100 per second on Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * A TCP relay in front of the API server that counts the connections made through it: every new
 * connection is a TLS handshake, so with keep-alive an idle operator should open none.
 */
async function connectionCountingRelay(
  server: URL,
): Promise<{ url: string; connections: () => number; history: TcpRelay["history"]; close(): void }> {
  const relay = await startTcpRelay([{ host: server.hostname, port: Number(server.port) }]);
  return {
    url: `https://127.0.0.1:${relay.port}`,
    connections: () => relay.connections()[0] ?? 0,
    history: () => relay.history(),
    close: () => relay.close(),
  };
}

/**
 * What happened to the relay's connections between `from` and `to` (Date.now()): those opened, and
 * those that ended with the side that ended them, e.g. "opened +12.3 s; closed by server +12.2 s (open 301 s)".
 */
function connectionEvents(history: readonly RelayedConnection[], from: number, to: number): string {
  const events: { at: number; text: string }[] = [];
  for (const c of history) {
    if (c.openedAt >= from && c.openedAt <= to) events.push({ at: c.openedAt, text: "opened" });
    if (c.closedAt !== undefined && c.closedAt >= from && c.closedAt <= to) {
      const open = ((c.closedAt - c.openedAt) / 1000).toFixed(1);
      events.push({ at: c.closedAt, text: `closed by ${c.closedBy} (open ${open} s)` });
    }
  }
  return events
    .sort((a, b) => a.at - b.at)
    .map((e) => `${e.text} +${((e.at - from) / 1000).toFixed(1)} s`)
    .join("; ");
}

/**
 * Where the operator's RSS is: its V8 heap as its /metrics show it (used and total), and from the kernel
 * (/proc/<pid>/smaps_rollup) the anonymous memory against the file-backed pages (the node binary, ICU).
 */
async function heapFigures(port: number, pid: number): Promise<string> {
  const text = await scrapeMetrics(port);
  const mib = (name: string): string => (sumOfSeries(seriesIn(text, name)) / 2 ** 20).toFixed(1);
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kib = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)?.[1] ?? NaN);
  const anonymous = kib("Anonymous") / 1024;
  return (
    `heap ${mib("nodejs_heap_size_used_bytes")} MiB used of ${mib("nodejs_heap_size_total_bytes")} MiB, ` +
    `external ${mib("nodejs_external_memory_bytes")} MiB; anonymous ${anonymous.toFixed(1)} MiB, ` +
    `file-backed ${(kib("Rss") / 1024 - anonymous).toFixed(1)} MiB`
  );
}

/** The series of a counter whose value changed between two scrapes, as `labels +delta`. */
function seriesDelta(before: Map<string, number>, after: Map<string, number>): string {
  return [...after]
    .map(([labels, value]) => [labels, value - (before.get(labels) ?? 0)] as const)
    .filter(([, delta]) => delta > 0)
    .map(([labels, delta]) => `${labels} +${delta}`)
    .join(", ");
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
}

/** The operator's /metrics, as text. */
async function scrapeMetrics(port: number): Promise<string> {
  const { get } = await import("node:http");
  return new Promise<string>((resolve, reject) =>
    get(`http://127.0.0.1:${port}/metrics`, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve(body));
    }).on("error", reject),
  );
}

/** Every series of `name` in a /metrics text, by its label set. */
function seriesIn(text: string, name: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) {
      const space = line.lastIndexOf(" ");
      series.set(line.slice(name.length, space) || "{}", Number(line.slice(space + 1)));
    }
  }
  return series;
}

/** The sum of a metric's series. */
function sumOfSeries(series: Map<string, number>): number {
  let sum = 0;
  for (const value of series.values()) sum += value;
  return sum;
}

/** Every series of `name` on the operator's /metrics, by its label set. */
async function metricSeries(port: number, name: string): Promise<Map<string, number>> {
  return seriesIn(await scrapeMetrics(port), name);
}

/** The sum of every series of `name` on the operator's /metrics. */
async function metric(port: number, name: string): Promise<number> {
  return sumOfSeries(await metricSeries(port, name));
}

interface Row {
  metric: string;
  value: string;
  target: string;
  ok: boolean;
}

async function benchAt(nodeCount: number, binDir: string, rows: Row[]): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), `dpo-bench-op-${nodeCount}-`));
  let cluster: ClusterHandle | undefined;
  let operator: ChildProcess | undefined;
  let memoryLimit: MemoryCgroup | { reason: string } | undefined;
  let relay: Awaited<ReturnType<typeof connectionCountingRelay>> | undefined;
  let fleet: ReportFleet | undefined;
  let logs = "";
  const operatorLog = (): string => logs;
  try {
    // Beyond a thousand nodes KWOK is paced (see PACING) or its leases and heartbeats fall behind.
    cluster = await startCluster({
      nodes: 3,
      stateDir,
      binDir,
      timeoutMs: 180_000,
      auditPolicy: AUDIT_STATUS_WRITES,
      ...(nodeCount > 1000 ? { pacing: PACING } : {}),
    });
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const kubectl = (args: string[]) =>
      run(join(binDir, "kubectl"), ["--kubeconfig", cluster!.kubeconfigPath, ...args], {
        maxBuffer: 64 << 20,
      });

    // The remaining nodes, created the way the test cluster creates its own.
    const createStarted = Date.now();
    await growToNodes(core, 3, nodeCount);
    console.error(
      `bench-operator: ${nodeCount} nodes Ready and untainted in ${Date.now() - createStarted} ms`,
    );

    await kubectl(["apply", "--server-side", "-k", join(repo, "config", "crd")]);
    await kubectl([
      "wait",
      "--for=condition=Established",
      "crd/devicepluginconfigs.dpo.dev",
      "crd/devicenodestates.dpo.dev",
    ]);
    await kubectl(["create", "namespace", "dpo-system"]);
    await kubectl(["create", "serviceaccount", "dpo-plugin", "-n", "dpo-system"]);
    // The conversion webhook on, as the Deployment runs it; the API server calls it on 127.0.0.1.
    const webhookPort = await freePort();
    await kubectl([
      "patch",
      "crd/devicepluginconfigs.dpo.dev",
      "--type=json",
      "-p",
      JSON.stringify([
        {
          op: "replace",
          path: "/spec/conversion/webhook/clientConfig",
          value: { url: `https://127.0.0.1:${webhookPort}/convert` },
        },
      ]),
    ]);

    // The operator reaches the API server through a relay that counts its connections, and runs with
    // leader election on, as the Deployment runs it: Lease renewals are its steady traffic.
    relay = await connectionCountingRelay(new URL(kc.getCurrentCluster()!.server));
    const relayed = new KubeConfig();
    relayed.loadFromString(
      readFileSync(cluster.kubeconfigPath, "utf8").replace(kc.getCurrentCluster()!.server, relay.url),
    );
    const operatorKubeconfig = join(stateDir, "operator-relayed.kubeconfig");
    writeFileSync(operatorKubeconfig, relayed.exportConfig(), { mode: 0o600 });
    const operatorArgs = [
      ...NODE_FLAGS,
      dpo,
      "operator",
      "--leader-elect=true",
      "--leader-election-id=dpo-bench",
      "--kubeconfig",
      operatorKubeconfig,
      "--metrics-addr",
      "127.0.0.1:0",
      "--health-addr",
      "0",
      `--webhook-addr=127.0.0.1:${webhookPort}`,
      "--webhook-hosts=127.0.0.1",
    ];
    memoryLimit = operatorMemoryLimit(nodeCount);
    const [command, args] =
      "dir" in memoryLimit
        ? inCgroup(memoryLimit, process.execPath, operatorArgs)
        : [process.execPath, operatorArgs];
    operator = spawn(command, args, {
      stdio: ["ignore", "pipe", "inherit"],
      env: {
        ...process.env,
        // As the Deployment sets them (glibc's malloc tuning), unless the caller set them itself.
        ...Object.fromEntries(
          Object.entries(deploymentRuntimeEnv(DEPLOYMENT)).filter(
            ([name]) => process.env[name] === undefined,
          ),
        ),
        DPO_LOG_LEVEL: process.env["BENCH_OPERATOR_LOG_LEVEL"] ?? "info",
      },
    });
    logs = "";
    operator.once("exit", (code, signal) => {
      const oom = memoryLimit !== undefined && "dir" in memoryLimit ? memoryLimit.oomKills() : 0;
      console.error(
        `bench-operator: the operator exited (code ${code}, signal ${signal}${oom > 0 ? ", killed for going over its memory limit" : ""})`,
      );
    });
    rows.push({
      metric: `${nodeCount} nodes: operator memory limit`,
      value:
        "dir" in memoryLimit
          ? `${memoryLimit.limitBytes / 2 ** 20} MiB, a memory cgroup (Node sizes its heap from it, as in the pod)`
          : `none: ${memoryLimit.reason}`,
      target: "(reported)",
      ok: true,
    });
    operator
      .stdout!.setEncoding("utf8")
      .on(
        "data",
        (d: string) => (logs = (logs + d).slice(process.env["BENCH_VERBOSE"] ? -50_000_000 : -100_000)),
      );
    const port = await waitFor("the operator's metrics port", () => {
      const m = /"ports":\[(\d+)/.exec(logs);
      return m ? Number(m[1]) : undefined;
    });

    // 1. Config create → DaemonSet exists. The API server sets a custom resource's storage up on its
    // first write (about 2 s here): the cluster's cost, not the operator's, so a throwaway config goes first.
    // The operator has just patched the CRD (its conversion webhook's caBundle): the API server swaps the
    // resource's storage, and a request that reaches the old one is answered 503 "apiserver is shutting
    // down" with Retry-After: 1 (apiextensions-apiserver drains it). client-go retries those; so does this.
    const warmupStarted = performance.now();
    const warmup = await waitFor(
      "the first DevicePluginConfig write (retried on 503 while the CRD's storage is swapped)",
      async (observe) => {
        try {
          await custom.createClusterCustomObject({
            ...GROUP,
            body: {
              apiVersion: "dpo.dev/v1beta1",
              kind: "DevicePluginConfig",
              metadata: { name: "bench-warmup" },
              spec: {
                resourceName: "warmup.example/dev",
                backend: { type: "Mock", mock: { devices: 1 } },
                nodeSelector: { "bench.example/none": "true" },
              },
            },
          });
          return { failed: undefined as Error | undefined };
        } catch (error) {
          // waitFor retries what a probe throws: any other error ends the wait here and is thrown below.
          if ((error as { code?: number }).code !== 503) {
            return { failed: error instanceof Error ? error : new Error(String(error)) };
          }
          observe(String(error).split("\n")[0]);
          return false;
        }
      },
      { timeoutMs: 30_000, intervalMs: 1_000 },
    );
    if (warmup.failed !== undefined) throw warmup.failed;
    console.error(
      `bench-operator: first DevicePluginConfig write took ${(performance.now() - warmupStarted).toFixed(0)} ms`,
    );
    await custom.deleteClusterCustomObject({ ...GROUP, name: "bench-warmup" });
    const createLatencies: number[] = [];
    for (let i = 0; i < CREATES; i++) {
      const name = `bench-create-${i}`;
      let resolveSeen: (t: number) => void = () => undefined;
      const seen = new Promise<number>((resolve) => (resolveSeen = resolve));
      const watch = await new Watch(kc).watch(
        "/apis/apps/v1/namespaces/dpo-system/daemonsets",
        { labelSelector: `dpo.dev/config=${name}` },
        (type) => {
          if (type === "ADDED") resolveSeen(performance.now());
        },
        () => undefined,
      );
      const t0 = performance.now();
      await custom.createClusterCustomObject({
        ...GROUP,
        body: {
          apiVersion: "dpo.dev/v1beta1",
          kind: "DevicePluginConfig",
          metadata: { name },
          spec: {
            resourceName: `create-${i}.example/dev`,
            backend: { type: "Mock", mock: { devices: 1 } },
            nodeSelector: { "bench.example/none": "true" },
          },
        },
      });
      const created = performance.now();
      createLatencies.push((await seen) - t0);
      if (process.env["BENCH_VERBOSE"]) {
        const total = (createLatencies.at(-1) ?? 0).toFixed(0);
        console.error(`create ${i}: ${total} ms (the create call ${(created - t0).toFixed(0)} ms)`);
      }
      watch.abort();
    }
    rows.push({
      metric: `${nodeCount} nodes: config create → DaemonSet exists (${CREATES} configs)`,
      value: `p50 ${percentile(createLatencies, 50).toFixed(0)} ms, p99 ${percentile(createLatencies, 99).toFixed(0)} ms`,
      target: nodeCount >= 1000 ? "p99 ≤ 2 s" : "p99 ≤ 1 s",
      ok: percentile(createLatencies, 99) <= (nodeCount >= 1000 ? 2_000 : 1_000),
    });

    // 2. Node capacity change → CR status. One config targeting every node.
    await custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: "bench-capacity" },
        spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 4 } } },
      },
    });
    const nodeNames = (await core.listNode()).items.map((n) => n.metadata!.name!);
    let total = 0;
    for (let i = 0; i < nodeNames.length; i += 50) {
      await Promise.all(
        nodeNames
          .slice(i, i + 50)
          .map((name) =>
            core.patchNodeStatus(
              { name, body: { status: { capacity: { [RESOURCE]: "4" }, allocatable: { [RESOURCE]: "4" } } } },
              setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
            ),
          ),
      );
    }
    total = nodeNames.length * 4;
    const capacityOf = async (): Promise<number | undefined> => {
      const c = (await custom.getClusterCustomObject({ ...GROUP, name: "bench-capacity" })) as {
        status?: { devices?: { capacity?: number } };
      };
      return c.status?.devices?.capacity;
    };
    await waitFor(
      `status to count ${total} devices`,
      async (observe) => {
        const cap = await capacityOf();
        observe(cap);
        return cap === total;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );

    // The plugins: the DaemonSet's pods Running on every node (KWOK), then a report writer per node with
    // a token bound to that pod, under the plugin's Role and the own-node admission policy (config/).
    await waitFor(
      "the DaemonSet pods to settle",
      async (observe) => {
        const ds = await capacityDaemonSet(apps);
        observe(`${ds.status?.numberReady}/${ds.status?.desiredNumberScheduled} ready`);
        return ds.status?.numberReady === nodeCount;
      },
      { timeoutMs: 600_000, intervalMs: 2_000 },
    );
    const fleetStarted = Date.now();
    fleet = await startReportFleet(kc, cluster.kubeconfigPath, kubectl, core, apps);
    const fleetStart = Date.now() - fleetStarted;
    await waitFor(
      `status to show ${nodeCount} nodes ready`,
      async (observe) => {
        const c = (await custom.getClusterCustomObject({ ...GROUP, name: "bench-capacity" })) as {
          status?: { nodes?: { ready?: number; desired?: number }; problemsOmitted?: number };
        };
        observe({ nodes: c.status?.nodes, problemsOmitted: c.status?.problemsOmitted });
        return c.status?.nodes?.ready === nodeCount;
      },
      { timeoutMs: 300_000, intervalMs: 1_000 },
    );
    rows.push({
      metric: `${nodeCount} nodes: report writers started (pod-bound tokens, first reports written)`,
      value: `${fleet.nodes.length} writers, ${fleet.requests()} requests, ${fleet.failures()} failed, in ${(fleetStart / 1000).toFixed(0)} s`,
      target: "(reported)",
      ok: true,
    });

    const changeLatencies: number[] = [];
    const perNode = new Map<string, number>();
    for (let i = 0; i < CAPACITY_CHANGES; i++) {
      const node = nodeNames[(i * 7919) % nodeNames.length]!;
      const current = perNode.get(node) ?? 4;
      const next = current === 4 ? 5 : 4;
      const want = total + (next - current);
      perNode.set(node, next);
      let resolveSeen: (t: number) => void = () => undefined;
      const seen = new Promise<number>((resolve) => (resolveSeen = resolve));
      const watch = await new Watch(kc).watch(
        "/apis/dpo.dev/v1beta1/devicepluginconfigs",
        { fieldSelector: "metadata.name=bench-capacity" },
        (_type, obj: { status?: { devices?: { capacity?: number } } }) => {
          if (obj.status?.devices?.capacity === want) resolveSeen(performance.now());
        },
        () => undefined,
      );
      const t0 = performance.now();
      await core.patchNodeStatus(
        {
          name: node,
          body: {
            status: { capacity: { [RESOURCE]: String(next) }, allocatable: { [RESOURCE]: String(next) } },
          },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      changeLatencies.push((await seen) - t0);
      watch.abort();
      total = want;
      // Changes are spaced beyond the 500 ms status coalescing window, as kubelet updates of one node are.
      await new Promise((r) => setTimeout(r, 600));
    }
    // Up to 1000 nodes within 1 s and 2 s; beyond, the 5 s.
    const target = nodeCount > 1000 ? 5_000 : nodeCount >= 1000 ? 2_000 : 1_000;
    rows.push({
      metric: `${nodeCount} nodes: node capacity change → CR status (${CAPACITY_CHANGES} changes)`,
      value: `p50 ${percentile(changeLatencies, 50).toFixed(0)} ms, p99 ${percentile(changeLatencies, 99).toFixed(0)} ms`,
      target: `p99 ≤ ${target / 1000} s`,
      ok: percentile(changeLatencies, 99) <= target,
    });

    // 3. Idle: KWOK keeps heartbeating every node; nothing the operator watches changes in substance,
    // and no plugin has news: neither the operator nor any report writer should write.
    await new Promise((r) => setTimeout(r, 3_000));
    const requestSeriesBefore = await metricSeries(port, "dpo_operator_api_requests_total");
    const connectionsBefore = relay.connections();
    const idleFrom = Date.now();
    const cpuBefore = cpuSeconds(operator.pid!);
    const writesBefore =
      (await metric(port, "dpo_operator_status_writes_total")) +
      (await metric(port, "dpo_operator_applies_total"));
    const fleetBefore = fleet.requests();
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const fleetIdle = fleet.requests() - fleetBefore;
    rows.push({
      metric: `${nodeCount} nodes: API requests of all ${fleet.nodes.length} report writers while idle (${IDLE_SECONDS} s)`,
      value: `${((fleetIdle / IDLE_SECONDS) * 60).toFixed(0)} per minute`,
      target: "0",
      ok: fleetIdle === 0,
    });
    const requestSeriesAfter = await metricSeries(port, "dpo_operator_api_requests_total");
    const requests = sumOfSeries(requestSeriesAfter) - sumOfSeries(requestSeriesBefore);
    const idleRequests = seriesDelta(requestSeriesBefore, requestSeriesAfter);
    const connections = relay.connections() - connectionsBefore;
    const idleConnections = connectionEvents(relay.history(), idleFrom, Date.now());
    const cpu = cpuSeconds(operator.pid!) - cpuBefore;
    const writes =
      (await metric(port, "dpo_operator_status_writes_total")) +
      (await metric(port, "dpo_operator_applies_total")) -
      writesBefore;
    rows.push({
      metric: `${nodeCount} nodes: API requests while idle (${IDLE_SECONDS} s, heartbeats on)`,
      value: `${(requests / IDLE_SECONDS).toFixed(2)}/s, ${writes} writes (${idleRequests || "none"})`,
      target: "0 writes",
      ok: writes === 0,
    });
    rows.push({
      metric: `${nodeCount} nodes: new API connections (TLS handshakes) and CPU while idle, leader election on`,
      value: `${connections} connections, ${((cpu / IDLE_SECONDS) * 100).toFixed(2)}% of a core (${idleConnections || "no connection opened or closed"})`,
      target: "0 handshakes",
      ok: connections === 0,
    });
    const reconcileSeconds = await metric(port, "dpo_operator_reconcile_duration_seconds_sum");
    const reconciles = await metric(port, "dpo_operator_reconcile_duration_seconds_count");
    rows.push({
      metric: `${nodeCount} nodes: reconcile duration, mean of ${reconciles}`,
      value: `${((reconcileSeconds / Math.max(reconciles, 1)) * 1000).toFixed(1)} ms`,
      target: "(reported)",
      ok: true,
    });
    const rss = rssMiB(operator.pid!);
    rows.push({
      metric: `${nodeCount} nodes: operator RSS`,
      value: `${rss.toFixed(1)} MiB (${await heapFigures(port, operator.pid!)})`,
      target: "≤ 200 MiB",
      ok: rss <= 200,
    });

    // 5. Health flap storm: FLAP_SHARE of the nodes flip one device's health once a second, spread over
    // the second, through their report writers. Every status change of the config is seen on a watch.
    await flapStorm(nodeCount, fleet, kc, custom, port, auditLogPath(stateDir), rows);
    const peakRss = rssMiB(operator.pid!);
    rows.push({
      metric: `${nodeCount} nodes: operator RSS after the flap storm`,
      value: `${peakRss.toFixed(1)} MiB (${await heapFigures(port, operator.pid!)})`,
      target: "≤ 200 MiB",
      ok: peakRss <= 200,
    });
    const stored = await kubeRequest<{ status?: unknown; metadata?: { managedFields?: unknown } }>(kc, {
      method: "GET",
      path: "/apis/dpo.dev/v1beta1/devicepluginconfigs/bench-capacity",
    });
    const statusBytes = Buffer.byteLength(JSON.stringify(stored.status ?? {}));
    const objectBytes = Buffer.byteLength(JSON.stringify(stored));
    const problems = (stored.status as { problems?: unknown[]; problemsOmitted?: number } | undefined) ?? {};
    rows.push({
      metric: `${nodeCount} nodes: CR status size (problems listed + omitted)`,
      value: `${statusBytes} B status, ${objectBytes} B object; ${problems.problems?.length ?? 0} + ${problems.problemsOmitted ?? 0}`,
      target: "bounded (≤ 20 problems listed)",
      ok: (problems.problems?.length ?? 0) <= 20,
    });

    // 4. Conversion: CONVERSION_OBJECTS configs listed through the API server as v1beta1 (stored, no
    // conversion) and as v1alpha1 (every object through the operator's webhook), taking turns.
    // At the first node count only: conversion does not depend on nodes, while reconciling a thousand
    // configs does (every reconcile reads every node: minutes at 1000 nodes).
    if (nodeCount === NODE_COUNTS[0]) {
      await benchConversion(kc, port, rows);
    }
  } catch (err) {
    console.error(
      `bench-operator failed at ${nodeCount} nodes (${new Date().toISOString()}): ${String(err)}\noperator log tail:\n${operatorLog().slice(-4000)}`,
    );
    throw err;
  } finally {
    if (process.env["BENCH_VERBOSE"])
      writeFileSync(join(tmpdir(), `dpo-bench-operator-${nodeCount}.log`), operatorLog());
    await fleet?.stop();
    operator?.kill("SIGTERM");
    if (operator !== undefined && operator.exitCode === null && operator.signalCode === null)
      await new Promise((resolve) => operator!.once("exit", resolve));
    if (memoryLimit !== undefined && "dir" in memoryLimit) memoryLimit.remove();
    relay?.close();
    await cluster?.stop();
    // BENCH_KEEP_STATE keeps the control plane's logs (and audit log) for a look after the run.
    if (process.env["BENCH_KEEP_STATE"]) console.error(`bench-operator: state kept in ${stateDir}`);
    else rmSync(stateDir, { recursive: true, force: true });
  }
}

type Kubectl = (args: string[]) => Promise<{ stdout: string }>;

/** The capacity config's DaemonSet, named after its plugin revision. */
async function capacityDaemonSet(apps: AppsV1Api): Promise<V1DaemonSet> {
  const list = await apps.listNamespacedDaemonSet({
    namespace: "dpo-system",
    labelSelector: "dpo.dev/config=bench-capacity",
  });
  if (list.items.length !== 1) throw new Error(`${list.items.length} DaemonSets of bench-capacity`);
  return list.items[0]!;
}

/**
 * A report writer per node of the capacity config, as its plugin pods would run them: each with a
 * ServiceAccount token of dpo-plugin bound to the node's plugin pod (so it carries the node's name),
 * under the plugin's Role and the admission policy that lets a plugin write only its own node's report.
 */
async function startReportFleet(
  kc: KubeConfig,
  kubeconfigPath: string,
  kubectl: Kubectl,
  core: CoreV1Api,
  apps: AppsV1Api,
): Promise<ReportFleet> {
  await kubectl([
    "apply",
    "--server-side",
    "-f",
    join(repo, "config", "rbac", "plugin_role.yaml"),
    "-f",
    join(repo, "config", "rbac", "plugin_role_binding.yaml"),
  ]);
  await kubectl(["apply", "--server-side", "-k", join(repo, "config", "policy")]);
  const config = (
    await kubeRequest<{ metadata: { uid: string } }>(kc, {
      method: "GET",
      path: "/apis/dpo.dev/v1beta1/devicepluginconfigs/bench-capacity",
    })
  ).metadata;
  const ds = await capacityDaemonSet(apps);
  const pods = await core.listNamespacedPod({
    namespace: "dpo-system",
    labelSelector: "dpo.dev/config=bench-capacity",
  });
  const podByNode = new Map<string, { name: string; uid: string }>();
  for (const pod of pods.items) {
    if (pod.spec?.nodeName && !pod.metadata?.deletionTimestamp)
      podByNode.set(pod.spec.nodeName, { name: pod.metadata!.name!, uid: pod.metadata!.uid! });
  }
  const base = await loadKubeconfig(kubeconfigPath);
  const credentials = new Map<string, ApiCredentials>();
  const entries = [...podByNode].sort(([a], [b]) => (a < b ? -1 : 1));
  for (let i = 0; i < entries.length; i += 50) {
    await Promise.all(
      entries.slice(i, i + 50).map(async ([node, pod]) => {
        const answer = await core.createNamespacedServiceAccountToken({
          name: "dpo-plugin",
          namespace: "dpo-system",
          body: {
            spec: {
              audiences: [],
              expirationSeconds: 7200,
              boundObjectRef: { apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid },
            },
          },
        });
        credentials.set(node, {
          server: base.server,
          ...(base.ca === undefined ? {} : { ca: base.ca }),
          token: answer.status!.token,
        });
      }),
    );
  }
  const fleet = new ReportFleet({
    namespace: "dpo-system",
    config: { name: "bench-capacity", uid: config.uid },
    resourceName: RESOURCE,
    revision: ds.metadata?.labels?.[LABEL_REVISION],
    devices: DEVICES_PER_NODE,
    credentials,
  });
  await fleet.start(200, 600_000);
  return fleet;
}

/**
 * FLAP_SHARE of the nodes flip device 0 once a second for FLAP_SECONDS, spread evenly over each second.
 * Counts the operator's status writes of the config (watch events with a new resourceVersion, and its
 * own metric) and how fast the status is right again afterwards.
 */
async function flapStorm(
  nodeCount: number,
  fleet: ReportFleet,
  kc: KubeConfig,
  custom: CustomObjectsApi,
  metricsPort: number,
  auditLog: string,
  rows: Row[],
): Promise<void> {
  const all = fleet.nodes;
  const step = Math.max(1, Math.round(1 / FLAP_SHARE));
  const flappers = all.filter((_, i) => i % step === 0).slice(0, Math.ceil(all.length * FLAP_SHARE));
  const changes: number[] = [];
  let lastVersion: string | undefined;
  const watch = await new Watch(kc).watch(
    "/apis/dpo.dev/v1beta1/devicepluginconfigs",
    { fieldSelector: "metadata.name=bench-capacity" },
    (type, obj: { metadata?: { resourceVersion?: string } }) => {
      const rv = obj.metadata?.resourceVersion;
      if (type === "MODIFIED" && rv !== lastVersion) changes.push(performance.now());
      lastVersion = rv;
    },
    () => undefined,
  );
  const writesBefore = await metric(metricsPort, "dpo_operator_status_writes_total");
  const requestsBefore = fleet.requests();
  const failuresBefore = fleet.failures();
  const started = performance.now();
  const startedWallMs = Date.now();
  await Promise.all(
    flappers.map(
      (node, j) =>
        new Promise<void>((resolve) => {
          let flips = 0;
          const flip = (): void => {
            fleet.flip(node);
            if (++flips >= FLAP_SECONDS) {
              clearInterval(timer);
              resolve();
            }
          };
          let timer: NodeJS.Timeout | undefined;
          setTimeout(
            () => {
              flip();
              if (flips < FLAP_SECONDS) timer = setInterval(flip, 1_000);
            },
            Math.floor((j * 1_000) / flappers.length),
          );
        }),
    ),
  );
  const stormEnded = performance.now();
  const stormMs = stormEnded - started;
  await waitFor(
    "the writers and the status to show the devices after the storm",
    async (observe) => {
      const c = (await custom.getClusterCustomObject({ ...GROUP, name: "bench-capacity" })) as {
        status?: { devices?: { unhealthy?: number } };
      };
      const want = fleet.unhealthy();
      observe({ status: c.status?.devices?.unhealthy, want, writersSettled: fleet.settled() });
      return fleet.settled() && c.status?.devices?.unhealthy === want;
    },
    { timeoutMs: 120_000, intervalMs: 100 },
  );
  const settledMs = performance.now() - stormEnded;
  // A last coalesced write may still be under way; it belongs to the storm.
  await new Promise((r) => setTimeout(r, 2 * STATUS_WRITE_INTERVAL_MS));
  watch.abort();
  const endedWallMs = Date.now();
  const writes = (await metric(metricsPort, "dpo_operator_status_writes_total")) - writesBefore;
  // The same writes as the API server timed them: arrival of each, and from one's answer to the next.
  const audited = parseAuditLog(readFileSync(auditLog, "utf8"))
    .filter((r) => r.name === "bench-capacity" && r.subresource === "status")
    .filter((r) => r.receivedMs >= startedWallMs && r.receivedMs <= endedWallMs)
    .sort((a, b) => a.receivedMs - b.receivedMs);
  const arrivals = audited.map((r) => r.receivedMs);
  const answerToNext = audited.slice(1).map((r, i) => r.receivedMs - audited[i]!.stageMs);
  const flips = flappers.length * FLAP_SECONDS;
  rows.push({
    metric: `${nodeCount} nodes: flap storm, ${flappers.length} nodes × 1 flip/s for ${FLAP_SECONDS} s: report writers' requests`,
    value: `${fleet.requests() - requestsBefore} requests for ${flips} flips, ${fleet.failures() - failuresBefore} failed`,
    target: "(reported)",
    ok: true,
  });
  const perWindow = maxInWindow(changes, STATUS_WRITE_INTERVAL_MS);
  const gap = minGap(changes);
  rows.push({
    metric: `${nodeCount} nodes: flap storm: operator status writes of the config (${(stormMs / 1000).toFixed(0)} s storm)`,
    value: `${writes} writes (${changes.length} seen on a watch); max ${perWindow} in any ${STATUS_WRITE_INTERVAL_MS} ms, closest two ${Number.isFinite(gap) ? gap.toFixed(0) : "-"} ms apart`,
    target: `(a watch's delivery)`,
    ok: true,
  });
  const auditedPerWindow = maxInWindow(arrivals, STATUS_WRITE_INTERVAL_MS);
  const auditedGap = minGap(arrivals);
  const fmt = (ms: number): string => (Number.isFinite(ms) ? ms.toFixed(1) : "-");
  rows.push({
    metric: `${nodeCount} nodes: flap storm: the same status writes in the API server's audit log`,
    value:
      `${audited.length} writes (${audited.filter((r) => r.code !== undefined && r.code >= 400).length} refused); ` +
      `max ${auditedPerWindow} arriving in any ${STATUS_WRITE_INTERVAL_MS} ms, closest two arrived ${fmt(auditedGap)} ms apart, ` +
      `least from an answer to the next write ${fmt(Math.min(...answerToNext))} ms`,
    target: `≤ 1 per ${STATUS_WRITE_INTERVAL_MS} ms`,
    ok: audited.length > 0 && auditedPerWindow <= 1,
  });
  rows.push({
    metric: `${nodeCount} nodes: flap storm end → status right again`,
    value: `${settledMs.toFixed(0)} ms`,
    target: "(reported)",
    ok: true,
  });
}

const CONVERSION_OBJECTS = Number(process.env["BENCH_CONVERSION_OBJECTS"] ?? 1000);
const CONVERSION_LISTS = Number(process.env["BENCH_CONVERSION_LISTS"] ?? 20);

async function benchConversion(kc: KubeConfig, metricsPort: number, rows: Row[]): Promise<void> {
  if (CONVERSION_OBJECTS <= 0) return;
  const created = Date.now();
  for (let start = 0; start < CONVERSION_OBJECTS; start += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, CONVERSION_OBJECTS - start) }, (_, i) =>
        kubeRequest(kc, {
          method: "POST",
          path: "/apis/dpo.dev/v1beta1/devicepluginconfigs",
          body: {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            metadata: { name: `conv-${start + i}` },
            spec: {
              resourceName: `conv.example/dev-${start + i}`,
              backend: { type: "Mock", mock: { devices: 4 } },
              sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true },
              topology: { allocationPolicy: "Packed" },
              nodeSelector: { "conv.example/none": "true" },
            },
          },
        }),
      ),
    );
  }
  // Let the operator reconcile them (a DaemonSet and ConfigMap each) before measuring reads.
  await waitFor(
    "the operator to reconcile the conversion configs",
    async (observe) => {
      const depth = await metric(metricsPort, "dpo_operator_queue_depth");
      const reconciles = await metric(metricsPort, "dpo_operator_reconciles_total");
      observe({ depth, reconciles });
      return depth === 0 && reconciles >= CONVERSION_OBJECTS;
    },
    { timeoutMs: 600_000, intervalMs: 2_000 },
  );
  console.error(
    `bench-operator: ${CONVERSION_OBJECTS} configs created and reconciled in ${Date.now() - created} ms`,
  );
  const timings: Record<"v1beta1" | "v1alpha1", number[]> = { v1beta1: [], v1alpha1: [] };
  for (let i = 0; i < CONVERSION_LISTS + 2; i++) {
    for (const version of ["v1beta1", "v1alpha1"] as const) {
      const started = performance.now();
      const list = await kubeRequest<{ items: unknown[] }>(kc, {
        method: "GET",
        path: `/apis/dpo.dev/${version}/devicepluginconfigs`,
      });
      const ms = performance.now() - started;
      if (list.items.length < CONVERSION_OBJECTS)
        throw new Error(`${version} list has ${list.items.length} items`);
      // The first two rounds warm the watch cache and the webhook's connections.
      if (i >= 2) timings[version].push(ms);
    }
  }
  const reviews = await metric(metricsPort, "dpo_webhook_conversion_reviews_total");
  const p = (version: "v1beta1" | "v1alpha1", q: number): number => percentile(timings[version], q);
  for (const version of ["v1beta1", "v1alpha1"] as const) {
    rows.push({
      metric: `list of ${CONVERSION_OBJECTS} configs read as ${version} (${CONVERSION_LISTS} lists${version === "v1alpha1" ? ", through the webhook" : ", stored version"})`,
      value: `p50 ${p(version, 50).toFixed(0)} ms, p99 ${p(version, 99).toFixed(0)} ms`,
      target: "(reported)",
      ok: true,
    });
  }
  rows.push({
    metric: "conversion cost per list of configs: v1alpha1 p50 − v1beta1 p50 (per object)",
    value: `${(p("v1alpha1", 50) - p("v1beta1", 50)).toFixed(0)} ms (${(((p("v1alpha1", 50) - p("v1beta1", 50)) / CONVERSION_OBJECTS) * 1000).toFixed(0)} µs), ${reviews} reviews answered`,
    target: "(reported)",
    ok: true,
  });
}

async function main(): Promise<void> {
  const binDir = await buildOrReuseBinaries();
  const rows: Row[] = [];
  try {
    for (const n of NODE_COUNTS) await benchAt(n, binDir, rows);
  } finally {
    // What was measured before a failure is printed too: at 5000 nodes a run takes half an hour.
    console.log(
      `\nbench-operator: operator started as its Deployment starts it (node ${NODE_FLAGS.join(" ")})\n`,
    );
    console.log("| metric | result | target | |");
    console.log("|---|---|---|---|");
    for (const r of rows)
      console.log(`| ${r.metric} | ${r.value} | ${r.target} | ${r.ok ? "ok" : "MISSED"} |`);
    console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
