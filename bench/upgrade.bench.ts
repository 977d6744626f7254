// `make bench-upgrade`: a plugin upgrade on N simulated nodes, three ways, in one run on the local control
// plane (KWOK nodes, the kubelet simulator running a real `dpo plugin` process per plugin pod):
//
//   1. dpo, strategy Surge (kubelets v1.37.0: one endpoint per socket);
//   2. dpo, strategy Replace;
//   2b. dpo, strategy Auto on kubelets before v1.37.0 (DPO_BENCH_KUBELET_VERSION): Replace with the new plugin
//       standing by (scenario `standby`, not in the default list);
//   3. a baseline without the operator: the same rendered plugin DaemonSet with RollingUpdate
//      (maxUnavailable as dpo's), created and updated by this benchmark;
//   4. a takeover (scenario `takeover`, not in the default list): a config with spec.takeover hands every
//      node over from a plugin DaemonSet dpo does not own, with a pod on each node holding a device
//      (upgrade/takeover.ts); run beside `surge` its rollout is held to the Surge upgrade's.
//
// For each: spec change → every node running only the new revision with its devices back (rollout
// time), per node the time the Node's status.allocatable for the resource is 0 (from a Node watch),
// the failed admissions of a workload that keeps asking every node's kubelet for one device, and the
// pods of a workload through the real scheduler rejected with UnexpectedAdmissionError.
// DPO_BENCH_PLUGIN_MODE=processless plays the plugins in the simulator instead of running processes, so
// thousands of nodes fit (the operator, the API server and the DaemonSet controller are what is measured).
// The run ends with its missed targets (upgrade/targets.ts), or "every target met", and exits 1 on a miss or
// a failed scenario (after reporting the scenarios that finished).
import type { V1Node } from "@kubernetes/client-node";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInformer, type Informer } from "../src/kube/informer.js";
import { NODES } from "../src/kube/resources.js";
import type { ClusterHandle } from "../tools/cluster/cluster.js";
import { KubeletSimulator } from "../tools/kubelet-sim/node-simulator.js";
import { startBenchCluster, startBenchOperator } from "./support.js";
import {
  KUBELET_VERSION,
  NAMESPACE,
  MAX_UNAVAILABLE,
  NODE_COUNT,
  OPERATOR_MEMORY_LIMIT_MIB,
  PLUGIN_IMAGE,
  PLUGIN_MODE,
  SCENARIOS,
  TEARDOWN_BUDGET_MS,
} from "./upgrade/knobs.js";
import { printReport } from "./upgrade/report.js";
import type { Result } from "./upgrade/rollout.js";
import { baselineScenario, dpoScenario } from "./upgrade/scenarios.js";
import { takeoverScenario } from "./upgrade/takeover.js";
import { judgeUpgrade, type UpgradeRun } from "./upgrade/targets.js";
import { printVerdict } from "./targets.js";

const RUN: UpgradeRun = {
  nodes: NODE_COUNT,
  maxUnavailable: MAX_UNAVAILABLE.dpo,
  pluginMode: PLUGIN_MODE,
  operatorMemoryLimitMiB: OPERATOR_MEMORY_LIMIT_MIB,
};

async function main(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), "dpo-bench-upgrade-"));
  let cluster: ClusterHandle | undefined;
  let sim: KubeletSimulator | undefined;
  let operator: ChildProcess | undefined;
  let nodeInformer: Informer<V1Node> | undefined;
  const results: Result[] = [];
  // Interrupted (Ctrl-C, a CI timeout), the run still takes its cluster down: left behind, the API server,
  // etcd and KWOK of thousands of nodes keep the machine's cores busy.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      console.error(`bench-upgrade: ${signal}; tearing down (state kept in ${stateDir})`);
      setTimeout(() => process.exit(1), TEARDOWN_BUDGET_MS).unref();
      void teardown().finally(() => process.exit(1));
    });
  }
  try {
    const started = await startBenchCluster(stateDir, NODE_COUNT);
    cluster = started.cluster;
    const { kc, nodes } = started;

    nodeInformer = createInformer<V1Node>(kc, { resource: NODES });
    nodeInformer.start();
    await nodeInformer.waitForSync();
    sim = await KubeletSimulator.start({
      kubeconfig: kc,
      nodes,
      gracePeriodMs: 60_000,
      kubeletVersions: Object.fromEntries(nodes.map((n) => [n, KUBELET_VERSION])),
      pluginMode: PLUGIN_MODE,
    });
    console.error(
      `bench-upgrade: ${NODE_COUNT} nodes Ready, kubelet simulator on every node (plugins: ${PLUGIN_MODE})`,
    );

    // The baseline first, while no operator runs: its DaemonSet is nobody's but this benchmark's.
    if (SCENARIOS.includes("baseline")) {
      console.error("bench-upgrade: baseline (plain DaemonSet, RollingUpdate)");
      results.push(await baselineScenario(kc, sim, nodeInformer, nodes));
    }
    operator = await startBenchOperator(kc, {
      stateDir,
      namespace: NAMESPACE,
      pluginImage: PLUGIN_IMAGE,
      label: "bench-upgrade",
    });
    for (const scenario of ["surge", "replace", "standby"] as const) {
      if (!SCENARIOS.includes(scenario)) continue;
      console.error(`bench-upgrade: dpo ${scenario}`);
      results.push(
        await dpoScenario(kc, sim, nodeInformer, nodes, scenario, {
          pid: operator.pid!,
          log: join(stateDir, "operator.log"),
        }),
      );
    }
    if (SCENARIOS.includes("takeover")) {
      console.error("bench-upgrade: dpo takeover");
      results.push(
        await takeoverScenario(
          kc,
          sim,
          nodeInformer,
          nodes,
          { pid: operator.pid!, log: join(stateDir, "operator.log") },
          started.kubectl,
          join(import.meta.dirname, ".."),
        ),
      );
    }
  } catch (err) {
    console.error(`bench-upgrade failed; state (operator and plugin logs) kept in ${stateDir}`);
    console.error(err);
    // A failed run ends within the teardown budget, whatever part of the teardown hangs.
    process.exitCode = 1;
    setTimeout(() => {
      console.error(`bench-upgrade: teardown not done after ${TEARDOWN_BUDGET_MS} ms; exiting`);
      process.exit(1);
    }, TEARDOWN_BUDGET_MS);
    await teardown();
    // The scenarios that finished before the failure are reported and judged; the run exits 1 whatever
    // their figures.
    if (results.length > 0) printReport(results, RUN);
    process.exit(printVerdict("bench-upgrade", judgeUpgrade(results, RUN), true));
  }
  await teardown();
  printReport(results, RUN);
  rmSync(stateDir, { recursive: true, force: true });
  // Nothing the run started may keep the process alive past its report: the exit status is the verdict's.
  process.exit(printVerdict("bench-upgrade", judgeUpgrade(results, RUN)));

  async function teardown(): Promise<void> {
    operator?.kill("SIGTERM");
    await sim?.stop().catch((e: Error) => console.error(`bench-upgrade: simulator stop: ${e.message}`));
    await nodeInformer?.stop();
    await cluster?.stop();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
