// `make bench-operator`: the built operator against a real control plane with 100 and 5000 KWOK nodes.
// No plugin processes: node capacity is patched the way the kubelet does it, and each node's
// DeviceNodeState is written by the plugin's own report writer (src/plugin-runtime/report), one per node
// in this process, each with a token bound to the node's plugin pod (tools/cluster/report-fleet.ts).
// Reports config create → DaemonSet, node capacity change → CR status (p50/p99), operator RSS, API
// requests of the operator and of all report writers while idle, the operator's status writes under a
// health flap storm (10% of the nodes flipping a device once a second), and the status object's size.
//
// This file runs the steps in order for each node count; bench/operator/ holds them: under-test.ts (the
// cluster and the operator), latencies.ts (steps 1 and 2), idle.ts (3), flap-storm.ts (5), conversion.ts (4).
// The run ends with its missed targets (operator/targets.ts), or "every target met", and exits 1 on a miss
// or a failed step, after printing what it measured.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kubeRequest } from "../src/kube/request.js";
import { auditLogPath, buildOrReuseBinaries } from "../tools/cluster/cluster.js";
import { benchConversion } from "./operator/conversion.js";
import { flapStorm } from "./operator/flap-storm.js";
import { measureIdle } from "./operator/idle.js";
import { measureNodeLabels } from "./operator/node-labels.js";
import { DEPLOYMENT_MEMORY_LIMIT_MIB, NODE_COUNTS } from "./operator/knobs.js";
import { measureCapacityChanges, measureCreates } from "./operator/latencies.js";
import { describeLoopDelay, sampleLoopDelay, type LoopDelaySampler } from "./operator/loop-delay.js";
import { heapFigures } from "./operator/metrics.js";
import { printReport } from "./operator/report.js";
import { judgeOperator, OPERATOR_TARGETS, type Row } from "./operator/targets.js";
import { startClusterUnderTest, startOperatorUnderTest, type RunState } from "./operator/under-test.js";
import { peakRssMiB, rssMiB } from "./proc.js";
import { describeBound, printVerdict } from "./targets.js";

/** Every node count's rows, printed at the end, after a failure, or when the run is interrupted. */
const rows: Row[] = [];
/** How long an interrupted run may take to take its cluster down before it exits anyway. */
const TEARDOWN_BUDGET_MS = 120_000;
/** The node count running now: an interrupt takes it down (finish) before printing what was measured. */
let running: { finish: () => Promise<void> } | undefined;

