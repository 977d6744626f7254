// The plugin pods of the simulated nodes in the processless mode: per pod the DaemonSet controller bound
// to a node (spec.nodeName), a ProcesslessPlugin instead of a `dpo plugin` process, the pod's status and
// readiness written as for a process, and the plugin stopped when its pod goes.
import type { V1Pod, V1Probe } from "@kubernetes/client-node";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { PLUGIN_CONFIG_KEY } from "../../src/contract/plugin-config.js";
import { PluginMetrics } from "../../src/plugin-runtime/metrics.js";
import { ApiClient, loadKubeconfig, type ReportApi } from "../../src/plugin-runtime/report/index.js";
import { buildInfo } from "../../src/version.js";
import type { KubeletApi } from "./kubelet-api.js";
import {
  configMapFileAt,
  desiredPluginPods,
  expandVariableReferences,
  flagValue,
  resolveContainerEnv,
  simulatedPluginConfigText,
} from "./plugin-pod.js";
import type { PluginProcessEvents, PluginProcessInfo } from "./plugin-processes.js";
import { ProcesslessPlugin } from "./processless-plugin.js";
import { processlessPluginSpec, type ProcesslessTiming } from "./processless-rules.js";
import { runningPodStatus } from "./pod-admission.js";
import { nodeHostPath, type SimulatedNode } from "./simulated-node.js";

/**
 * API clients the processless plugins share, each the plugin's own client (two keep-alive connections):
 * a real plugin has one per node, which at thousands of nodes would be thousands of connections from
 * this one process to the API server.
 */
const REPORT_CLIENTS = 16;
const STATUS_RETRY_MS = 1_000;

/** One plugin pod on a node: its plugin, or why none could run (the process would have exited). */
interface ProcesslessRecord {
  pod: V1Pod;
  slot: string;
  node: SimulatedNode;
  plugin: ProcesslessPlugin | undefined;
  failure: string | undefined;
  startedAt: string;
  ready: boolean;
  prober: NodeJS.Timeout | undefined;
}

export interface ProcesslessPluginsOptions {
  api: KubeletApi;
  log: Logger;
  /** The simulator's root: the shared kubeconfig of the report clients is written there. */
  root: string;
  timing: ProcesslessTiming;
  isStopped: () => boolean;
  notify: { [K in keyof PluginProcessEvents]: (...args: PluginProcessEvents[K]) => void };
}

export class ProcesslessPlugins {
  private readonly byNode = new Map<string, Map<string, ProcesslessRecord>>();
  /** One registry for every processless plugin: the writers count their writes there. */
  private readonly metrics = new PluginMetrics();
  private clients: ApiClient[] = [];
  private readonly version = buildInfo().version;

  constructor(private readonly options: ProcesslessPluginsOptions) {}

  /** The report clients, with the simulator's own credentials (the pods' tokens are not minted). */
  async start(): Promise<void> {
    const file = join(this.options.root, "processless.kubeconfig");
    await writeFile(file, this.options.api.kubeconfig.exportConfig(), { mode: 0o600 });
    const credentials = await loadKubeconfig(file);
    this.clients = Array.from({ length: REPORT_CLIENTS }, () => new ApiClient(credentials));
  }

  /** Stops the plugins whose pod is gone or replaced and starts one for each pod that has none. */
  async reconcile(node: SimulatedNode, pluginPods: V1Pod[]): Promise<boolean> {
    const { log, isStopped } = this.options;
    const records = this.records(node.name);
    const desired = desiredPluginPods(pluginPods, node.name);
    for (const [slot, record] of records) {
      if (desired.get(slot)?.metadata?.uid === record.pod.metadata?.uid) continue;
      log.info({ node: node.name, pod: podName(record.pod) }, "stopping processless plugin: pod gone");
      records.delete(slot);
      await this.stopRecord(record);
    }
    for (const [slot, pod] of desired) {
      if (isStopped()) return false;
      if (records.has(slot)) continue;
      const record = await this.startRecord(node, slot, pod);
      if (isStopped()) {
        await record.plugin?.stop();
        return false;
      }
      records.set(slot, record);
      this.options.notify.pluginStarted(info(record));
      await this.writeStatus(record);
      this.startProbing(record);
    }
    return true;
  }

