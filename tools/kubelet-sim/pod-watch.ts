// The simulator's watch of every pod, and the passes it drives: a pod bound to a simulated node that
// changes makes one pass over that node's pods, level-triggered and serial per node.
import type { KubeConfig, V1Pod } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { PODS } from "../../src/kube/resources.js";
import type { SimulatedNode } from "./simulated-node.js";

/** How soon a failed pass is tried again. */
const PASS_RETRY_MS = 1_000;

export interface PodWatchOptions {
  kubeconfig: KubeConfig;
  log: Logger;
  /** The simulated nodes: pods bound to other nodes are left alone. */
  nodes: ReadonlyMap<string, SimulatedNode>;
  isStopped: () => boolean;
  /** One pass over the pods bound to `node`; a throw is logged and the pass tried again. */
  pass: (node: SimulatedNode, pods: V1Pod[]) => Promise<void>;
}

export class PodWatch {
  private informer: Informer<V1Pod> | undefined;

  constructor(private readonly options: PodWatchOptions) {}

  /** Every pod, as the watch has it (none before start). */
  list(): V1Pod[] {
    return this.informer?.list() ?? [];
  }

  start(): void {
    // Every pod: plugin pods run a process, pods asking for extended resources are admitted.
    const informer = createInformer<V1Pod>(this.options.kubeconfig, {
      resource: PODS,
      logger: this.options.log,
    });
    const touch = (pod: V1Pod): void => {
      const nodeName = pod.spec?.nodeName;
      if (nodeName !== undefined && this.options.nodes.has(nodeName)) this.reconcileSoon(nodeName);
    };
    informer.onAdd(touch);
    informer.onUpdate((old, current) => {
      touch(old);
      touch(current);
    });
    informer.onDelete(touch);
    this.informer = informer;
    informer.start();
  }

  async waitForSync(): Promise<void> {
    await this.informer?.waitForSync();
  }

  async stop(): Promise<void> {
    await this.informer?.stop();
  }

  /** Another pass over `node` after `ms` (one timer per node; the pod informer may stay quiet). */
  retryLater(node: SimulatedNode, ms: number): void {
    if (this.options.isStopped()) return;
    clearTimeout(node.retryTimer);
    node.retryTimer = setTimeout(() => this.reconcileSoon(node.name), ms);
    node.retryTimer.unref();
  }

  /** Level-triggered and serial per node: a trigger during a pass makes one more pass. */
  private reconcileSoon(nodeName: string): void {
    const { nodes, isStopped, log } = this.options;
    const node = nodes.get(nodeName);
    if (node === undefined)
      throw new Error(`node ${nodeName} is not simulated (have ${[...nodes.keys()].join(", ")})`);
    if (isStopped()) return;
    if (node.reconciling !== undefined) {
      node.rerun = true;
      return;
    }
    node.reconciling = (async () => {
      do {
        node.rerun = false;
        try {
          await this.options.pass(
            node,
            this.list().filter((p) => p.spec?.nodeName === node.name),
          );
        } catch (err) {
          log.warn(
            { node: node.name, err: (err as Error).message },
            "plugin pods not in place yet; retrying",
          );
          clearTimeout(node.retryTimer);
          node.retryTimer = setTimeout(() => this.reconcileSoon(node.name), PASS_RETRY_MS);
          node.retryTimer.unref();
        }
      } while (node.rerun && !isStopped());
    })().finally(() => {
      node.reconciling = undefined;
    });
  }
}
