// `make bench-operator`: the built operator against a real control plane with 100 and 1000 KWOK nodes.
// No plugin processes: node capacity is patched the way the kubelet does it. Reports config create →
// DaemonSet, node capacity change → CR status (p50/p99), operator RSS, and API requests while idle.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { arch, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  buildOrReuseBinaries,
  readPinnedVersions,
  startCluster,
  type ClusterHandle,
} from "../tools/cluster/cluster.js";
import { goArchitecture, renderSimulatedNode } from "../tools/cluster/nodes.js";
import { kubeRequest } from "../src/kube/request.js";
import { freePort, startTcpRelay } from "../tools/cluster/tcp-relay.js";
import { waitFor } from "../tools/cluster/wait.js";

const repo = join(import.meta.dirname, "..");
const dpo = join(repo, "dist", "dpo.js");
const NODE_COUNTS = (process.env["BENCH_NODES"] ?? "100,1000").split(",").map(Number);
const CREATES = Number(process.env["BENCH_CREATES"] ?? 20);
const CAPACITY_CHANGES = Number(process.env["BENCH_CAPACITY_CHANGES"] ?? 40);
const IDLE_SECONDS = Number(process.env["BENCH_IDLE_SECONDS"] ?? 30);
/** The Node flags the operator Deployment starts `dpo operator` with (config/manager/deployment.yaml). */
const NODE_FLAGS = (process.env["BENCH_NODE_FLAGS"] ?? "--max-semi-space-size=2").split(" ").filter(Boolean);
const RESOURCE = "bench.example/dev";
const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const run = promisify(execFile);

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

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
): Promise<{ url: string; connections: () => number; close(): void }> {
  const relay = await startTcpRelay([{ host: server.hostname, port: Number(server.port) }]);
  return {
    url: `https://127.0.0.1:${relay.port}`,
    connections: () => relay.connections()[0] ?? 0,
    close: () => relay.close(),
  };
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) / 1024;
}

async function metric(port: number, name: string): Promise<number> {
  const { get } = await import("node:http");
  const text = await new Promise<string>((resolve, reject) =>
    get(`http://127.0.0.1:${port}/metrics`, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve(body));
    }).on("error", reject),
  );
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.split(" ").pop());
  }
  return sum;
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
  let relay: Awaited<ReturnType<typeof connectionCountingRelay>> | undefined;
  let logs = "";
  const operatorLog = (): string => logs;
  try {
    cluster = await startCluster({ nodes: 3, stateDir, binDir, timeoutMs: 180_000 });
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
    const versions = await readPinnedVersions();
    const facts = {
      kubernetesVersion: versions.kubernetes,
      kwokVersion: versions.kwok,
      architecture: goArchitecture(arch()),
    };
    const createStarted = Date.now();
    for (let start = 3; start < nodeCount; start += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, nodeCount - start) }, (_, i) =>
          core.createNode({ body: renderSimulatedNode(start + i, facts) }),
        ),
      );
    }
    await waitFor(
      `${nodeCount} nodes Ready`,
      async (observe) => {
        const list = await core.listNode();
        const ready = list.items.filter((n) =>
          n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
        );
        observe(`${ready.length}/${list.items.length}`);
        return ready.length >= nodeCount;
      },
      { timeoutMs: 300_000, intervalMs: 1_000 },
    );
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
    operator = spawn(
      process.execPath,
      [
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
      ],
      {
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, DPO_LOG_LEVEL: process.env["BENCH_OPERATOR_LOG_LEVEL"] ?? "info" },
      },
    );
    logs = "";
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
    const warmupStarted = performance.now();
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
      { timeoutMs: 120_000, intervalMs: 200 },
    );

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
    const target = nodeCount >= 1000 ? 2_000 : 1_000;
    rows.push({
      metric: `${nodeCount} nodes: node capacity change → CR status (${CAPACITY_CHANGES} changes)`,
      value: `p50 ${percentile(changeLatencies, 50).toFixed(0)} ms, p99 ${percentile(changeLatencies, 99).toFixed(0)} ms`,
      target: `p99 ≤ ${target / 1000} s`,
      ok: percentile(changeLatencies, 99) <= target,
    });

    // 3. Idle: KWOK keeps heartbeating every node; nothing the operator watches changes in substance.
    await waitFor(
      "the DaemonSet pods to settle",
      async () => {
        const ds = await apps.readNamespacedDaemonSet({
          name: "dpo-bench-capacity",
          namespace: "dpo-system",
        });
        return ds.status?.numberReady === nodeCount;
      },
      { timeoutMs: 300_000, intervalMs: 1_000 },
    );
    await new Promise((r) => setTimeout(r, 3_000));
    const requestsBefore = await metric(port, "dpo_operator_api_requests_total");
    const connectionsBefore = relay.connections();
    const cpuBefore = cpuSeconds(operator.pid!);
    const writesBefore =
      (await metric(port, "dpo_operator_status_writes_total")) +
      (await metric(port, "dpo_operator_applies_total"));
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const requests = (await metric(port, "dpo_operator_api_requests_total")) - requestsBefore;
    const connections = relay.connections() - connectionsBefore;
    const cpu = cpuSeconds(operator.pid!) - cpuBefore;
    const writes =
      (await metric(port, "dpo_operator_status_writes_total")) +
      (await metric(port, "dpo_operator_applies_total")) -
      writesBefore;
    rows.push({
      metric: `${nodeCount} nodes: API requests while idle (${IDLE_SECONDS} s, heartbeats on)`,
      value: `${(requests / IDLE_SECONDS).toFixed(2)}/s, ${writes} writes`,
      target: "0 writes",
      ok: writes === 0,
    });
    rows.push({
      metric: `${nodeCount} nodes: new API connections (TLS handshakes) and CPU while idle, leader election on`,
      value: `${connections} connections, ${((cpu / IDLE_SECONDS) * 100).toFixed(2)}% of a core`,
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
      value: `${rss.toFixed(1)} MiB`,
      target: "≤ 200 MiB",
      ok: rss <= 200,
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
      `bench-operator failed at ${nodeCount} nodes; operator log tail:\n${operatorLog().slice(-4000)}`,
    );
    throw err;
  } finally {
    if (process.env["BENCH_VERBOSE"])
      writeFileSync(join(tmpdir(), `dpo-bench-operator-${nodeCount}.log`), operatorLog());
    operator?.kill("SIGTERM");
    relay?.close();
    await cluster?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const CONVERSION_OBJECTS = Number(process.env["BENCH_CONVERSION_OBJECTS"] ?? 1000);
const CONVERSION_LISTS = Number(process.env["BENCH_CONVERSION_LISTS"] ?? 20);

async function benchConversion(kc: KubeConfig, metricsPort: number, rows: Row[]): Promise<void> {
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
  for (const n of NODE_COUNTS) await benchAt(n, binDir, rows);
  console.log(
    `\nbench-operator: operator started as its Deployment starts it (node ${NODE_FLAGS.join(" ")})\n`,
  );
  console.log("| metric | result | target | |");
  console.log("|---|---|---|---|");
  for (const r of rows) console.log(`| ${r.metric} | ${r.value} | ${r.target} | ${r.ok ? "ok" : "MISSED"} |`);
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
