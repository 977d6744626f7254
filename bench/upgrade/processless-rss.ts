// How many processless simulated nodes fit: the kubelet simulator's own RSS per node, with every node's
// plugin pod running as a processless plugin that registered and wrote its DeviceNodeState.
//
//   DPO_BENCH_NODES=1000 nice -n 19 node --import tsx bench/upgrade/processless-rss.ts   (after make build)
//
// One plain plugin DaemonSet (the one dpo renders, as bench-upgrade's baseline) puts a plugin pod on every
// node through the real DaemonSet controller; the figure is this process's RSS once every node advertises
// its devices, less its RSS before the simulator started, over the node count.
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { plainPluginRevision } from "../../tools/upgrade-load/plain-plugin.js";
import type { ClusterHandle } from "../../tools/cluster/cluster.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { startBenchCluster } from "../support.js";
import {
  DEVICES,
  KUBELET_VERSION,
  NAMESPACE,
  NODE_COUNT,
  RENDER_CONTEXT,
  TEARDOWN_BUDGET_MS,
} from "./knobs.js";

function rssMiB(): number {
  return process.memoryUsage.rss() / 2 ** 20;
}

/** RSS after two collections (when exposed) and a moment for the allocator to give pages back. */
async function settledRss(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await sleep(2_000);
  gc?.();
  return rssMiB();
}

async function measure(kc: KubeConfig, nodes: string[]): Promise<void> {
  const before = await settledRss();
  const sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n) => [n, KUBELET_VERSION])),
    pluginMode: "processless",
  });
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  try {
    const idle = await settledRss();
    const plugin = plainPluginRevision({
      name: "rss",
      resource: "processless-rss.example/dev",
      devices: DEVICES,
      idPrefix: "r",
      logLevel: "info",
      maxUnavailable: 1,
      context: RENDER_CONTEXT,
    });
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: plugin.configMap });
    await apps.createNamespacedDaemonSet({ namespace: NAMESPACE, body: plugin.daemonSet });
    const started = performance.now();
    await waitFor(
      `every node's processless plugin registered with ${DEVICES} devices`,
      (observe) => {
        const advertising = nodes.filter(
          (n) => sim.capacity(n, "processless-rss.example/dev")?.allocatable === DEVICES,
        );
        observe(`${advertising.length}/${nodes.length}`);
        return advertising.length === nodes.length;
      },
      { timeoutMs: 600_000, intervalMs: 1_000 },
    );
    const allUp = (performance.now() - started) / 1000;
    const peak = rssMiB();
    const running = await settledRss();
    const perNodeKiB = ((running - before) * 1024) / nodes.length;
    console.log(
      [
        `processless-rss: ${nodes.length} nodes, every plugin registered ${allUp.toFixed(1)} s after the DaemonSet`,
        `  this process before the simulator: ${before.toFixed(0)} MiB`,
        `  simulator started, no plugin pods:  ${idle.toFixed(0)} MiB (+${(((idle - before) * 1024) / nodes.length).toFixed(0)} KiB per node)`,
        `  every node's plugin running:       ${running.toFixed(0)} MiB settled, ${peak.toFixed(0)} MiB before`,
        `  per node: ${perNodeKiB.toFixed(0)} KiB (simulator and its processless plugin)`,
        `  heap used: ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB; node ${process.version}`,
      ].join("\n"),
    );
    await apps.deleteNamespacedDaemonSet({ name: plugin.daemonSet.metadata!.name!, namespace: NAMESPACE });
  } finally {
    await sim.stop();
  }
}

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), "dpo-processless-rss-"));
  let cluster: ClusterHandle | undefined;
  try {
    const started = await startBenchCluster(stateDir, NODE_COUNT);
    cluster = started.cluster;
    await measure(started.kc, started.nodes);
  } catch (err) {
    console.error(`processless-rss failed; state kept in ${stateDir}`);
    console.error(err);
    process.exitCode = 1;
    setTimeout(() => process.exit(1), TEARDOWN_BUDGET_MS);
  }
  await cluster?.stop();
  if (process.exitCode !== 1) rmSync(stateDir, { recursive: true, force: true });
  process.exit(process.exitCode ?? 0);
}

void main();
