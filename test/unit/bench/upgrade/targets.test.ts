// bench-upgrade's judge: each stated target (docs/benchmarks.md) of dpo's scenarios held by a figure just
// inside its bound and missed by one just outside, the baseline never judged, and a miss exiting non-zero.
import { describe, expect, it } from "vitest";
import { exitStatus } from "../../../../bench/targets.js";
import { judgeUpgrade, type JudgedResult, type UpgradeRun } from "../../../../bench/upgrade/targets.js";

const RUN: UpgradeRun = { nodes: 100, maxUnavailable: 1, pluginMode: "process", operatorMemoryLimitMiB: 256 };
const AT_5000: UpgradeRun = {
  nodes: 5000,
  maxUnavailable: "10%",
  pluginMode: "processless",
  operatorMemoryLimitMiB: 256,
};

/** 100 per-node windows: the p99 (nearest rank) is `p99`, the largest above it. */
function windows(p99: number): number[] {
  return [...Array.from({ length: 98 }, () => 0), p99, p99 + 500];
}

/** A scenario's result that holds every target at `nodes` nodes. */
function passing(scenario: JudgedResult["scenario"], nodes = 100): JudgedResult {
  const patches = { surge: 2, standby: 3, replace: 4, takeover: 2, baseline: 0 }[scenario];
  const surgeLike = scenario === "surge" || scenario === "takeover";
  return {
    scenario,
    rolloutMs: 60_000,
    zeroWindowsMs: surgeLike ? Array.from({ length: nodes }, () => 0) : windows(400),
    failures: surgeLike ? 0 : 15,
    ...(scenario === "takeover" ? { holders: { lost: 0 } } : {}),
    scheduled: { unexpectedAdmission: 0 },
    scale: {
      operatorPeakRssMiB: 150,
      nodePatches: patches * nodes,
      largestDaemonSetBytes: 7_800,
      largestNodeAdditionBytes: 226,
    },
  };
}

type Case = { what: string; inside: JudgedResult; outside: JudgedResult; metric: string; run?: UpgradeRun };

const surge = passing("surge");
const replace = passing("replace");
const standby = passing("standby");
const takeover = passing("takeover");

