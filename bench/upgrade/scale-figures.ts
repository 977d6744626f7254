// What a dpo rollout costs at scale, measured from outside the operator while it runs: the operator
// process's CPU and peak RSS (/proc), its writes (DaemonSets from its own dpo_operator_applies_total; Node
// patches of this config's rollout from its log, since that counter also counts the label cleanup of a
// config deleted earlier in the run), the
// largest DaemonSet the config has and the most a Node carries for it (ADR 0004: neither may grow with
// the node count), Node watch events per node, and how long each node carried the Replace fence.
import type { V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { readFileSync, statSync } from "node:fs";
import type { Informer } from "../../src/kube/informer.js";
import { nodeKeys } from "../../src/operator/model/targeting.js";
import { cpuSeconds, rssMiB } from "../proc.js";
import { percentile } from "../../tools/stats.js";
import { FenceTimes } from "../../tools/upgrade-load/fence-times.js";

export interface ScaleFigures {
  operatorCpuSeconds: number;
  operatorPeakRssMiB: number;
  /** The operator's Node patches for this config's rollout, and its DaemonSet writes, during the rollout. */
  nodePatches: number;
  /** Node patches that took a deleted config's labels off (an earlier scenario's), during the rollout. */
  cleanupPatches: number;
  daemonSetWrites: number;
  largestDaemonSetBytes: number;
  /** The most bytes of the config's labels, annotation and taint on one Node. */
  largestNodeAdditionBytes: number;
  nodeEventsPerNode: number;
  /** Per fenced node, seconds the Replace taint kept new pods off: p50, p99, max, and how many nodes. */
  fenced: { p50: number; p99: number; max: number; nodes: number };
}

/** The operator's rollout Node patches per config, and its cleanup patches, in its log from byte `from`. */
function nodePatchesInLog(logFile: string, from: number): { byConfig: Map<string, number>; cleanup: number } {
  const byConfig = new Map<string, number>();
  let cleanup = 0;
  const text = readFileSync(logFile).subarray(from).toString("utf8");
  for (const line of text.split("\n")) {
    if (!line.includes('"msg":"node labels for the plugin') && !line.includes('"msg":"took the config'))
      continue;
    try {
      const entry = JSON.parse(line) as { config?: string; nodes?: number; msg?: string };
      if (entry.msg?.startsWith("took the config")) cleanup += entry.nodes ?? 0;
      else byConfig.set(entry.config ?? "", (byConfig.get(entry.config ?? "") ?? 0) + 1);
    } catch {
      // A line cut by the read: not counted.
    }
  }
  return { byConfig, cleanup };
}

/** The operator's metrics port, from the "operator starting" line of its log. */
export function operatorMetricsPort(logFile: string): number | undefined {
  for (const line of readFileSync(logFile, "utf8").split("\n")) {
    if (!line.includes('"ports"')) continue;
    try {
      const ports = (JSON.parse(line) as { ports?: number[] }).ports;
      if (ports?.[0] !== undefined) return ports[0];
    } catch {
      // Not a JSON line.
    }
  }
  return undefined;
}

async function appliesByKind(port: number | undefined): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (port === undefined) return out;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  for (const m of text.matchAll(/^dpo_operator_applies_total\{kind="([^"]+)"\} (\d+)/gm)) {
    out.set(m[1]!, Number(m[2]));
  }
  return out;
}

function dpoBytes(node: V1Node, keys: ReturnType<typeof nodeKeys>): number {
  const labels = node.metadata?.labels ?? {};
  const own = {
    labels: { r: labels[keys.revision], s: labels[keys.surge] },
    annotation: node.metadata?.annotations?.[keys.upgrade],
    taint: node.spec?.taints?.find((t) => t.key === keys.replace),
  };
  return JSON.stringify([keys.revision, keys.surge, keys.upgrade, own]).length;
}

