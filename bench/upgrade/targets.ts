// bench-upgrade's targets, each a bound on a figure of a scenario's result, and the judge of a run.
import { percentile } from "../../tools/stats.js";
import { atMost, check, describeBound, type Bound, type Miss } from "../targets.js";
import type { PluginMode } from "./knobs.js";
import type { ScheduledFigures } from "./load.js";
import type { HolderFigures, Result, Scenario } from "./rollout.js";
import type { ScaleFigures } from "./scale-figures.js";

/** The bounds docs/benchmarks.md states for bench-upgrade. */
export const UPGRADE_TARGETS = {
  /** Surge: no node ever at 0 devices (the longest allocatable-0 window of any node). */
  surgeWindowMaxMs: atMost(0, "ms"),
  /** Surge: no direct admission failed. */
  surgeFailedAdmissions: atMost(0),
  /**
   * Replace, and Auto with the new plugin standing by: the allocatable-0 window's p99 over the nodes, with real
   * plugin processes (a processless run at scale measures the control plane, whose windows are longer).
   */
  replaceWindowP99Ms: atMost(1_000, "ms"),
  /** dpo's scenarios: no pod through the scheduler rejected with UnexpectedAdmissionError. */
  scheduledUnexpectedAdmissions: atMost(0),
  /** The operator's Node patches per node for a config's rollout, by strategy (ADR 0004, ADR 0005). */
  nodePatchesPerNode: { surge: atMost(2), standby: atMost(3), replace: atMost(4), takeover: atMost(2) },
  /** No object the operator writes grows past 100 KiB (ADR 0004): the DaemonSet, what a Node carries. */
  objectBytes: atMost(100 * 1024, "B"),
  /** Surge at 5000 nodes with maxUnavailable 10%: the rollout, in minutes. */
  surgeRolloutAt5000Min: atMost(20, "min"),
  /**
   * The takeover (ADR 0012, a Surge handover on v1.37 kubelets): no node at 0 devices and no failed direct
   * admission, as Surge; every pod that held a device from before it still runs with that device.
   */
  takeoverWindowMaxMs: atMost(0, "ms"),
  takeoverFailedAdmissions: atMost(0),
  takeoverHoldersLost: atMost(0),
  /**
   * The takeover's rollout against the dpo-to-dpo Surge upgrade of the same run (same nodes, same
   * maxUnavailable): the handover from a DaemonSet dpo does not own may cost its extra reads, not a
   * different pace.
   */
  takeoverRolloutVsSurge: atMost(1.5, "×"),
} as const;

/** The run's setting that decides which targets apply. */
export interface UpgradeRun {
  nodes: number;
  /** spec.upgrade.maxUnavailable as given: a node count, or a share such as "10%". */
  maxUnavailable: number | string;
  /** Real plugin processes, or the simulator playing them (DPO_BENCH_PLUGIN_MODE). */
  pluginMode: PluginMode;
  /** The operator Deployment's memory limit in MiB, its peak RSS's bound; undefined: none to hold it to. */
  operatorMemoryLimitMiB: number | undefined;
}

/** What the judge reads of a scenario's result. */
export type JudgedResult = Pick<Result, "scenario" | "rolloutMs" | "zeroWindowsMs" | "failures"> & {
  /** The takeover's: a takeover without them misses. */
  holders?: Pick<HolderFigures, "lost">;
  scheduled: Pick<ScheduledFigures, "unexpectedAdmission">;
  /** The operator's figures over the rollout (dpo's scenarios); a dpo scenario without them misses. */
  scale?: Pick<
    ScaleFigures,
    "operatorPeakRssMiB" | "nodePatches" | "largestDaemonSetBytes" | "largestNodeAdditionBytes"
  >;
};

const LABELS: Record<Scenario, string> = {
  surge: "dpo, Surge",
  replace: "dpo, Replace",
  standby: "dpo, Auto (standby)",
  takeover: "dpo, takeover",
  baseline: "DaemonSet RollingUpdate",
};

/** The largest of `values`; NaN for none, which holds no bound. */
function maxOf(values: readonly number[]): number {
  return values.length === 0 ? NaN : Math.max(...values);
}

