// bench-upgrade's tables: rollout and allocatable-0 windows, plugin memory, and where a node's time goes.
import { percentile } from "../../tools/stats.js";
import {
  ADMISSION_INTERVAL_MS,
  KUBELET_VERSION,
  MAX_UNAVAILABLE,
  NODE_COUNT,
  PLUGIN_MODE,
  SCHEDULED_HOLD_MS,
  SCHEDULED_PODS_PER_S,
  WORKERS,
} from "./knobs.js";
import type { Result, Scenario } from "./rollout.js";
import { judgeUpgrade, upgradeTarget, type UpgradeRun } from "./targets.js";

function fmtS(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function fmtMs(ms: number): string {
  return ms >= 10_000 ? fmtS(ms) : `${Math.round(ms)} ms`;
}

/** The tables of a run, after a line that says what ran, and a line with Node and the time. */
export function printReport(results: readonly Result[], run: UpgradeRun): void {
  const label: Record<Scenario, string> = {
    surge: "dpo, Surge",
    replace: "dpo, Replace",
    standby: "dpo, Auto (standby)",
    takeover: "dpo, takeover from a DaemonSet",
    baseline: `DaemonSet RollingUpdate, maxUnavailable ${MAX_UNAVAILABLE.nodes}`,
  };
  const ok = (r: Result): string => {
    if (r.scenario === "baseline") return "";
    return judgeUpgrade([r], run).length === 0 ? "ok" : "MISSED";
  };
  console.log(
    `\nbench-upgrade: ${NODE_COUNT} nodes (kubelets ${KUBELET_VERSION}, plugins ${PLUGIN_MODE === "processless" ? "processless" : "as processes"}), maxUnavailable ${MAX_UNAVAILABLE.dpo}, ${WORKERS} admissions in flight, one per node per ${ADMISSION_INTERVAL_MS} ms at most\n`,
  );
  console.log(
    "| scenario | rollout | allocatable-0 window per node: p50 / p99 / max (nodes at 0) | failed admissions | target | |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const r of results) {
    const w = r.zeroWindowsMs;
    const rollout =
      r.completeMs === undefined
        ? fmtS(r.rolloutMs)
        : `${fmtS(r.rolloutMs)} (status Complete ${fmtS(r.completeMs)})`;
    console.log(
      `| ${label[r.scenario]} | ${rollout} | ${fmtMs(percentile(w, 50))} / ${fmtMs(percentile(w, 99))} / ${fmtMs(Math.max(...w))} (${r.nodesAtZero}) | ${r.failures} of ${r.admissions + r.failures} (${r.failedNodes} nodes) | ${upgradeTarget(r.scenario, run)} | ${ok(r)} |`,
    );
  }
  console.log(
    `\nPods through the scheduler (${SCHEDULED_PODS_PER_S} a second, one device each, deleted ${SCHEDULED_HOLD_MS} ms after they run):\n`,
  );
  console.log("| scenario | created | admitted | UnexpectedAdmissionError (nodes) | other rejections |");
  console.log("|---|---|---|---|---|");
  for (const r of results) {
    const s = r.scheduled;
    console.log(
      `| ${label[r.scenario]} | ${s.created} | ${s.admitted} | ${s.unexpectedAdmission} (${s.rejectedNodes}) | ${s.otherRejections} |`,
    );
  }
  if (PLUGIN_MODE === "processless") {
    console.log(
      "\n| scenario | benchmark process RSS (max): simulator and processless plugins | MemAvailable at the lowest |",
    );
    console.log("|---|---|---|");
    for (const r of results) {
      console.log(
        `| ${label[r.scenario]} | ${(r.peakBenchRssMiB / 1024).toFixed(2)} GiB (${((r.peakBenchRssMiB * 1024) / NODE_COUNT).toFixed(0)} KiB per node) | ${(r.minMemAvailableMiB / 1024).toFixed(1)} GiB |`,
      );
    }
  } else {
    console.log(
      "\n| scenario | plugin processes at once (max) | their RSS summed (max) | RSS per process p50 / max (anonymous p50) | MemAvailable at the peak |",
    );
    console.log("|---|---|---|---|---|");
    for (const r of results) {
      console.log(
        `| ${label[r.scenario]} | ${r.peakProcesses} | ${(r.peakPluginRssMiB / 1024).toFixed(2)} GiB | ${percentile(r.rssPerProcessMiB, 50).toFixed(1)} / ${Math.max(...r.rssPerProcessMiB).toFixed(1)} MiB (${percentile(r.anonPerProcessMiB, 50).toFixed(1)} MiB) | ${(r.minMemAvailableMiB / 1024).toFixed(1)} GiB (${((r.memAvailableAfterMiB ?? NaN) / 1024).toFixed(1)} GiB once they were gone: ${(((r.memAvailableAfterMiB ?? NaN) - r.minMemAvailableMiB) / r.peakProcesses).toFixed(1)} MiB per process) |`,
      );
    }
  }
  console.log("\nWhere a node's time goes (ms after the node's first step, p50 / p99 over nodes):\n");
  for (const r of results) {
    console.log(
      `- ${label[r.scenario]}: ${r.steps.map((s) => `${s.step} ${Math.round(s.p50)} / ${Math.round(s.p99)}`).join(" → ")}`,
    );
  }
  console.log(
    "\nBetween two steps that follow each other on a node (p50 / p99 over the nodes where they do):\n",
  );
  for (const r of results) {
    console.log(
      `- ${label[r.scenario]}: ${r.gaps
        .filter((g) => g.nodes >= r.gaps[0]!.nodes / 2)
        .map((g) => `${g.from} → ${g.to} ${Math.round(g.p50)} / ${Math.round(g.p99)}`)
        .join("; ")}`,
    );
  }
  for (const r of results) {
    if (r.holders !== undefined)
      console.log(
        `\n${label[r.scenario]}: ${r.holders.pods - r.holders.lost} of ${r.holders.pods} pods that held a device from before kept it${r.holders.samples.length > 0 ? `; lost such as ${r.holders.samples.map((s) => JSON.stringify(s)).join(", ")}` : ""}`,
      );
    if (r.scheduled.samples.length > 0)
      console.log(
        `\n${label[r.scenario]}: scheduled pods rejected such as ${r.scheduled.samples.map((s) => JSON.stringify(s)).join(", ")}`,
      );
    if (r.failureSamples.length > 0)
      console.log(
        `\n${label[r.scenario]}: failures such as ${r.failureSamples.map((s) => JSON.stringify(s)).join(", ")}`,
      );
  }
  console.log(`\nnode ${process.version}, ${new Date().toISOString()}`);
}