/** Starts measuring; `stop()` ends it and gives the figures. */
export async function startScaleFigures(options: {
  operatorPid: number;
  operatorLog: string;
  nodeInformer: Informer<V1Node>;
  daemonSets: Informer<V1DaemonSet>;
  nodes: readonly string[];
  config: string;
}): Promise<{ stop: () => Promise<ScaleFigures> }> {
  const { operatorPid, nodeInformer, daemonSets } = options;
  const keys = nodeKeys(options.config);
  const port = operatorMetricsPort(options.operatorLog);
  const appliesBefore = await appliesByKind(port);
  const logFrom = statSync(options.operatorLog).size;
  const cpuBefore = cpuSeconds(operatorPid);
  const targeted = new Set(options.nodes);
  let peakRss = rssMiB(operatorPid).total;
  let nodeEvents = 0;
  let largestDs = 0;
  let largestNode = 0;
  const fences = new FenceTimes(keys.replace);
  const sampler = setInterval(() => {
    try {
      peakRss = Math.max(peakRss, rssMiB(operatorPid).total);
    } catch {
      // The operator exited; the run fails elsewhere.
    }
  }, 500);
  const onDs = (ds: V1DaemonSet) => (largestDs = Math.max(largestDs, JSON.stringify(ds).length));
  for (const ds of daemonSets.list()) onDs(ds);
  const offDsAdd = daemonSets.onAdd(onDs);
  const offDsUpdate = daemonSets.onUpdate((_old, ds) => onDs(ds));
  const offNode = nodeInformer.onUpdate((_old, node) => {
    const name = node.metadata?.name ?? "";
    if (!targeted.has(name)) return;
    nodeEvents++;
    largestNode = Math.max(largestNode, dpoBytes(node, keys));
    fences.observe(node);
  });
  return {
    stop: async () => {
      clearInterval(sampler);
      offDsAdd();
      offDsUpdate();
      offNode();
      const appliesAfter = await appliesByKind(port);
      const delta = (kind: string) => (appliesAfter.get(kind) ?? 0) - (appliesBefore.get(kind) ?? 0);
      const seconds = [...fences.ms.values()].map((ms) => ms / 1000).sort((a, b) => a - b);
      return {
        operatorCpuSeconds: cpuSeconds(operatorPid) - cpuBefore,
        operatorPeakRssMiB: peakRss,
        ...((): { nodePatches: number; cleanupPatches: number } => {
          const inLog = nodePatchesInLog(options.operatorLog, logFrom);
          return { nodePatches: inLog.byConfig.get(options.config) ?? 0, cleanupPatches: inLog.cleanup };
        })(),
        daemonSetWrites: delta("DaemonSet"),
        largestDaemonSetBytes: largestDs,
        largestNodeAdditionBytes: largestNode,
        nodeEventsPerNode: nodeEvents / Math.max(1, options.nodes.length),
        fenced: {
          p50: seconds.length > 0 ? percentile(seconds, 50) : 0,
          p99: seconds.length > 0 ? percentile(seconds, 99) : 0,
          max: seconds.at(-1) ?? 0,
          nodes: seconds.length,
        },
      };
    },
  };
}

/** One line for the report. */
export function formatScaleFigures(label: string, nodes: number, f: ScaleFigures): string {
  return (
    `${label}: operator ${f.operatorCpuSeconds.toFixed(1)} CPU s, peak RSS ${f.operatorPeakRssMiB.toFixed(0)} MiB; ` +
    `writes: ${(f.nodePatches / nodes).toFixed(2)} Node patches per node (and ${f.cleanupPatches} cleaning up an earlier config), ${f.daemonSetWrites} DaemonSet writes; ` +
    `largest DaemonSet ${f.largestDaemonSetBytes} B, most a Node carries for the config ${f.largestNodeAdditionBytes} B; ` +
    `${f.nodeEventsPerNode.toFixed(1)} Node watch events per node; fenced ${f.fenced.nodes} nodes, ` +
    `p50 ${f.fenced.p50.toFixed(2)} s, p99 ${f.fenced.p99.toFixed(2)} s, max ${f.fenced.max.toFixed(2)} s`
  );
}
