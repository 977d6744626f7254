// What runs beside a rollout: a workload asking every node's kubelet for a device, and a sampler of the
// plugin processes' memory.
import type { KubeConfig } from "@kubernetes/client-node";
import { setTimeout as sleep } from "node:timers/promises";
import { podStream } from "../../tools/upgrade-load/pod-stream.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { memAvailableMiB, rssMiB, type Rss } from "../proc.js";
import {
  ADMISSION_INTERVAL_MS,
  SCHEDULED_HOLD_MS,
  SCHEDULED_PODS_PER_S,
  WORKERS,
  WORKLOAD_NAMESPACE,
} from "./knobs.js";

/**
 * A plugin process's RSS, or undefined once it is gone. Its file-backed part (the node binary, the bundle)
 * is pages every plugin process shares through the page cache, so N processes cost about N × anonymous.
 */
function pluginRss(pid: number): Rss | undefined {
  try {
    return rssMiB(pid);
  } catch {
    return undefined;
  }
}

/** A workload on every node: one device at a time, like pods admitted one after another. */
export function startWorkload(
  sim: KubeletSimulator,
  nodes: readonly string[],
  resource: string,
): { stop(): Promise<{ admissions: number; failures: number; failedNodes: number; samples: string[] }> } {
  let admissions = 0;
  const failures: string[] = [];
  const failedNodes = new Set<string>();
  const lastAttempt = new Map<string, number>();
  let next = 0;
  let stopped = false;
  const worker = async (): Promise<void> => {
    while (!stopped) {
      const node = nodes[next++ % nodes.length]!;
      const wait = (lastAttempt.get(node) ?? -Infinity) + ADMISSION_INTERVAL_MS - performance.now();
      if (wait > 0) await sleep(wait);
      lastAttempt.set(node, performance.now());
      try {
        await sim.allocate(node, resource, 1);
        admissions++;
      } catch (err) {
        failures.push(`${node}: ${(err as Error).message}`);
        failedNodes.add(node);
      }
      // The simulated device manager keeps what it handed out; give it back like a finished pod.
      sim.deviceManager(node).resources.get(resource)?.allocated.clear();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  const workers = Array.from({ length: Math.min(WORKERS, nodes.length) }, () => worker());
  return {
    async stop() {
      stopped = true;
      await Promise.all(workers);
      const distinct = [...new Set(failures.map((f) => f.replace(/^[^:]+: /, "")))].slice(0, 3);
      return { admissions, failures: failures.length, failedNodes: failedNodes.size, samples: distinct };
    },
  };
}

/** What became of the pods the scheduled workload created. */
export interface ScheduledFigures {
  created: number;
  admitted: number;
  /** Rejected at admission with UnexpectedAdmissionError (the plugin's devices gone), and otherwise. */
  unexpectedAdmission: number;
  otherRejections: number;
  /** Nodes where a pod was rejected with UnexpectedAdmissionError. */
  rejectedNodes: number;
  samples: string[];
}

/**
 * A workload that goes through the real scheduler: SCHEDULED_PODS_PER_S pods a second, each asking for one
 * device of `resource`, created through the API, bound by kube-scheduler to a node whose Node object
 * advertises one, and admitted or rejected there by the simulated kubelet (UnexpectedAdmissionError when
 * the node's plugin has no healthy device at that moment); each is deleted SCHEDULED_HOLD_MS after it runs.
 */
export function startScheduledWorkload(
  kc: KubeConfig,
  resource: string,
  config: string,
): { stop(): Promise<ScheduledFigures> } {
  if (SCHEDULED_PODS_PER_S === 0) {
    const none = { created: 0, admitted: 0, unexpectedAdmission: 0, otherRejections: 0, rejectedNodes: 0 };
    return { stop: () => Promise.resolve({ ...none, samples: [] }) };
  }
  const stream = podStream(kc, WORKLOAD_NAMESPACE, resource, {
    perSecond: SCHEDULED_PODS_PER_S,
    holdMs: SCHEDULED_HOLD_MS,
    name: `${config}-scheduled`,
  });
  return {
    async stop() {
      const result = await stream.stop();
      const unexpected = result.rejected.filter((r) => r.reason === "UnexpectedAdmissionError");
      return {
        created: result.created,
        admitted: [...result.admitted.values()].reduce((a, b) => a + b, 0),
        unexpectedAdmission: unexpected.length,
        otherRejections: result.rejected.length - unexpected.length,
        rejectedNodes: new Set(unexpected.map((r) => r.node)).size,
        samples: [...new Set(result.rejected.map((r) => `${r.reason}: ${r.message}`))].slice(0, 3),
      };
    },
  };
}

/** Plugin processes and memory while a scenario runs, sampled every second. */
export function startMemorySampler(sim: KubeletSimulator): {
  stop(): {
    peakProcesses: number;
    peakRss: number;
    perProcess: number[];
    anonPerProcess: number[];
    minAvailable: number;
    /** This process's own RSS at most: the simulator, and every plugin in the processless mode. */
    peakSelfRss: number;
  };
} {
  let peakSelfRss = 0;
  let peakProcesses = 0;
  let peakRss = 0;
  let minAvailable = Infinity;
  const perProcess: number[] = [];
  const anonPerProcess: number[] = [];
  const sample = (): void => {
    const running = sim.plugins().filter((p) => p.running && p.pid !== undefined);
    const mem = running.map((p) => pluginRss(p.pid!)).filter((v) => v !== undefined && v.total > 0);
    const rss = mem.map((m) => m!.total);
    anonPerProcess.push(...mem.map((m) => m!.anonymous));
    const sum = rss.reduce((a, b) => a + b, 0);
    peakProcesses = Math.max(peakProcesses, running.length);
    if (sum > peakRss) peakRss = sum;
    perProcess.push(...rss);
    minAvailable = Math.min(minAvailable, memAvailableMiB());
    peakSelfRss = Math.max(peakSelfRss, process.memoryUsage.rss() / 2 ** 20);
  };
  sample();
  const timer = setInterval(sample, 1_000);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { peakProcesses, peakRss, perProcess, anonPerProcess, minAvailable, peakSelfRss };
    },
  };
}