  /** The plugins of `nodes`, in the shape of plugin processes (no pid, no log file). */
  list(nodes: readonly SimulatedNode[]): PluginProcessInfo[] {
    return nodes.flatMap((n) => [...this.records(n.name).values()].map(info));
  }

  /** Every plugin stops (their final reports bounded by the plugin's budget), the clients close. */
  async stop(): Promise<void> {
    const records = [...this.byNode.values()].flatMap((m) => [...m.values()]);
    this.byNode.clear();
    await Promise.all(records.map((r) => this.stopRecord(r)));
    for (const client of this.clients) client.close();
  }

  private records(node: string): Map<string, ProcesslessRecord> {
    let records = this.byNode.get(node);
    if (records === undefined) {
      records = new Map();
      this.byNode.set(node, records);
    }
    return records;
  }

  private async startRecord(node: SimulatedNode, slot: string, pod: V1Pod): Promise<ProcesslessRecord> {
    const record: ProcesslessRecord = {
      pod,
      slot,
      node,
      plugin: undefined,
      failure: undefined,
      startedAt: new Date().toISOString(),
      ready: false,
      prober: undefined,
    };
    let text: string;
    try {
      text = await this.configText(node, pod);
    } catch (err) {
      record.failure = (err as Error).message;
      this.options.log.error({ node: node.name, err: record.failure }, "processless plugin cannot start");
      return record;
    }
    const spec = processlessPluginSpec(pod, text);
    if (!spec.ok) {
      record.failure = spec.problem;
      this.options.log.error({ node: node.name, err: spec.problem }, "processless plugin cannot start");
      return record;
    }
    // Spread over the clients by node, so a node's writes keep their order on one client.
    const index = [...node.name].reduce((sum, c) => (sum * 31 + c.charCodeAt(0)) >>> 0, 0);
    record.plugin = new ProcesslessPlugin({
      spec: spec.spec,
      pod,
      slot,
      deviceManager: node.deviceManager,
      devicePluginDir: node.devicePluginDir,
      api: this.clients[index % this.clients.length] as ReportApi,
      metrics: this.metrics,
      pluginVersion: this.version,
      timing: this.options.timing,
      log: this.options.log.child({ node: node.name, pod: podName(pod) }),
      allocatedDevices: () =>
        [...node.admitted.keys()].reduce(
          (sum, uid) => sum + (node.deviceManager.allocatedTo(uid).get(spec.spec.resourceName)?.length ?? 0),
          0,
        ),
      newerInstanceServes: (plugin) =>
        [...this.records(node.name).values()].some(
          (r) =>
            r.plugin !== undefined &&
            r.plugin !== plugin &&
            r.plugin.running &&
            r.plugin.resourceName === plugin.resourceName &&
            r.plugin.startedAtMs > plugin.startedAtMs,
        ),
      olderInstanceServing: (plugin) =>
        [...this.records(node.name).values()]
          .map((r) => r.plugin)
          .filter(
            (p): p is ProcesslessPlugin =>
              p !== undefined &&
              p !== plugin &&
              p.serving &&
              p.resourceName === plugin.resourceName &&
              p.startedAtMs < plugin.startedAtMs,
          )
          .sort((a, b) => b.startedAtMs - a.startedAtMs)[0],
    });
    return record;
  }

