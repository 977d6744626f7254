// What the plugin-upgrade end-to-end tests share: a watch of a config's DaemonSets that checks the
// rollout from the objects alone (never from what the operator says about itself), and, from
// tools/upgrade-load (which the benchmarks use too), a workload that keeps asking simulated kubelets for
// devices, the fence timer and the plain-DaemonSet baseline.
import type { CustomObjectsApi, KubeConfig, V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { waitFor } from "../cluster/helpers.js";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import { nodeKeys, type NodeKeys } from "../../src/operator/model/targeting.js";
import {
  ANNOTATION_UPGRADE_STATE,
  byCreation,
  legacyPlacement,
  parseUpgradeState,
  revisionOfDaemonSet,
} from "../../src/operator/upgrade/daemonset-state.js";
import { nodeLabels, parseNodeRecord, runsRevision } from "../../src/operator/upgrade/node-labels.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";

import { FenceTimes } from "../../tools/upgrade-load/fence-times.js";
import { LiveWatch, type WatchHealth } from "../../tools/upgrade-load/live-watch.js";

export { FenceTimes, LiveWatch, type WatchHealth };
export { podStream, type PodStreamResult } from "../../tools/upgrade-load/pod-stream.js";
export {
  plainPluginRevision,
  rollPlainPluginTo,
  type PlainPluginRevision,
} from "../../tools/upgrade-load/plain-plugin.js";

/**
 * A forward rollout as watches of the config's DaemonSets and of the Nodes show it. Which revisions run on
 * a node is read the way the DaemonSet controller reads it: the nodes' revision labels that each
 * DaemonSet's affinity selects (or, for a DaemonSet an older operator placed, its node-name lists).
 * Between revisions: a node on the revision being moved to but still on the base (a surge in progress),
 * or off the base and not yet on the new one (a replace in progress). Checked as events arrive: at most
 * `limit` nodes between revisions, no node moved back, and no node's recorded start rewritten (what a
 * second acting leader, or one acting on a stale cache, would do). Once the base is gone, the rollout is
 * over and nothing more is checked.
 *
 * What it checks holds only for what its watches saw: they restart when the client ends them (30 s idle)
 * and keep their errors, and `liveness` says which moved node the Node watch never showed changing.
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
  private readonly watches: Pick<LiveWatch<never>, "path" | "events" | "gaps" | "stop" | "health">[] = [];
  /** Per node, the Node updates (MODIFIED) the watch delivered: the samples the checks ran on. */
  readonly nodeSamples = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Starts watching the config's DaemonSets in `namespace`, and every Node. */
  async start(kc: KubeConfig, namespace: string, configName: string): Promise<void> {
    this.keys = nodeKeys(configName);
    this.fences = new FenceTimes(this.keys.replace);
    const nodes = new LiveWatch<V1Node>(kc, "/api/v1/nodes", {}, (type, node) => {
      const name = node.metadata!.name!;
      if (type === "DELETED") this.nodes.delete(name);
      else this.nodes.set(name, node);
      if (type === "MODIFIED") this.nodeSamples.set(name, (this.nodeSamples.get(name) ?? 0) + 1);
      this.fences?.observe(node);
      this.check();
    });
    const daemonSets = new LiveWatch<V1DaemonSet>(
      kc,
      `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
      { labelSelector: `dpo.dev/config=${configName}` },
      (type, ds) => this.onEvent(type, ds),
    );
    const reports = new LiveWatch<DeviceNodeState>(
      kc,
      `/apis/dpo.dev/v1beta1/namespaces/${namespace}/devicenodestates`,
      { labelSelector: `dpo.dev/config=${configName}` },
      (type, report) => {
        if (type !== "DELETED" && report.status?.registration.state === "StandingBy")
          this.reportedStandingBy.add(report.spec.nodeName);
      },
    );
    this.watches.push(nodes, daemonSets, reports);
    await Promise.all([nodes.start(), daemonSets.start(), reports.start()]);
  }

  stop(): void {
    for (const watch of this.watches) watch.stop();
  }

  /** Each watch's events, restarts and errors, by path. */
  health(): Record<string, WatchHealth> {
    return Object.fromEntries(this.watches.map((w) => [w.path, w.health()]));
  }

  /**
   * Why the checks cannot be trusted, if they cannot: a watch with a gap (events it may have missed; an
   * error it resumed from is not one, see LiveWatch), no DaemonSet event, or a node in `moved` (the nodes
   * the rollout moved) that no Node update was seen for. Empty when the watches were alive throughout.
   * Call it after stop().
   */
  liveness(moved: readonly string[]): string[] {
    const problems = this.watches.flatMap((w) => w.gaps);
    if (moved.length === 0) problems.push("no node to check: the rollout moved none");
    for (const node of moved) {
      if ((this.nodeSamples.get(node) ?? 0) === 0) problems.push(`${node}: no Node update seen`);
    }
    const daemonSets = this.watches[1];
    if (daemonSets !== undefined && daemonSets.events === 0) problems.push("no DaemonSet event seen");
    return problems;
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
