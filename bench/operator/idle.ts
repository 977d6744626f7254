// Step 3, the operator idle: KWOK heartbeating every node and nothing changing in substance, what the
// operator and the report writers still do, and the operator's RSS.
import type { ChildProcess } from "node:child_process";
import type { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { cpuSeconds, rssMiB } from "../proc.js";
import { connectionEvents, type ConnectionCountingRelay } from "./connections.js";
import { IDLE_SECONDS } from "./knobs.js";
import { heapFigures, metric, metricSeries, seriesDelta, sumOfSeries } from "./metrics.js";
import { describeBound } from "../targets.js";
import { OPERATOR_TARGETS, type Row } from "./targets.js";

/** API requests, writes, new connections and CPU over IDLE_SECONDS of idle, then the reconcile mean and RSS. */
export async function measureIdle(
  nodeCount: number,
  port: number,
  operator: ChildProcess,
  relay: ConnectionCountingRelay,
  fleet: ReportFleet,
  rows: Row[],
): Promise<void> {
  // 3. Idle: KWOK keeps heartbeating every node; nothing the operator watches changes in substance,
  // and no plugin has news: neither the operator nor any report writer should write.
  await new Promise((r) => setTimeout(r, 3_000));
  const requestSeriesBefore = await metricSeries(port, "dpo_operator_api_requests_total");
  const connectionsBefore = (await relay.counts()).connections;
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
    target: describeBound(OPERATOR_TARGETS.writerIdleRequests),
    checks: [{ value: fleetIdle, bound: OPERATOR_TARGETS.writerIdleRequests }],
  });
  const requestSeriesAfter = await metricSeries(port, "dpo_operator_api_requests_total");
  const requests = sumOfSeries(requestSeriesAfter) - sumOfSeries(requestSeriesBefore);
  const idleRequests = seriesDelta(requestSeriesBefore, requestSeriesAfter);
  const counts = await relay.counts();
  const connections = counts.connections - connectionsBefore;
  const idleConnections = connectionEvents(counts.history, idleFrom, Date.now());
  const cpu = cpuSeconds(operator.pid!) - cpuBefore;
  const writes =
    (await metric(port, "dpo_operator_status_writes_total")) +
    (await metric(port, "dpo_operator_applies_total")) -
    writesBefore;
  rows.push({
    metric: `${nodeCount} nodes: API requests while idle (${IDLE_SECONDS} s, heartbeats on)`,
    value: `${(requests / IDLE_SECONDS).toFixed(2)}/s, ${writes} writes (${idleRequests || "none"})`,
    target: `${describeBound(OPERATOR_TARGETS.idleWrites)} writes`,
    checks: [{ figure: "writes", value: writes, bound: OPERATOR_TARGETS.idleWrites }],
  });
  rows.push({
    metric: `${nodeCount} nodes: new API connections (TLS handshakes) and CPU while idle, leader election on`,
    value: `${connections} connections, ${((cpu / IDLE_SECONDS) * 100).toFixed(2)}% of a core (${idleConnections || "no connection opened or closed"})`,
    target: `${describeBound(OPERATOR_TARGETS.idleHandshakes)} handshakes`,
    checks: [{ figure: "handshakes", value: connections, bound: OPERATOR_TARGETS.idleHandshakes }],
  });
  const reconcileSeconds = await metric(port, "dpo_operator_reconcile_duration_seconds_sum");
  const reconciles = await metric(port, "dpo_operator_reconcile_duration_seconds_count");
  rows.push({
    metric: `${nodeCount} nodes: reconcile duration, mean of ${reconciles}`,
    value: `${((reconcileSeconds / Math.max(reconciles, 1)) * 1000).toFixed(1)} ms`,
    target: "(reported)",
  });
  const rss = rssMiB(operator.pid!).total;
  rows.push({
    metric: `${nodeCount} nodes: operator RSS`,
    value: `${rss.toFixed(1)} MiB (${await heapFigures(port, operator.pid!)})`,
    target: describeBound(OPERATOR_TARGETS.rssMiB),
    checks: [{ value: rss, bound: OPERATOR_TARGETS.rssMiB }],
  });
}