  /** The config file the plugin would read: its ConfigMap key, host paths moved into the node's tree. */
  private async configText(node: SimulatedNode, pod: V1Pod): Promise<string> {
    const container = pod.spec?.containers[0];
    if (container === undefined) throw new Error(`pod ${podName(pod)}: spec.containers: no container`);
    const { env } = resolveContainerEnv(pod, container);
    const args = (container.args ?? []).map((arg) => expandVariableReferences(arg, env));
    const path = flagValue(args, "config");
    const source =
      path === undefined
        ? {
            configMap: pod.spec?.volumes?.find((v) => v.name === "config")?.configMap?.name,
            key: PLUGIN_CONFIG_KEY,
          }
        : configMapFileAt(pod, container, path);
    if (source?.configMap === undefined) {
      throw new Error(`pod ${podName(pod)}: no ConfigMap volume holds --config ${path ?? ""}`);
    }
    const namespace = pod.metadata?.namespace ?? "";
    const configMap = await this.options.api.configMap(namespace, source.configMap);
    const text = configMap.data?.[source.key];
    if (text === undefined)
      throw new Error(`ConfigMap ${namespace}/${source.configMap} has no key ${source.key}`);
    return simulatedPluginConfigText(text, (p) => nodeHostPath(node, p));
  }

  private async stopRecord(record: ProcesslessRecord): Promise<void> {
    clearTimeout(record.prober);
    record.prober = undefined;
    if (record.plugin === undefined) return;
    await record.plugin.stop();
    this.options.notify.pluginExited(info(record));
    // Its socket is gone: a plugin standing by for it registers now.
    for (const other of this.records(record.node.name).values()) other.plugin?.olderInstanceStopped();
  }

  /**
   * The kubelet's readiness prober against the plugin's /readyz (ready once registered): at once and
   * every periodSeconds; the first probe finds nothing listening yet, as with a starting process.
   */
  private startProbing(record: ProcesslessRecord): void {
    const probe: V1Probe | undefined = record.pod.spec?.containers[0]?.readinessProbe;
    if (record.plugin === undefined) return;
    if (probe?.httpGet === undefined) {
      this.setReady(record, true);
      return;
    }
    const periodMs = (probe.periodSeconds ?? 10) * 1000;
    const threshold = probe.failureThreshold ?? 3;
    let failures = 0;
    const tick = (): void => {
      if (this.options.isStopped() || !record.plugin?.running) return;
      if (record.plugin.isRegistered) {
        failures = 0;
        this.setReady(record, true);
      } else if (++failures >= threshold) {
        this.setReady(record, false);
      }
      record.prober = setTimeout(tick, periodMs).unref();
    };
    record.prober = setTimeout(tick, (probe.initialDelaySeconds ?? 0) * 1000).unref();
  }

  private setReady(record: ProcesslessRecord, ready: boolean): void {
    if (record.ready === ready || this.options.isStopped()) return;
    record.ready = ready;
    void this.writeStatus(record);
  }

  /** Running once "started", Ready as probed; a plugin that could not start shows the exit a process would. */
  private async writeStatus(record: ProcesslessRecord): Promise<void> {
    const { api, isStopped } = this.options;
    const written = await api.writePodStatus(
      record.pod,
      runningPodStatus(record.pod, {
        now: new Date().toISOString(),
        startedAt: record.startedAt,
        hostIP: record.node.hostIP,
        ready: record.ready,
        ...(record.failure !== undefined ? { exited: { exitCode: 1, reason: "Error" } } : {}),
      }),
    );
    if (!written && !isStopped()) {
      setTimeout(() => {
        const current = this.records(record.node.name).get(record.slot) === record;
        if (current && !isStopped()) void this.writeStatus(record);
      }, STATUS_RETRY_MS).unref();
    }
  }
}

function podName(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;
}

function info(record: ProcesslessRecord): PluginProcessInfo {
  return {
    node: record.node.name,
    pod: podName(record.pod),
    podUid: record.pod.metadata?.uid ?? "",
    slot: record.slot,
    pid: undefined,
    running: record.plugin?.running ?? false,
    exit: record.failure !== undefined ? { code: 1, signal: null } : undefined,
    logFile: "",
    kubeconfigFile: undefined,
    metricsUrl: undefined,
  };
}
