// Where a rollout's time goes: each node's handover steps as they happen, and each node's time at
// allocatable 0.
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { configLabelValue } from "../../src/contract/names.js";
import type { Informer } from "../../src/kube/informer.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";
import type { KubeletSimulator, PluginProcessInfo } from "../../tools/kubelet-sim/node-simulator.js";
import { percentile } from "../../tools/stats.js";
import { NAMESPACE } from "./knobs.js";

/** The Node's allocatable for `resource`, as a number (undefined when absent). */
export function allocatableOf(node: V1Node, resource: string): number | undefined {
  const value = node.status?.allocatable?.[resource];
  return value === undefined ? undefined : Number(value);
}

/**
 * The plugin a takeover hands nodes over from (ADR 0012): its pods (an informer on them) and its plugin slot
 * in the simulator. Its pods are the "old" ones, whatever their labels.
 */
export interface IncumbentView {
  pods: Informer<V1Pod>;
  slot: string;
}

/**
 * Per node, when each step of its handover first happened (ms since the change), from a pod informer,
 * the simulator's events and the Node informer: where a node's time goes.
 */
export class Timeline {
  readonly steps = new Map<string, Map<string, number>>();
  private readonly undo: (() => void)[] = [];
  private t0 = 0;
  private running = false;

  constructor(
    sim: KubeletSimulator,
    pods: Informer<V1Pod>,
    nodes: readonly string[],
    config: string,
    resource: string,
    fromRevision: string,
    incumbent?: IncumbentView,
  ) {
    const prefix = `${NAMESPACE}/${configLabelValue(config)}/`;
    const oldSlot = incumbent?.slot ?? `${prefix}${fromRevision}`;
    const isOld = (pod: V1Pod): boolean => pod.metadata?.labels?.[LABEL_REVISION] === fromRevision;
    const pod = (p: V1Pod, deleted = false, old = isOld(p)): void => {
      const node = p.spec?.nodeName;
      if (node === undefined) return;
      const which = old ? "old" : "new";
      if (deleted) this.record(node, `${which} pod gone`);
      else if (p.metadata?.deletionTimestamp) this.record(node, `${which} pod deleting`);
      // The old pods ran before the rollout began: their updates (status patches) are not a step of it.
      else if (p.status?.phase === "Running" && which === "new") this.record(node, "new pod Running");
      if (!deleted && which === "new") this.record(node, "new pod created");
    };
    this.undo.push(pods.onAdd((p) => pod(p)));
    this.undo.push(pods.onUpdate((_o, p) => pod(p)));
    this.undo.push(pods.onDelete((p) => pod(p, true)));
    if (incumbent !== undefined) {
      this.undo.push(incumbent.pods.onUpdate((_o, p) => pod(p, false, true)));
      this.undo.push(incumbent.pods.onDelete((p) => pod(p, true, true)));
    }
    const started = (info: PluginProcessInfo): void => {
      if (info.slot.startsWith(prefix) && info.slot !== oldSlot) this.record(info.node, "new plugin started");
    };
    const exited = (info: PluginProcessInfo): void => {
      if (info.slot === oldSlot) this.record(info.node, "old plugin exited");
    };
    sim.on("pluginStarted", started);
    sim.on("pluginExited", exited);
    this.undo.push(() => sim.off("pluginStarted", started));
    this.undo.push(() => sim.off("pluginExited", exited));
    for (const node of nodes) {
      const registered = (r: { resourceName: string }): void => {
        if (r.resourceName === resource && this.steps.get(node)?.has("new plugin started"))
          this.record(node, "new plugin registered (kubelet)");
      };
      const dm = sim.deviceManager(node);
      dm.on("registered", registered);
      this.undo.push(() => dm.off("registered", registered));
    }
  }

  start(): void {
    this.t0 = performance.now();
    this.running = true;
  }

