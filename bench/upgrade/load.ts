// What runs beside a rollout: a workload asking every node's kubelet for a device, and a sampler of the
// plugin processes' memory.
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { memAvailableMiB, rssMiB, type Rss } from "../proc.js";
import { ADMISSION_INTERVAL_MS, WORKERS } from "./knobs.js";

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

/** Plugin processes and memory while a scenario runs, sampled every second. */
export function startMemorySampler(sim: KubeletSimulator): {
  stop(): {
    peakProcesses: number;
    peakRss: number;
    perProcess: number[];
    anonPerProcess: number[];
    minAvailable: number;
  };
} {
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
  };
  sample();
  const timer = setInterval(sample, 1_000);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { peakProcesses, peakRss, perProcess, anonPerProcess, minAvailable };
    },
  };
}
