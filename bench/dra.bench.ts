// `make bench-dra`: a DevicePluginConfig published through DRA on N simulated nodes of the local control
// plane (KWOK nodes, the kubelet simulator running a real `dpo plugin` per node and its DRA side), 8 mock
// devices per node. Measured in one run:
//
//   1. slice-taint latency: a device's health flips in the Mock backend's health file on a node; the
//      time until a watch on ResourceSlices shows the device tainted in that node's pool (KEP-5055: it
//      stays published, with a NoSchedule taint), and again until the taint is gone;
//   2. NodePrepareResources for 1 and for 8 claims: pods whose claims the real scheduler allocates
//      against the slices, prepared by the simulated kubelet through the plugin; each call timed at the
//      kubelet's side (the plugin reads every claim from the API server and writes its CDI spec);
//   3. the switch: that config removed, a second one switches spec.publish DevicePlugin → DRA → back on
//      every node while pods ask for `<resourceName>: 1` through the scheduler (bench/dra/switch.ts).
// The run ends with its missed targets (dra/targets.ts), or "every target met", and exits 1 on a miss or a
// failed step (after printing what it measured).
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  type V1Pod,
} from "@kubernetes/client-node";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInformer, type Informer } from "../src/kube/informer.js";
import { kubeRequest } from "../src/kube/request.js";
import { RESOURCE_SLICES } from "../src/kube/resources.js";
import { KubeletSimulator } from "../tools/kubelet-sim/node-simulator.js";
import type { ClusterHandle } from "../tools/cluster/cluster.js";
import { waitFor } from "../tools/cluster/wait.js";
import { percentile } from "../tools/stats.js";
import { startBenchCluster, startBenchOperator } from "./support.js";
import { SWITCH_SETUP, switchScenario, type SwitchFigures } from "./dra/switch.js";
import { DRA_TARGETS, judgeDra, type DraFigures } from "./dra/targets.js";
import { describeBound, printVerdict } from "./targets.js";

const NODE_COUNT = Number(process.env["DPO_BENCH_NODES"] ?? 100);
/** Health flips in flight at once, each on its own node. */
const FLIPS_IN_FLIGHT = Number(process.env["DPO_BENCH_FLIPS_IN_FLIGHT"] ?? 10);
/** Workload pods being created and prepared at once. */
const PODS_IN_FLIGHT = Number(process.env["DPO_BENCH_PODS_IN_FLIGHT"] ?? 4);
/** The pinned release's kubelet (tools/cluster/versions.env), as the control plane. */
const KUBELET_VERSION = "v1.37.2";
const DEVICES = 8;
const FLIPPED = "x100-3";
const NAMESPACE = "dpo-system";
const WORKLOADS = "bench-dra";
const PLUGIN_IMAGE = "dpo:bench";
const CONFIG = "bench-dra";
const DRIVER = "gpu.bench-dra.example";
const DEVICE_CLASS = "x100.gpu.bench-dra.example";
const HEALTH_FILE = "/run/dpo/bench-dra-health.json";
const STEP_TIMEOUT_MS = 30_000;

interface Slice extends KubernetesObject {
  spec: { nodeName: string; devices?: { name: string; taints?: { effect: string }[] }[] };
}

/** A published device: `x100-3`, or `x100-3!` while it carries a NoSchedule taint. */
function deviceEntry(d: { name: string; taints?: { effect: string }[] }): string {
  return (d.taints ?? []).some((t) => t.effect === "NoSchedule") ? `${d.name}!` : d.name;
}

/**
 * Each node's published devices (tainted ones marked, see deviceEntry), from an informer on the driver's slices (the project's own: it
 * resumes a watch the API server or client-node ends, where a bare Watch stops after 30 quiet seconds).
 */
class PoolWatch {
  readonly devices = new Map<string, string[]>();
  private readonly waiters = new Set<() => void>();
  private informer: Informer<Slice> | undefined;

  async start(kc: KubeConfig): Promise<void> {
    this.informer = createInformer<Slice>(kc, {
      resource: RESOURCE_SLICES,
      fieldSelector: `spec.driver=${DRIVER}`,
    });
    const seen = (slice: Slice, gone = false): void => {
      this.devices.set(slice.spec.nodeName, gone ? [] : (slice.spec.devices ?? []).map(deviceEntry).sort());
      for (const wake of this.waiters) wake();
    };
    this.informer.onAdd((slice) => seen(slice));
    this.informer.onUpdate((_old, slice) => seen(slice));
    this.informer.onDelete((slice) => seen(slice, true));
    this.informer.start();
    await this.informer.waitForSync();
  }