  record(node: string, step: string, at = performance.now()): void {
    if (!this.running) return;
    let steps = this.steps.get(node);
    if (steps === undefined) this.steps.set(node, (steps = new Map<string, number>()));
    if (!steps.has(step)) steps.set(step, at - this.t0);
  }

  stop(): void {
    this.running = false;
    for (const u of this.undo) u();
  }

  /** Per step, the p50 and p99 over nodes of its time after the node's first step, in order of p50. */
  summary(): { step: string; p50: number; p99: number; nodes: number }[] {
    const offsets = new Map<string, number[]>();
    for (const steps of this.steps.values()) {
      const first = Math.min(...steps.values());
      for (const [step, at] of steps) {
        let list = offsets.get(step);
        if (list === undefined) offsets.set(step, (list = []));
        list.push(at - first);
      }
    }
    return [...offsets]
      .map(([step, list]) => ({
        step,
        p50: percentile(list, 50),
        p99: percentile(list, 99),
        nodes: list.length,
      }))
      .sort((a, b) => a.p50 - b.p50);
  }

  /**
   * Per pair of steps that follow each other on a node, the p50 and p99 over nodes of the time between
   * them, most frequent pairs first: where a slow node lost its time, which the offsets hide.
   */
  gaps(): { from: string; to: string; p50: number; p99: number; nodes: number }[] {
    const gaps = new Map<string, { from: string; to: string; list: number[] }>();
    for (const steps of this.steps.values()) {
      const ordered = [...steps].sort((a, b) => a[1] - b[1]);
      for (let i = 1; i < ordered.length; i++) {
        const [from, fromAt] = ordered[i - 1]!;
        const [to, toAt] = ordered[i]!;
        const key = `${from}\n${to}`;
        let gap = gaps.get(key);
        if (gap === undefined) gaps.set(key, (gap = { from, to, list: [] }));
        gap.list.push(toAt - fromAt);
      }
    }
    return [...gaps.values()]
      .map(({ from, to, list }) => ({
        from,
        to,
        p50: percentile(list, 50),
        p99: percentile(list, 99),
        nodes: list.length,
      }))
      .sort((a, b) => b.nodes - a.nodes);
  }
}

/** Per node, time spent at allocatable 0 for one resource, from a Node informer, between start() and stop(). */
export class ZeroWindows {
  private readonly since = new Map<string, number>();
  private readonly total = new Map<string, number>();
  private readonly touched = new Set<string>();
  private running = false;

  constructor(
    private readonly resource: string,
    private readonly nodes: Informer<V1Node>,
    private readonly timeline?: Timeline,
  ) {
    nodes.onUpdate((_old, node) => this.observe(node));
    nodes.onAdd((node) => this.observe(node));
  }

  start(): void {
    this.running = true;
    const now = performance.now();
    for (const node of this.nodes.list()) {
      if (allocatableOf(node, this.resource) === 0) this.since.set(node.metadata!.name!, now);
    }
  }

  stop(names: readonly string[]): { perNode: number[]; nodesAtZero: number } {
    const now = performance.now();
    this.running = false;
    for (const [name, since] of this.since) this.add(name, now - since);
    this.since.clear();
    return { perNode: names.map((n) => this.total.get(n) ?? 0), nodesAtZero: this.touched.size };
  }

  private observe(node: V1Node): void {
    if (!this.running) return;
    const name = node.metadata!.name!;
    const zero = allocatableOf(node, this.resource) === 0;
    const since = this.since.get(name);
    if (zero && since === undefined) {
      this.since.set(name, performance.now());
      this.touched.add(name);
      this.timeline?.record(name, "allocatable 0 (Node)");
    } else if (!zero && since !== undefined) {
      this.since.delete(name);
      this.timeline?.record(name, "allocatable back (Node)");
      this.add(name, performance.now() - since);
    }
  }

  private add(name: string, ms: number): void {
    this.total.set(name, (this.total.get(name) ?? 0) + ms);
  }
}