describe("judgeUpgrade", () => {
  it.each<Case>([
    {
      what: "Surge: no node at 0 devices",
      inside: surge,
      outside: { ...surge, zeroWindowsMs: [...surge.zeroWindowsMs.slice(1), 1] },
      metric: "dpo, Surge, 100 nodes: allocatable-0 window, max",
    },
    {
      what: "Surge: no failed direct admission",
      inside: surge,
      outside: { ...surge, failures: 1 },
      metric: "dpo, Surge, 100 nodes: failed direct admissions",
    },
    {
      what: "Replace: window p99 ≤ 1 s",
      inside: { ...replace, zeroWindowsMs: windows(1_000) },
      outside: { ...replace, zeroWindowsMs: windows(1_001) },
      metric: "dpo, Replace, 100 nodes: allocatable-0 window, p99",
    },
    {
      what: "standby: window p99 ≤ 1 s",
      inside: { ...standby, zeroWindowsMs: windows(1_000) },
      outside: { ...standby, zeroWindowsMs: windows(1_001) },
      metric: "dpo, Auto (standby), 100 nodes: allocatable-0 window, p99",
    },
    {
      what: "no scheduled pod rejected with UnexpectedAdmissionError",
      inside: replace,
      outside: { ...replace, scheduled: { unexpectedAdmission: 1 } },
      metric: "dpo, Replace, 100 nodes: scheduled pods rejected with UnexpectedAdmissionError",
    },
    {
      what: "Surge: 2 Node patches per node",
      inside: surge,
      outside: { ...surge, scale: { ...surge.scale!, nodePatches: 201 } },
      metric: "dpo, Surge, 100 nodes: Node patches per node",
    },
    {
      what: "standby: 3 Node patches per node",
      inside: standby,
      outside: { ...standby, scale: { ...standby.scale!, nodePatches: 301 } },
      metric: "dpo, Auto (standby), 100 nodes: Node patches per node",
    },
    {
      what: "Replace: 4 Node patches per node",
      inside: replace,
      outside: { ...replace, scale: { ...replace.scale!, nodePatches: 401 } },
      metric: "dpo, Replace, 100 nodes: Node patches per node",
    },
    {
      what: "the largest DaemonSet ≤ 100 KiB",
      inside: { ...surge, scale: { ...surge.scale!, largestDaemonSetBytes: 102_400 } },
      outside: { ...surge, scale: { ...surge.scale!, largestDaemonSetBytes: 102_401 } },
      metric: "dpo, Surge, 100 nodes: largest DaemonSet",
    },
    {
      what: "what a Node carries ≤ 100 KiB",
      inside: { ...surge, scale: { ...surge.scale!, largestNodeAdditionBytes: 102_400 } },
      outside: { ...surge, scale: { ...surge.scale!, largestNodeAdditionBytes: 102_401 } },
      metric: "dpo, Surge, 100 nodes: most a Node carries for the config",
    },
    {
      what: "the operator's peak RSS within its Deployment's limit",
      inside: { ...surge, scale: { ...surge.scale!, operatorPeakRssMiB: 256 } },
      outside: { ...surge, scale: { ...surge.scale!, operatorPeakRssMiB: 256.5 } },
      metric: "dpo, Surge, 100 nodes: operator peak RSS",
    },
    {
      what: "Surge at 5000 nodes and 10%: rollout ≤ 20 min",
      inside: { ...passing("surge", 5000), rolloutMs: 20 * 60_000 },
      outside: { ...passing("surge", 5000), rolloutMs: 20 * 60_000 + 6_000 },
      metric: "dpo, Surge, 5000 nodes: rollout at 10%",
      run: AT_5000,
    },
  ])("$what: held just inside, missed just outside", ({ inside, outside, metric, run }) => {
    expect(judgeUpgrade([inside], run ?? RUN)).toEqual([]);
    const misses = judgeUpgrade([outside], run ?? RUN);
    expect(misses.map((m) => m.metric)).toEqual([metric]);
    expect(exitStatus(misses, false)).toBe(1);
  });

  it.each<Case>([
    {
      what: "takeover: no node at 0 devices",
      inside: takeover,
      outside: { ...takeover, zeroWindowsMs: [...takeover.zeroWindowsMs.slice(1), 1] },
      metric: "dpo, takeover, 100 nodes: allocatable-0 window, max",
    },
    {
      what: "takeover: no failed direct admission",
      inside: takeover,
      outside: { ...takeover, failures: 1 },
      metric: "dpo, takeover, 100 nodes: failed direct admissions",
    },
    {
      what: "takeover: every pod that held a device keeps it",
      inside: takeover,
      outside: { ...takeover, holders: { lost: 1 } },
      metric: "dpo, takeover, 100 nodes: pods that held a device and lost it",
    },
    {
      what: "takeover: no scheduled pod rejected with UnexpectedAdmissionError",
      inside: takeover,
      outside: { ...takeover, scheduled: { unexpectedAdmission: 1 } },
      metric: "dpo, takeover, 100 nodes: scheduled pods rejected with UnexpectedAdmissionError",
    },
    {
      what: "takeover: 2 Node patches per node",
      inside: takeover,
      outside: { ...takeover, scale: { ...takeover.scale!, nodePatches: 201 } },
      metric: "dpo, takeover, 100 nodes: Node patches per node",
    },
    {
      what: "takeover: the operator's peak RSS within its Deployment's limit",
      inside: { ...takeover, scale: { ...takeover.scale!, operatorPeakRssMiB: 256 } },
      outside: { ...takeover, scale: { ...takeover.scale!, operatorPeakRssMiB: 257 } },
      metric: "dpo, takeover, 100 nodes: operator peak RSS",
    },
  ])("$what: held just inside, missed just outside", ({ inside, outside, metric }) => {
    expect(judgeUpgrade([inside], RUN)).toEqual([]);
    const misses = judgeUpgrade([outside], RUN);
    expect(misses.map((m) => m.metric)).toEqual([metric]);
    expect(exitStatus(misses, false)).toBe(1);
  });

  it("holds the takeover's rollout to 1.5× the Surge upgrade's of the same run", () => {
    const surge60 = { ...surge, rolloutMs: 60_000 };
    expect(judgeUpgrade([surge60, { ...takeover, rolloutMs: 90_000 }], RUN)).toEqual([]);
    expect(judgeUpgrade([surge60, { ...takeover, rolloutMs: 90_600 }], RUN)).toEqual([
      {
        metric: "dpo, takeover, 100 nodes: rollout against dpo's Surge upgrade",
        target: "≤ 1.50 ×",
        measured: "1.51 ×",
      },
    ]);
    // Alone (no Surge upgrade in the run), its rollout is reported, not judged.
    expect(judgeUpgrade([{ ...takeover, rolloutMs: 600_000 }], RUN)).toEqual([]);
  });

  it("misses a takeover that measured no holders", () => {
    const { holders: _holders, ...without } = takeover;
    expect(judgeUpgrade([without], RUN)).toEqual([
      {
        metric: "dpo, takeover, 100 nodes: pods that held a device and lost it",
        target: "≤ 0",
        measured: "not measured (no samples)",
      },
    ]);
  });

  it("names the measured figure and the bound", () => {
    expect(judgeUpgrade([{ ...replace, zeroWindowsMs: windows(1_607) }], RUN)).toEqual([
      {
        metric: "dpo, Replace, 100 nodes: allocatable-0 window, p99",
        target: "≤ 1000 ms",
        measured: "1607 ms",
      },
    ]);
  });

  it("holds the rollout time only at 5000 nodes with maxUnavailable 10%", () => {
    const slow = { ...passing("surge", 5000), rolloutMs: 48 * 60_000 };
    expect(judgeUpgrade([slow], { ...AT_5000, maxUnavailable: "1%" })).toEqual([]);
    expect(judgeUpgrade([slow], AT_5000)).toHaveLength(1);
  });

  it("holds the Replace window only with real plugin processes, where a processless run's is the control plane's", () => {
    const long = { ...replace, zeroWindowsMs: windows(39_400) };
    const processless: UpgradeRun = { ...RUN, nodes: 100, pluginMode: "processless" };
    expect(judgeUpgrade([long], processless)).toEqual([]);
    expect(judgeUpgrade([long], RUN).map((m) => m.metric)).toEqual([
      "dpo, Replace, 100 nodes: allocatable-0 window, p99",
    ]);
  });

  it("does not judge the baseline, whose failures are expected", () => {
    const baseline = { ...passing("baseline"), zeroWindowsMs: windows(9_000), failures: 500 };
    expect(judgeUpgrade([{ ...baseline, scheduled: { unexpectedAdmission: 40 } }], RUN)).toEqual([]);
  });

  it("misses the operator's figures of a dpo scenario that has none", () => {
    const { scale: _scale, ...without } = surge;
    expect(judgeUpgrade([without], RUN).map((m) => m.measured)).toEqual([
      "not measured (no samples)",
      "not measured (no samples)",
      "not measured (no samples)",
      "not measured (no samples)",
    ]);
  });

  it("holds no peak RSS where the Deployment sets no memory limit", () => {
    const big = { ...surge, scale: { ...surge.scale!, operatorPeakRssMiB: 900 } };
    expect(judgeUpgrade([big], { ...RUN, operatorMemoryLimitMiB: undefined })).toEqual([]);
  });

  it("judges every scenario of a run, and exits 0 when each held", () => {
    const misses = judgeUpgrade([passing("baseline"), surge, replace], RUN);
    expect(misses).toEqual([]);
    expect(exitStatus(misses, false)).toBe(0);
  });
});