/** The printed target of a scenario, in the main table. */
export function upgradeTarget(scenario: Scenario, run: UpgradeRun): string {
  const t = UPGRADE_TARGETS;
  if (scenario === "baseline") return "(failures expected)";
  const window =
    scenario === "surge"
      ? `window max ${describeBound(t.surgeWindowMaxMs)}, ${describeBound(t.surgeFailedAdmissions)} failed`
      : scenario === "takeover"
        ? `window max ${describeBound(t.takeoverWindowMaxMs)}, ${describeBound(t.takeoverFailedAdmissions)} failed, ${describeBound(t.takeoverHoldersLost)} holders lost, rollout ${describeBound(t.takeoverRolloutVsSurge)} Surge's`
        : run.pluginMode === "process"
          ? `window p99 ${describeBound(t.replaceWindowP99Ms)}`
          : "window (reported: processless)";
  return `${window}, ${describeBound(t.scheduledUnexpectedAdmissions)} UnexpectedAdmissionError`;
}

/**
 * The targets the run's results missed, each with its measured figure and bound; none when all held. The
 * takeover's rollout is held to the Surge upgrade's of the same run, when the run has one.
 */
export function judgeUpgrade(results: readonly JudgedResult[], run: UpgradeRun): Miss[] {
  const t = UPGRADE_TARGETS;
  const surgeMs = results.find((r) => r.scenario === "surge")?.rolloutMs;
  return results.flatMap((r): Miss[] => {
    if (r.scenario === "baseline") return [];
    const label = `${LABELS[r.scenario]}, ${run.nodes} nodes`;
    const misses: Miss[] = [];
    if (r.scenario === "surge") {
      misses.push(
        ...check(`${label}: allocatable-0 window, max`, maxOf(r.zeroWindowsMs), t.surgeWindowMaxMs),
      );
      misses.push(...check(`${label}: failed direct admissions`, r.failures, t.surgeFailedAdmissions));
      if (run.nodes >= 5000 && run.maxUnavailable === "10%")
        misses.push(...check(`${label}: rollout at 10%`, r.rolloutMs / 60_000, t.surgeRolloutAt5000Min));
    } else if (r.scenario === "takeover") {
      misses.push(
        ...check(`${label}: allocatable-0 window, max`, maxOf(r.zeroWindowsMs), t.takeoverWindowMaxMs),
      );
      misses.push(...check(`${label}: failed direct admissions`, r.failures, t.takeoverFailedAdmissions));
      misses.push(
        ...check(
          `${label}: pods that held a device and lost it`,
          r.holders?.lost ?? NaN,
          t.takeoverHoldersLost,
        ),
      );
      if (surgeMs !== undefined)
        misses.push(
          ...check(
            `${label}: rollout against dpo's Surge upgrade`,
            r.rolloutMs / surgeMs,
            t.takeoverRolloutVsSurge,
          ),
        );
    } else if (run.pluginMode === "process") {
      misses.push(
        ...check(
          `${label}: allocatable-0 window, p99`,
          percentile(r.zeroWindowsMs, 99),
          t.replaceWindowP99Ms,
        ),
      );
    }
    misses.push(
      ...check(
        `${label}: scheduled pods rejected with UnexpectedAdmissionError`,
        r.scheduled.unexpectedAdmission,
        t.scheduledUnexpectedAdmissions,
      ),
    );
    const s = r.scale;
    const bound: Bound = t.nodePatchesPerNode[r.scenario];
    misses.push(
      ...check(`${label}: Node patches per node`, s === undefined ? NaN : s.nodePatches / run.nodes, bound),
    );
    misses.push(...check(`${label}: largest DaemonSet`, s?.largestDaemonSetBytes ?? NaN, t.objectBytes));
    misses.push(
      ...check(
        `${label}: most a Node carries for the config`,
        s?.largestNodeAdditionBytes ?? NaN,
        t.objectBytes,
      ),
    );
    if (run.operatorMemoryLimitMiB !== undefined)
      misses.push(
        ...check(
          `${label}: operator peak RSS`,
          s?.operatorPeakRssMiB ?? NaN,
          atMost(run.operatorMemoryLimitMiB, "MiB"),
        ),
      );
    return misses;
  });
}