  async stop(): Promise<void> {
    await this.informer?.stop();
  }

  /** Resolves with the time it held, or rejects naming what the node's pool last held. */
  until(node: string, holds: (devices: readonly string[]) => boolean, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        if (!holds(this.devices.get(node) ?? [])) return false;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(performance.now());
        return true;
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(
          new Error(`${node}: pool still ${JSON.stringify(this.devices.get(node))} after ${timeoutMs} ms`),
        );
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }
}

function writeHealth(sim: KubeletSimulator, node: string, content: Record<string, string>): void {
  sim.writeHostFile(node, HEALTH_FILE, JSON.stringify(content));
}

/** Runs `work` over `items`, `inFlight` at a time. */
async function pooled<T>(
  items: readonly T[],
  inFlight: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/**
 * Every node's FLIPPED device goes unhealthy, then healthy again: the times from the health file's
 * write until the node's pool shows it tainted, and until it shows it untainted again with every device.
 */
async function sliceLatencies(
  sim: KubeletSimulator,
  pools: PoolWatch,
  nodes: readonly string[],
): Promise<{ gone: number[]; back: number[] }> {
  const gone: number[] = [];
  const back: number[] = [];
  await pooled(nodes, FLIPS_IN_FLIGHT, async (node) => {
    let started = performance.now();
    const held = pools.until(node, (d) => d.includes(`${FLIPPED}!`), STEP_TIMEOUT_MS);
    writeHealth(sim, node, { [FLIPPED]: "Unhealthy" });
    gone.push((await held) - started);
    started = performance.now();
    const restored = pools.until(
      node,
      (d) => d.includes(FLIPPED) && d.length === DEVICES && !d.some((e) => e.endsWith("!")),
      STEP_TIMEOUT_MS,
    );
    writeHealth(sim, node, {});
    back.push((await restored) - started);
  });
  return { gone, back };
}

function workloadPod(name: string, claims: number): V1Pod {
  const names = Array.from({ length: claims }, (_, i) => `gpu${i}`);
  return {
    metadata: { name, namespace: WORKLOADS },
    spec: {
      terminationGracePeriodSeconds: 0,
      containers: [
        {
          name: "main",
          image: "registry.example/workload:1",
          resources: { claims: names.map((n) => ({ name: n })) },
        },
      ],
      resourceClaims: names.map((n) => ({ name: n, resourceClaimTemplateName: "one-gpu" })),
    },
  };
}

/** Resolves once the simulated kubelet prepared every claim of `pod` (`namespace/name`) and started it. */
async function preparedPod(sim: KubeletSimulator, pod: string, claims: number): Promise<void> {
  await waitFor(
    `${pod} prepared`,
    () => {
      const found = sim.admittedPods().find((p) => p.pod === pod);
      return found !== undefined && Object.keys(found.cdiDeviceIds).length === claims ? true : undefined;
    },
    { timeoutMs: 300_000, intervalMs: 10 },
  );
}

/**
 * NODE_COUNT pods of `claims` claims each (with 8, every node's devices go to one pod), PODS_IN_FLIGHT
 * at a time: each is created, allocated by the scheduler and prepared by the simulated kubelet before
 * the next takes its place. Then deletes them and waits until their claims are gone (the devices free
 * again). Returns the NodePrepareResources calls' times for `claims` claims and each pod's time from
 * create to prepared.
 */
async function prepareRound(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodes: readonly string[],
  claims: number,
): Promise<{ ms: number[]; podMs: number[]; wallMs: number }> {
  const core = kc.makeApiClient(CoreV1Api);
  const before = new Map(nodes.map((n) => [n, sim.draManager(n).calls.length]));
  const names = Array.from({ length: NODE_COUNT }, (_, i) => `prep${claims}-${i}`);
  const podMs: number[] = [];
  const started = performance.now();
  await pooled(names, PODS_IN_FLIGHT, async (name) => {
    const created = performance.now();
    await core.createNamespacedPod({ namespace: WORKLOADS, body: workloadPod(name, claims) });
    await preparedPod(sim, `${WORKLOADS}/${name}`, claims);
    podMs.push(performance.now() - created);
  });
  const wallMs = performance.now() - started;
  const ms = nodes.flatMap((n) =>
    sim
      .draManager(n)
      .calls.slice(before.get(n))
      .filter((c) => c.method === "prepare" && c.claims.length === claims && c.ms !== undefined)
      .map((c) => c.ms!),
  );
  await core.deleteCollectionNamespacedPod({ namespace: WORKLOADS, gracePeriodSeconds: 0 });
  await waitFor(
    `the ${claims}-claim pods and their claims gone`,
    async (observe) => {
      const pods = (await core.listNamespacedPod({ namespace: WORKLOADS })).items.length;
      const left = await kubeRequest<{ items: unknown[] }>(kc, {
        method: "GET",
        path: `/apis/resource.k8s.io/v1/namespaces/${WORKLOADS}/resourceclaims`,
      });
      observe({ pods, claims: left.items.length });
      return pods === 0 && left.items.length === 0;
    },
    { timeoutMs: 300_000, intervalMs: 500 },
  );
  return { ms, podMs, wallMs };
}

function fmt(values: readonly number[]): string {
  return `${Math.round(percentile(values, 50))} ms / ${Math.round(percentile(values, 99))} ms / ${Math.round(Math.max(...values))} ms`;
}

function printSwitches(switches: readonly SwitchFigures[]): void {
  if (switches.length === 0) return;
  console.log(
    `\nswitch of a second config (${SWITCH_SETUP.devices} Mock devices a node, maxUnavailable ${SWITCH_SETUP.maxUnavailable}), ${SWITCH_SETUP.podsPerS} pods/s asking for \`<resourceName>: 1\` through the scheduler; targets: UnexpectedAdmissionError ${describeBound(DRA_TARGETS.switchUnexpectedAdmissions)} and both paths seen on a node ${describeBound(DRA_TARGETS.switchBothPaths)}, each way\n`,
  );
  console.log(
    "| publish → | total | per node: old path stops → new path advertises, p50 / p99 / max | pods created / running (device plugin, DRA claim) | unscheduled at the end | UnexpectedAdmissionError (nodes) | other rejections | both paths seen on a node | |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const s of switches) {
    console.log(
      `| ${s.target} | ${(s.totalMs / 1000).toFixed(1)} s | ${fmt(s.perNodeMs)} | ${s.created} / ${s.admitted} (${s.throughDevicePlugin}, ${s.throughDra}) | ${s.created - s.admitted - s.unexpectedAdmission - s.otherRejections} | ${s.unexpectedAdmission} (${s.rejectedNodes}) | ${s.otherRejections} | ${s.bothPaths} | ${judgeDra({ switches: [s] }).length === 0 ? "ok" : "MISSED"} |`,
    );
    if (s.samples.length > 0) console.log(`  rejections seen: ${s.samples.join(" | ")}`);
  }
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), "dpo-bench-dra-"));
  let cluster: ClusterHandle | undefined;
  let sim: KubeletSimulator | undefined;
  let operator: ChildProcess | undefined;
  const pools = new PoolWatch();
  const rows: string[] = [];
  let taintedMs: number[] | undefined;
  let untaintedMs: number[] | undefined;
  let switches: SwitchFigures[] | undefined;
  let failed = false;
  try {
    const started = await startBenchCluster(stateDir, NODE_COUNT);
    cluster = started.cluster;
    const { kc, nodes, kubectl } = started;
    sim = await KubeletSimulator.start({
      kubeconfig: kc,
      nodes,
      kubeletVersions: Object.fromEntries(nodes.map((n) => [n, KUBELET_VERSION])),
    });
    // Every device healthy, in a file that exists before the plugins start: the Mock backend watches its
    // directory, and one that does not exist yet is only polled (once a second) until it does.
    for (const node of nodes) writeHealth(sim, node, {});
    operator = await startBenchOperator(kc, {
      stateDir,
      namespace: NAMESPACE,
      pluginImage: PLUGIN_IMAGE,
      label: "bench-dra",
    });
    await pools.start(kc);
    const applied = performance.now();
    await kubectl(
      ["apply", "--server-side", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: [
          {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            metadata: { name: CONFIG },
            spec: {
              resourceName: "bench-dra.example/x100",
              backend: {
                type: "Mock",
                mock: {
                  devices: DEVICES,
                  idPrefix: "x100",
                  healthFile: HEALTH_FILE,
                  attributes: { model: "X100", memory: "80Gi" },
                },
              },
              publish: "DRA",
              dra: { driverName: DRIVER, deviceClass: { name: DEVICE_CLASS } },
            },
          },
          { apiVersion: "v1", kind: "Namespace", metadata: { name: WORKLOADS } },
          {
            apiVersion: "resource.k8s.io/v1",
            kind: "ResourceClaimTemplate",
            metadata: { name: "one-gpu", namespace: WORKLOADS },
            spec: {
              spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DEVICE_CLASS } }] } },
            },
          },
        ],
      }),
    );
    await waitFor(
      `every node's pool published with ${DEVICES} devices`,
      (observe) => {
        const full = nodes.filter((n) => pools.devices.get(n)?.length === DEVICES).length;
        observe(`${full}/${NODE_COUNT}`);
        return full === NODE_COUNT;
      },
      { timeoutMs: Math.max(300_000, NODE_COUNT * 5_000), intervalMs: 500 },
    );
    console.error(
      `bench-dra: ${NODE_COUNT} pools published ${Math.round((performance.now() - applied) / 1000)} s after the apply`,
    );

    const { gone, back } = await sliceLatencies(sim, pools, nodes);
    [taintedMs, untaintedMs] = [gone, back];
    const taintTarget = `p99 ${describeBound(DRA_TARGETS.sliceTaintP99Ms)}`;
    const status = (figures: DraFigures): string => (judgeDra(figures).length === 0 ? "ok" : "MISSED");
    rows.push(
      `| device unhealthy → tainted in its node's ResourceSlice | ${gone.length} | ${fmt(gone)} | ${taintTarget} | ${status({ taintedMs: gone })} |`,
    );
    rows.push(
      `| device healthy again → taint gone | ${back.length} | ${fmt(back)} | ${taintTarget} | ${status({ untaintedMs: back })} |`,
    );
    for (const claims of [1, 8]) {
      const { ms, podMs, wallMs } = await prepareRound(kc, sim, nodes, claims);
      const what = `${claims} claim${claims > 1 ? "s" : ""}`;
      rows.push(`| NodePrepareResources, ${what} per call | ${ms.length} | ${fmt(ms)} | (reported) | |`);
      rows.push(
        `| pod with ${what} created → prepared and started (${NODE_COUNT} pods in ${(wallMs / 1000).toFixed(1)} s) | ${podMs.length} | ${fmt(podMs)} | (reported) | |`,
      );
    }
    console.error(`bench-dra: so far\n${rows.join("\n")}`);
    // One plugin process per node for the switch: the first config goes before the second comes.
    await kc.makeApiClient(CustomObjectsApi).deleteClusterCustomObject({
      group: "dpo.dev",
      version: "v1beta1",
      plural: "devicepluginconfigs",
      name: CONFIG,
    });
    await waitFor(
      `${CONFIG}'s plugins gone from every node`,
      (observe) => {
        const running = sim!.plugins().filter((p) => p.running).length;
        observe({ running });
        return running === 0;
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    );
    switches = await switchScenario(kc, sim, nodes, WORKLOADS);
  } catch (err) {
    // What was measured before the failure is still printed and judged below; the run exits 1.
    console.error(`bench-dra failed; state (operator and plugin logs) kept in ${stateDir}`);
    console.error(err);
    failed = true;
  } finally {
    await pools.stop();
    operator?.kill("SIGTERM");
    await sim?.stop().catch(() => undefined);
    await cluster?.stop();
  }
  console.log(
    `\nbench-dra: ${NODE_COUNT} nodes (kubelets ${KUBELET_VERSION}), ${DEVICES} Mock devices each, one DRA config, ${FLIPS_IN_FLIGHT} health flips and ${PODS_IN_FLIGHT} pods in flight\n`,
  );
  console.log("| measured | samples | p50 / p99 / max | target | |");
  console.log("|---|---|---|---|---|");
  for (const row of rows) console.log(row);
  printSwitches(switches ?? []);
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
  process.exitCode = printVerdict("bench-dra", judgeDra({ taintedMs, untaintedMs, switches }), failed);
  // DPO_BENCH_KEEP_STATE keeps the operator's, the plugins' and the control plane's logs for a look after the
  // run; a failed run keeps them anyway.
  if (process.env["DPO_BENCH_KEEP_STATE"]) console.error(`bench-dra: state kept in ${stateDir}`);
  else if (!failed) rmSync(stateDir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
