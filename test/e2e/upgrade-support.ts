// What the plugin-upgrade end-to-end tests share: a watch of a config's DaemonSets that checks the
// rollout from the objects alone (never from what the operator says about itself), and a workload
// that keeps asking simulated kubelets for devices.
import {
  CoreV1Api,
  Watch,
  type AppsV1Api,
  type CustomObjectsApi,
  type KubeConfig,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { createInformer } from "../../src/kube/informer.js";
import { PODS } from "../../src/kube/resources.js";
import { waitFor } from "../cluster/helpers.js";
import type { V1ConfigMap } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import {
  LABEL_REVISION,
  pluginObjectName,
  pluginSelectorLabels,
  renderPluginConfigMap,
  nodeKeys,
  renderPluginDaemonSet,
  type NodeKeys,
  type RenderContext,
} from "../../src/operator/render/index.js";
import {
  ANNOTATION_UPGRADE_STATE,
  byCreation,
  legacyPlacement,
  parseUpgradeState,
  revisionOfDaemonSet,
} from "../../src/operator/upgrade/daemonset-state.js";
import { nodeLabels, parseNodeRecord, runsRevision } from "../../src/operator/upgrade/node-labels.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";

/** How long each node carried a config's Replace taint, from the Node updates it is shown. */
export class FenceTimes {
  /** Per node, the ms it was fenced in all, counted once each fence came off. */
  readonly ms = new Map<string, number>();
  private readonly since = new Map<string, number>();

  constructor(private readonly taintKey: string) {}

  observe(node: V1Node): void {
    const name = node.metadata?.name ?? "";
    const fenced = (node.spec?.taints ?? []).some((t) => t.key === this.taintKey);
    const since = this.since.get(name);
    if (fenced && since === undefined) this.since.set(name, performance.now());
    if (!fenced && since !== undefined) {
      this.since.delete(name);
      this.ms.set(name, (this.ms.get(name) ?? 0) + performance.now() - since);
    }
  }
}

/**
 * A forward rollout as watches of the config's DaemonSets and of the Nodes show it. Which revisions run on
 * a node is read the way the DaemonSet controller reads it: the nodes' revision labels that each
 * DaemonSet's affinity selects (or, for a DaemonSet an older operator placed, its node-name lists).
 * Between revisions: a node on the revision being moved to but still on the base (a surge in progress),
 * or off the base and not yet on the new one (a replace in progress). Checked as events arrive: at most
 * `limit` nodes between revisions, no node moved back, and no node's recorded start rewritten (what a
 * second acting leader, or one acting on a stale cache, would do). Once the base is gone, the rollout is
 * over and nothing more is checked.
 */
export class RolloutWatch {
  readonly daemonSets = new Map<string, V1DaemonSet>();
  readonly nodes = new Map<string, V1Node>();
  maxBetween = 0;
  readonly violations: string[] = [];
  /**
   * Nodes seen on the new revision while still on the base (a surge), the same with the node's record
   * saying standby (a Replace with the new plugin started ahead, which registers once the old one has
   * stopped), and off the base before the new one (a Replace in the old order).
   */
  readonly surged = new Set<string>();
  readonly stoodBy = new Set<string>();
  /** Nodes where a plugin's report said StandingBy (it served and waited before it registered). */
  readonly reportedStandingBy = new Set<string>();
  readonly replaced = new Set<string>();
  private readonly joined = new Set<string>();
  private readonly left = new Set<string>();
  private readonly startedAt = new Map<string, number>();
  private fences: FenceTimes | undefined;

  /** How long each node carried the Replace taint (ms, by the watch's clock), once it came off. */
  get fencedMs(): ReadonlyMap<string, number> {
    return this.fences?.ms ?? new Map();
  }
  private baseName: string | undefined;
  private over = false;
  private keys: NodeKeys | undefined;
  private readonly aborts: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  /** Starts watching the config's DaemonSets in `namespace`, and every Node. */
  async start(kc: KubeConfig, namespace: string, configName: string): Promise<void> {
    this.keys = nodeKeys(configName);
    this.fences = new FenceTimes(this.keys.replace);
    const watch = new Watch(kc);
    const nodes = await watch.watch(
      "/api/v1/nodes",
      {},
      (type, node: V1Node) => {
        const name = node.metadata!.name!;
        if (type === "DELETED") this.nodes.delete(name);
        else this.nodes.set(name, node);
        this.fences?.observe(node);
        this.check();
      },
      () => undefined,
    );
    this.aborts.push(() => nodes.abort());
    const request = await watch.watch(
      `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
      { labelSelector: `dpo.dev/config=${configName}` },
      (type, ds: V1DaemonSet) => this.onEvent(type, ds),
      () => undefined,
    );
    this.aborts.push(() => request.abort());
    const reports = await watch.watch(
      `/apis/dpo.dev/v1beta1/namespaces/${namespace}/devicenodestates`,
      { labelSelector: `dpo.dev/config=${configName}` },
      (type, report: DeviceNodeState) => {
        if (type !== "DELETED" && report.status?.registration.state === "StandingBy")
          this.reportedStandingBy.add(report.spec.nodeName);
      },
      () => undefined,
    );
    this.aborts.push(() => reports.abort());
  }

  stop(): void {
    for (const abort of this.aborts) abort();
  }

  onEvent(type: string, ds: V1DaemonSet): void {
    const name = ds.metadata!.name!;
    if (type === "DELETED") this.daemonSets.delete(name);
    else this.daemonSets.set(name, ds);
    this.check();
  }

  private check(): void {
    if (this.over || this.keys === undefined) return;
    const live = [...this.daemonSets.values()].sort(byCreation);
    // The base carries no upgrade state; the revision nodes move to does.
    const base = live.find((ds) => ds.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE] === undefined);
    if (base === undefined) return;
    this.baseName ??= base.metadata?.name;
    if (base.metadata?.name !== this.baseName) {
      this.over = true;
      return;
    }
    const target = live.find((ds) => ds !== base);
    if (target === undefined) return;
    const from = revisionOfDaemonSet(base);
    const to = revisionOfDaemonSet(target);
    const legacyBase = legacyPlacement(base);
    const legacyTarget = legacyPlacement(target);
    const legacyRecords = parseUpgradeState(target, from).legacyNodes;
    const between: string[] = [];
    for (const [n, node] of this.nodes) {
      const labels = nodeLabels(node, this.keys);
      const onOld =
        legacyBase !== undefined
          ? "except" in legacyBase && !legacyBase.except.includes(n)
          : runsRevision(labels, from, true);
      const onNew =
        legacyTarget !== undefined
          ? "only" in legacyTarget && legacyTarget.only.includes(n)
          : runsRevision(labels, to, false);
      const record = parseNodeRecord(node, this.keys, from, to);
      if (onNew) {
        this.joined.add(n);
        if (onOld) (record?.standby === true ? this.stoodBy : this.surged).add(n);
      }
      if (!onOld) {
        this.left.add(n);
        if (!onNew) this.replaced.add(n);
      }
      if (this.joined.has(n) && !onNew)
        this.violations.push(`${n}: left the new revision during a forward rollout`);
      if (this.left.has(n) && onOld) this.violations.push(`${n}: rejoined the base during a forward rollout`);
      if (onOld === onNew) between.push(n);
      const started = record?.startedAt ?? legacyRecords[n]?.startedAt;
      if (started !== undefined) {
        const before = this.startedAt.get(n);
        if (before !== undefined && before !== started) {
          this.violations.push(`${n}: start rewritten ${before} → ${started}`);
        }
        this.startedAt.set(n, started);
      }
    }
    this.maxBetween = Math.max(this.maxBetween, between.length);
    if (between.length > this.limit) {
      this.violations.push(`${between.length} nodes between revisions: ${between.join(", ")}`);
    }
  }
}

/**
 * A workload on some nodes: one device at a time, asked of the node's simulated kubelet again and
 * again, each given back at once like a finished pod, until stopped. Failures are kept, not retried.
 */
export function allocateWorkload(
  sim: KubeletSimulator,
  nodes: readonly string[],
  resource: string,
): { stop: () => Promise<{ admissions: number; failures: string[] }> } {
  const failures: string[] = [];
  let admissions = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const node of nodes) {
        try {
          await sim.allocate(node, resource, 1);
          admissions++;
        } catch (err) {
          failures.push(`${node}: ${(err as Error).message}`);
        }
        sim.deviceManager(node).resources.get(resource)?.allocated.clear();
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return { admissions, failures };
    },
  };
}

const MAX_CREATIONS_IN_FLIGHT = 16;

/** What a stream of workload pods met: each pod's node and how its admission ended. */
export interface PodStreamResult {
  created: number;
  /** Pods that ran (admitted through Allocate), by node. */
  admitted: Map<string, number>;
  /** Pods the kubelet rejected, with the node, reason and message. */
  rejected: { node: string; reason: string; message: string }[];
}

/**
 * A steady stream of workload pods, each asking for one device of `resource`: created at `perSecond`
 * through the scheduler, deleted once they ran for `holdMs` or were rejected. Every pod's outcome is
 * read from the API (phase, reason, node), as a user would read it. stop() stops creating, waits for
 * the pods still on their way (scheduled ones must end Running or Failed; unscheduled ones are
 * deleted, since no node had room) and returns what happened.
 */
export function podStream(
  kc: KubeConfig,
  namespace: string,
  resource: string,
  options: {
    perSecond: number;
    holdMs: number;
    name: string;
    /** For pods that really run (the real node): an image it has, a command, and where they may go. */
    image?: string;
    command?: string[];
    nodeSelector?: Record<string, string>;
    tolerations?: { key: string; operator: string; effect: string }[];
  },
): { stop: () => Promise<PodStreamResult>; admitted: () => number; rejected: () => number } {
  const core = kc.makeApiClient(CoreV1Api);
  const label = { "dpo.dev/e2e-workload": options.name };
  const result: PodStreamResult = { created: 0, admitted: new Map(), rejected: [] };
  const settled = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  const remove = (name: string): Promise<void> =>
    core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).then(
      () => undefined,
      () => undefined,
    );
  const informer = createInformer<V1Pod>(kc, {
    resource: PODS,
    namespace,
    labelSelector: `dpo.dev/e2e-workload=${options.name}`,
  });
  const seen = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? "";
    const node = pod.spec?.nodeName ?? "";
    if (settled.has(name)) return;
    if (pod.status?.phase === "Running") {
      settled.add(name);
      result.admitted.set(node, (result.admitted.get(node) ?? 0) + 1);
      const timer = setTimeout(() => {
        timers.delete(timer);
        void remove(name);
      }, options.holdMs);
      timers.add(timer);
    } else if (pod.status?.phase === "Failed") {
      settled.add(name);
      result.rejected.push({ node, reason: pod.status.reason ?? "", message: pod.status.message ?? "" });
      void remove(name);
    }
  };
  informer.onAdd(seen);
  informer.onUpdate((_, pod) => seen(pod));
  informer.start();
  let stopped = false;
  /** Creations in flight: the stream keeps its pace while the API server is slow to answer. */
  const inFlight = new Set<Promise<unknown>>();
  const create = (): void => {
    result.created++;
    const request = core
      .createNamespacedPod({
        namespace,
        body: {
          metadata: { generateName: `${options.name}-`, labels: label },
          spec: {
            terminationGracePeriodSeconds: 0,
            ...(options.nodeSelector ? { nodeSelector: options.nodeSelector } : {}),
            ...(options.tolerations ? { tolerations: options.tolerations } : {}),
            containers: [
              {
                name: "work",
                image: options.image ?? "registry.example/workload:1",
                ...(options.command ? { command: options.command } : {}),
                resources: { limits: { [resource]: "1" } },
              },
            ],
          },
        },
      })
      .catch(() => result.created--)
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const creating = (async () => {
    await informer.waitForSync();
    const started = performance.now();
    while (!stopped) {
      const due = Math.floor(((performance.now() - started) / 1000) * options.perSecond);
      while (result.created < due && inFlight.size < MAX_CREATIONS_IN_FLIGHT && !stopped) create();
      await new Promise<void>((resolve) => setTimeout(resolve, 50));
    }
    await Promise.all(inFlight);
  })();
  return {
    /** Pods admitted so far, on every node. */
    admitted: () => [...result.admitted.values()].reduce((a, b) => a + b, 0),
    rejected: () => result.rejected.length,
    stop: async () => {
      stopped = true;
      await creating;
      await waitFor(
        `the pods of ${options.name} still on their way to be admitted or rejected`,
        (observe) => {
          const pods = informer.list().filter((p) => !settled.has(p.metadata?.name ?? ""));
          const scheduled = pods.filter((p) => p.spec?.nodeName !== undefined);
          observe(scheduled.map((p) => [p.metadata?.name, p.spec?.nodeName, p.status?.phase]));
          return scheduled.length === 0;
        },
        { timeoutMs: 60_000 },
      );
      for (const timer of timers) clearTimeout(timer);
      await informer.stop();
      await core
        .deleteCollectionNamespacedPod({
          namespace,
          labelSelector: `dpo.dev/e2e-workload=${options.name}`,
          gracePeriodSeconds: 0,
        })
        .catch(() => undefined);
      return result;
    },
  };
}

/** A DevicePluginConfig's status as the API server has it now. */
export async function configStatus(
  custom: CustomObjectsApi,
  name: string,
): Promise<DevicePluginConfigStatus | undefined> {
  const c = (await custom.getClusterCustomObject({
    group: "dpo.dev",
    version: "v1beta1",
    plural: "devicepluginconfigs",
    name,
  })) as { status?: DevicePluginConfigStatus };
  return c.status;
}

/** One revision of a plain DaemonSet running the dpo plugin: what clusters without dpo's gate do. */
export interface PlainPluginRevision {
  revision: string;
  configMap: V1ConfigMap;
  daemonSet: V1DaemonSet;
}

/**
 * The baseline the upgrade tests and benchmark compare with: the dpo plugin for a Mock config in one
 * DaemonSet with a plain `RollingUpdate` (no surge, `maxUnavailable` nodes at a time), which is how a
 * device plugin is usually rolled out. Rendered by dpo's own renderer for a config that is never
 * created in the API (a made-up uid, owner references dropped), so no operator acts on it. Each
 * `logLevel` is a revision; replacing the DaemonSet with another one's starts a rollout.
 */
export function plainPluginRevision(options: {
  name: string;
  resource: string;
  devices: number;
  idPrefix: string;
  logLevel: "info" | "debug";
  maxUnavailable: number;
  context: RenderContext;
}): PlainPluginRevision {
  const validated = validateDevicePluginConfig({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: options.name, uid: "00000000-0000-0000-0000-00000000b001" },
    spec: {
      resourceName: options.resource,
      backend: { type: "Mock", mock: { devices: options.devices, idPrefix: options.idPrefix } },
      plugin: { logLevel: options.logLevel },
    },
  });
  if (!validated.ok) throw new Error(`baseline config: ${JSON.stringify(validated.errors)}`);
  const config: DevicePluginConfig = validated.value;
  const rendered = renderPluginDaemonSet(config, options.context);
  const revision = rendered.metadata!.labels![LABEL_REVISION]!;
  const configMap = renderPluginConfigMap(config, options.context, revision);
  delete configMap.metadata!.ownerReferences;
  return {
    revision,
    configMap,
    daemonSet: {
      ...rendered,
      metadata: {
        name: pluginObjectName(options.name),
        namespace: options.context.namespace,
        labels: rendered.metadata!.labels,
      },
      spec: {
        ...rendered.spec!,
        selector: { matchLabels: pluginSelectorLabels(options.name) },
        updateStrategy: {
          type: "RollingUpdate",
          rollingUpdate: { maxUnavailable: options.maxUnavailable, maxSurge: 0 },
        },
      },
    },
  };
}

/** Starts the plain DaemonSet's rollout to `to`: a replace of the whole object, as `kubectl apply` would. */
export async function rollPlainPluginTo(apps: AppsV1Api, to: PlainPluginRevision): Promise<void> {
  const { name, namespace } = to.daemonSet.metadata as { name: string; namespace: string };
  const current = await apps.readNamespacedDaemonSet({ name, namespace });
  await apps.replaceNamespacedDaemonSet({
    name,
    namespace,
    body: {
      ...to.daemonSet,
      metadata: { ...to.daemonSet.metadata, resourceVersion: current.metadata!.resourceVersion },
    },
  });
}

/** Waits until the config's status satisfies `pred`; the timeout error shows the last status seen. */
export async function configStatusWhere(
  custom: CustomObjectsApi,
  name: string,
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs = 120_000,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${name}: ${what}`,
    async (observe) => {
      const s = await configStatus(custom, name);
      observe(s);
      return s !== undefined && pred(s) ? s : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}
