// The health flap storm: a share of the nodes flipping a device's health once a second through their
// report writers, and the operator's status writes it causes, from a watch, its metric and the audit log.
import { Watch, type CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { parseAuditLog } from "../../tools/cluster/audit.js";
import type { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { maxInWindow, minGap } from "../../tools/stats.js";
import { FLAP_SECONDS, FLAP_SHARE, GROUP, STATUS_WRITE_INTERVAL_MS } from "./knobs.js";
import { metric } from "./metrics.js";
import { OPERATOR_TARGETS, type Row } from "./targets.js";

/**
 * FLAP_SHARE of the nodes flip device 0 once a second for FLAP_SECONDS, spread evenly over each second.
 * Counts the operator's status writes of the config (watch events with a new resourceVersion, and its
 * own metric) and how fast the status is right again afterwards.
 */
export async function flapStorm(
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
  await fleet.flapStorm(flappers, FLAP_SECONDS);
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
  });
  const perWindow = maxInWindow(changes, STATUS_WRITE_INTERVAL_MS);
  const gap = minGap(changes);
  rows.push({
    metric: `${nodeCount} nodes: flap storm: operator status writes of the config (${(stormMs / 1000).toFixed(0)} s storm)`,
    value: `${writes} writes (${changes.length} seen on a watch); max ${perWindow} in any ${STATUS_WRITE_INTERVAL_MS} ms, closest two ${Number.isFinite(gap) ? gap.toFixed(0) : "-"} ms apart`,
    target: `(a watch's delivery)`,
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
    target: `≤ 1 per ${STATUS_WRITE_INTERVAL_MS} ms, at least one`,
    checks: [
      {
        figure: "writes in the audit log",
        value: audited.length,
        bound: OPERATOR_TARGETS.auditedStatusWrites,
      },
      {
        figure: `most arriving in any ${STATUS_WRITE_INTERVAL_MS} ms`,
        value: auditedPerWindow,
        bound: OPERATOR_TARGETS.statusWritesPerInterval,
      },
    ],
  });
  rows.push({
    metric: `${nodeCount} nodes: flap storm end → status right again`,
    value: `${settledMs.toFixed(0)} ms`,
    target: "(reported)",
  });
}