async function benchAt(nodeCount: number, binDir: string): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), `dpo-bench-op-${nodeCount}-`));
  const state: RunState = { logs: "" };
  let loop: LoopDelaySampler | undefined;
  let peakMeasured = false;
  let finished = false;
  /** Reports the run's loop and, when the steps did not get there, the operator's peak; then takes it all down. */
  const finish = async (): Promise<void> => {
    if (finished) return;
    finished = true;
    if (loop !== undefined)
      rows.push({
        metric: `${nodeCount} nodes: operator event-loop delay and Lease renewals over the run`,
        value: describeLoopDelay(loop.stop()),
        target: "(reported)",
      });
    const live = state.operator;
    const limit = DEPLOYMENT_MEMORY_LIMIT_MIB;
    if (!peakMeasured && live?.pid !== undefined && live.exitCode === null && live.signalCode === null) {
      const peak = peakRssMiB(live.pid);
      rows.push({
        metric: `${nodeCount} nodes: operator peak RSS up to the end of the cut-short run (VmHWM)`,
        value: `${peak.toFixed(1)} MiB`,
        target: limit === undefined ? "(reported)" : describeBound(OPERATOR_TARGETS.peakRssMiB(limit)),
        ...(limit === undefined
          ? {}
          : { checks: [{ value: peak, bound: OPERATOR_TARGETS.peakRssMiB(limit) }] }),
      });
    }
    if (process.env["BENCH_VERBOSE"])
      writeFileSync(join(tmpdir(), `dpo-bench-operator-${nodeCount}.log`), state.logs);
    const { fleet, operator, memoryLimit, relay, cluster } = state;
    await fleet?.stop();
    operator?.kill("SIGTERM");
    if (operator !== undefined && operator.exitCode === null && operator.signalCode === null)
      await new Promise((resolve) => operator.once("exit", resolve));
    if (memoryLimit !== undefined && "dir" in memoryLimit) memoryLimit.remove();
    await relay?.close();
    await cluster?.stop();
    // BENCH_KEEP_STATE keeps the control plane's logs (and audit log) for a look after the run.
    if (process.env["BENCH_KEEP_STATE"]) console.error(`bench-operator: state kept in ${stateDir}`);
    else rmSync(stateDir, { recursive: true, force: true });
  };
  running = { finish };
  try {
    const { clients, webhookPort } = await startClusterUnderTest(state, nodeCount, binDir, stateDir);
    const { kc, custom } = clients;
    const { operator, relay, port } = await startOperatorUnderTest(
      state,
      nodeCount,
      stateDir,
      clients,
      webhookPort,
      rows,
    );
    // For the whole run: whether the operator's event loop keeps up, beside its Lease renewals.
    loop = sampleLoopDelay(kc, port, "dpo-system", "dpo-bench", Boolean(process.env["BENCH_VERBOSE"]), () =>
      relay.loopDelayMs(),
    );
    await measureCreates(kc, custom, nodeCount, rows);
    const fleet = await measureCapacityChanges(state, clients, nodeCount, rows);
    await measureNodeLabels(clients.core, nodeCount, port, rows);
    await measureIdle(nodeCount, port, operator, relay, fleet, rows);

    // 5. Health flap storm: FLAP_SHARE of the nodes flip one device's health once a second, spread over
    // the second, through their report writers. Every status change of the config is seen on a watch.
    await flapStorm(nodeCount, fleet, kc, custom, port, auditLogPath(stateDir), rows);
    const peakRss = rssMiB(operator.pid!).total;
    rows.push({
      metric: `${nodeCount} nodes: operator RSS after the flap storm`,
      value: `${peakRss.toFixed(1)} MiB (${await heapFigures(port, operator.pid!)})`,
      target: describeBound(OPERATOR_TARGETS.rssMiB),
      checks: [{ value: peakRss, bound: OPERATOR_TARGETS.rssMiB }],
    });
    // The high-water mark, not a sample: the storm or the reports' first writes may peak between two.
    const peak = peakRssMiB(operator.pid!);
    peakMeasured = true;
    const limit = DEPLOYMENT_MEMORY_LIMIT_MIB;
    rows.push({
      metric: `${nodeCount} nodes: operator peak RSS over the run (VmHWM)`,
      value: `${peak.toFixed(1)} MiB`,
      target:
        limit === undefined
          ? "(reported: the Deployment sets no limit)"
          : `${describeBound(OPERATOR_TARGETS.peakRssMiB(limit))}, the Deployment's limit`,
      ...(limit === undefined
        ? {}
        : { checks: [{ value: peak, bound: OPERATOR_TARGETS.peakRssMiB(limit) }] }),
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
      target: `bounded (${describeBound(OPERATOR_TARGETS.problemsListed)} problems listed)`,
      checks: [
        {
          figure: "problems listed",
          value: problems.problems?.length ?? 0,
          bound: OPERATOR_TARGETS.problemsListed,
        },
      ],
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
      `bench-operator failed at ${nodeCount} nodes (${new Date().toISOString()}): ${String(err)}\noperator log tail:\n${state.logs.slice(-4000)}`,
    );
    throw err;
  } finally {
    await finish();
    running = undefined;
  }
}

/** Runs every node count, prints the table and the verdict; the exit status (1 on a miss or a failure). */
async function main(): Promise<number> {
  const binDir = await buildOrReuseBinaries();
  let failed = false;
  try {
    for (const n of NODE_COUNTS) await benchAt(n, binDir);
  } catch (err) {
    console.error(err);
    failed = true;
  }
  // What was measured before a failure is printed and judged too: at 5000 nodes a run takes half an hour.
  printReport(rows);
  return printVerdict("bench-operator", judgeOperator(rows), failed);
}

// Interrupted (Ctrl-C, a timeout), the run still takes its cluster down, whose API server, etcd and KWOK
// of thousands of nodes would keep the machine's cores busy, and prints and judges what it measured.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`bench-operator: ${signal} at ${new Date().toISOString()}; taking the run down`);
    setTimeout(() => process.exit(1), TEARDOWN_BUDGET_MS).unref();
    void (running?.finish() ?? Promise.resolve()).finally(() => {
      printReport(rows);
      printVerdict("bench-operator", judgeOperator(rows), true);
      process.exit(1);
    });
  });
}

main().then(
  (status) => (process.exitCode = status),
  (err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  },
);
