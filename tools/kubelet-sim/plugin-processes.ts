// The plugin pods of the simulated nodes, run as the kubelet runs their containers: the real `dpo plugin`
// process per pod, its readiness probe, its status written to the pod, and its stop when the pod goes.
import type { V1Pod } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { constants as osConstants } from "node:os";
import type { Logger } from "pino";
import { PluginProcess, type ExitStatus } from "./container-runtime.js";
import type { KubeletApi } from "./kubelet-api.js";
import { desiredPluginPods } from "./plugin-pod.js";
import type { PodRecord, PreparedPod } from "./node-pods.js";
import { preparePluginPod, type PluginSetupOptions } from "./plugin-setup.js";
import { runningPodStatus } from "./pod-admission.js";
import { ReadinessProber } from "./readiness-prober.js";
import type { SimulatedNode } from "./simulated-node.js";

const osSignals: Partial<Record<string, number>> = osConstants.signals;
/** How soon a pod status the API server did not take is written again. */
const STATUS_RETRY_MS = 1_000;

/** One plugin process as a test sees it. */
export interface PluginProcessInfo {
  node: string;
  /** `namespace/name` of the pod the process stands for. */
  pod: string;
  podUid: string;
  /** The DaemonSet the pod belongs to, as `namespace/<dpo.dev/config label>`. */
  slot: string;
  pid: number | undefined;
  running: boolean;
  exit: ExitStatus | undefined;
  logFile: string;
  /** The kubeconfig handed to the plugin (DPO_KUBECONFIG); undefined without a ServiceAccount. */
  kubeconfigFile: string | undefined;
  /** The plugin's /metrics endpoint with `pluginMetrics`; undefined otherwise. */
  metricsUrl: string | undefined;
}

export interface PluginProcessEvents {
  pluginStarted: [PluginProcessInfo];
  pluginExited: [PluginProcessInfo];
}

export interface PluginProcessesOptions {
  api: KubeletApi;
  log: Logger;
  /** Time between SIGTERM and SIGKILL when a plugin pod goes away. */
  stopGraceMs: number;
  setup: PluginSetupOptions;
  isStopped: () => boolean;
  /** Reports each event as KubeletSimulator emits it. */
  notify: { [K in keyof PluginProcessEvents]: (...args: PluginProcessEvents[K]) => void };
}

export class PluginProcesses {
  constructor(private readonly options: PluginProcessesOptions) {}

  /**
   * Stops the processes whose pod is gone or replaced and starts one for every plugin pod that should
   * run on `node` and has none. False when the simulator stopped meanwhile.
   */
  async reconcile(node: SimulatedNode, pluginPods: V1Pod[]): Promise<boolean> {
    const { log, isStopped } = this.options;
    const desired = desiredPluginPods(pluginPods, node.name);
    for (const [slot, record] of node.pods) {
      if (desired.get(slot)?.metadata?.uid === record.uid) continue;
      log.info({ node: node.name, pod: `${record.namespace}/${record.name}` }, "stopping plugin: pod gone");
      this.stopProbing(record);
      await record.plugin.stop(this.options.stopGraceMs);
      node.pods.delete(slot);
    }
    for (const [slot, pod] of desired) {
      if (isStopped()) return false;
      // An exited process of the same pod stays exited: see kill.
      if (node.pods.has(slot)) continue;
      const prepared = await preparePluginPod(this.options.setup, node, slot, pod);
      if (isStopped()) return false;
      node.logs.set(prepared.launch.logFile, `${prepared.namespace}/${prepared.name} (uid ${prepared.uid})`);
      const record: PodRecord = {
        ...prepared,
        plugin: undefined as unknown as PluginProcess,
        startedAt: new Date().toISOString(),
        ready: false,
        prober: undefined,
      };
      record.plugin = this.spawn(node, record);
      node.pods.set(slot, record);
      // Running once the process started; Ready when its readiness probe says so.
      await this.writeStatus(node, record);
      this.startProbing(node, record);
    }
    return true;
  }

  /** Plugin processes (running or exited) of `nodes`. */
  list(nodes: readonly SimulatedNode[]): PluginProcessInfo[] {
    return nodes.flatMap((n) =>
      [...n.pods.values()].map((record) => pluginProcessInfo(record, record.plugin)),
    );
  }

  /** The output of every plugin process that ran on `node`, pods gone included, for failure messages. */
  logs(node: SimulatedNode): string {
    return [...node.logs]
      .map(([file, pod]) => {
        let text: string;
        try {
          text = readFileSync(file, "utf8");
        } catch (err) {
          text = `(cannot read: ${(err as Error).message})`;
        }
        return `--- plugin of pod ${pod} on ${node.name}\n${text}`;
      })
      .join("\n");
  }

  /** Kills the plugin process without touching its pod, as a crash would (KubeletSimulator.killPlugin). */
  kill(node: SimulatedNode, signal: NodeJS.Signals, slot: string | undefined): Promise<ExitStatus> {
    const record = this.record(node, slot, (r) => r.plugin.running, "running");
    record.plugin.child.kill(signal);
    return record.plugin.exited;
  }

  /** Starts the exited plugin process again for the same pod: the kubelet's restart policy. */
  restart(node: SimulatedNode, slot: string | undefined): PluginProcessInfo {
    const record = this.record(node, slot, (r) => !r.plugin.running, "exited");
    record.plugin = this.spawn(node, record);
    record.startedAt = new Date().toISOString();
    void this.writeStatus(node, record);
    this.startProbing(node, record);
    return pluginProcessInfo(record, record.plugin);
  }

  stopProbing(record: PodRecord): void {
    if (record.prober === undefined) return;
    record.prober.stop();
    record.prober = undefined;
  }

  private record(
    node: SimulatedNode,
    slot: string | undefined,
    matches: (record: PodRecord) => boolean,
    state: string,
  ): PodRecord {
    const candidates = [...node.pods.values()].filter(
      // A config's slot (namespace/config) names the plugins of all its revisions.
      (r) => (slot === undefined || r.slot === slot || r.slot.startsWith(`${slot}/`)) && matches(r),
    );
    if (candidates.length !== 1 || candidates[0] === undefined) {
      throw new Error(
        `expected one ${state} plugin on ${node.name}${slot ? ` for ${slot}` : ""}, found ${candidates.length}: ` +
          JSON.stringify(this.list([node])),
      );
    }
    return candidates[0];
  }

  /**
   * Writes a plugin pod's status as it is now; if the API server does not take it (it is restarting),
   * tries again every second while the pod is still this node's, as the kubelet's status manager keeps
   * syncing until the API has it.
   */
  private async writeStatus(node: SimulatedNode, record: PodRecord): Promise<void> {
    const { isStopped } = this.options;
    const exit = record.plugin.exit;
    const written = await this.options.api.writePodStatus(
      record.pod,
      runningPodStatus(record.pod, {
        now: new Date().toISOString(),
        startedAt: record.startedAt,
        hostIP: node.hostIP,
        ready: record.ready,
        ...(exit !== undefined
          ? {
              exited: {
                exitCode: exit.code ?? 128 + (exit.signal ? (osSignals[exit.signal] ?? 0) : 0),
                reason: exit.code === 0 ? "Completed" : "Error",
              },
            }
          : {}),
      }),
    );
    if (!written && !isStopped()) {
      setTimeout(() => {
        if (!isStopped() && [...node.pods.values()].includes(record)) void this.writeStatus(node, record);
      }, STATUS_RETRY_MS).unref();
    }
  }

  /**
   * The kubelet's readiness prober for a plugin container (see ReadinessProber). Without a readiness
   * probe the container is ready once it runs.
   */
  private startProbing(node: SimulatedNode, record: PodRecord): void {
    this.stopProbing(record);
    const probe = record.readinessProbe;
    const setReady = (ready: boolean): void => {
      if (record.ready === ready || this.options.isStopped()) return;
      record.ready = ready;
      void this.writeStatus(node, record);
    };
    if (probe?.httpGet === undefined) {
      setReady(true);
      return;
    }
    record.prober = new ReadinessProber(
      probe,
      probe.httpGet,
      record.healthPort,
      () => record.plugin.running,
      setReady,
    );
  }

  /** Starts the pod's process; its log file collects stdout and stderr of every start. */
  private spawn(node: SimulatedNode, pod: PodRecord): PluginProcess {
    const { log, isStopped, notify } = this.options;
    const plugin: PluginProcess = new PluginProcess(pod.runtime, pod.launch, (status) => {
      log.info({ node: pod.node, pod: `${pod.namespace}/${pod.name}`, ...status }, "plugin exited");
      // The container is down: not ready, its exit in the pod status (the pod stays Running).
      if (pod.plugin === plugin && !isStopped()) {
        this.stopProbing(pod);
        pod.ready = false;
        if ([...node.pods.values()].includes(pod)) void this.writeStatus(node, pod);
      }
      notify.pluginExited(pluginProcessInfo(pod, plugin));
    });
    log.info(
      { node: pod.node, pod: `${pod.namespace}/${pod.name}`, pid: plugin.child.pid },
      "plugin started",
    );
    notify.pluginStarted(pluginProcessInfo(pod, plugin));
    return plugin;
  }
}

function pluginProcessInfo(pod: PreparedPod, plugin: PluginProcess): PluginProcessInfo {
  return {
    node: pod.node,
    pod: `${pod.namespace}/${pod.name}`,
    podUid: pod.uid,
    slot: pod.slot,
    pid: plugin.child.pid,
    running: plugin.running,
    exit: plugin.exit,
    logFile: pod.launch.logFile,
    kubeconfigFile: pod.launch.env.DPO_KUBECONFIG,
    metricsUrl: pod.metricsUrl,
  };
}
