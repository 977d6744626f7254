// What the plugin-upgrade end-to-end tests share: a watch of a config's DaemonSets that checks the
// rollout from the objects alone (never from what the operator says about itself), and a workload
// that keeps asking simulated kubelets for devices.
import { Watch, type CustomObjectsApi, type KubeConfig, type V1DaemonSet } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import {
  ANNOTATION_UPGRADE_STATE,
  placementOfDaemonSet,
  type UpgradeState,
} from "../../src/operator/upgrade/rollout.js";
import type { KubeletSimulator } from "../kubelet-sim/node-simulator.js";

/**
 * A forward rollout as a DaemonSet watch shows it. Between revisions: a node on the revision being
 * moved to but still on the base (a surge in progress), or off the base and not yet on the new one (a
 * replace in progress). Checked as events arrive: at most `limit` nodes between revisions, no node
 * moved back, and no node's recorded start rewritten (what a second acting leader, or one acting on a
 * stale cache, would do). Once the base is gone or another DaemonSet became the base, the rollout is
 * over and nothing more is checked.
 */
export class RolloutWatch {
  readonly daemonSets = new Map<string, V1DaemonSet>();
  maxBetween = 0;
  readonly violations: string[] = [];
  /** Nodes seen on the new revision while still on the base, and off the base before the new one. */
  readonly surged = new Set<string>();
  readonly replaced = new Set<string>();
  private readonly joined = new Set<string>();
  private readonly left = new Set<string>();
  private readonly startedAt = new Map<string, number>();
  private baseName: string | undefined;
  private abort: (() => void) | undefined;

  constructor(private readonly limit: number) {}

  /** Starts watching the config's DaemonSets in `namespace`. */
  async start(kc: KubeConfig, namespace: string, configName: string): Promise<void> {
    const request = await new Watch(kc).watch(
      `/apis/apps/v1/namespaces/${namespace}/daemonsets`,
      { labelSelector: `dpo.dev/config=${configName}` },
      (type, ds: V1DaemonSet) => this.onEvent(type, ds),
      () => undefined,
    );
    this.abort = () => request.abort();
  }

  stop(): void {
    this.abort?.();
  }

  onEvent(type: string, ds: V1DaemonSet): void {
    const name = ds.metadata!.name!;
    if (type === "DELETED") this.daemonSets.delete(name);
    else this.daemonSets.set(name, ds);
    let except: Set<string> | undefined;
    let exceptFrom: string | undefined;
    let only = new Set<string>();
    for (const d of this.daemonSets.values()) {
      const p = placementOfDaemonSet(d);
      if ("except" in p) {
        except = new Set(p.except);
        exceptFrom = d.metadata?.name;
      } else {
        only = new Set([...only, ...p.only]);
      }
      this.checkStarts(d);
    }
    this.baseName ??= exceptFrom;
    if (except === undefined || exceptFrom !== this.baseName) return;
    for (const n of only) {
      this.joined.add(n);
      if (!except.has(n)) this.surged.add(n);
    }
    for (const n of except) {
      this.left.add(n);
      if (!only.has(n)) this.replaced.add(n);
    }
    for (const n of this.joined) {
      if (!only.has(n)) this.violations.push(`${n}: left the new revision during a forward rollout`);
    }
    for (const n of this.left) {
      if (!except.has(n)) this.violations.push(`${n}: rejoined the base during a forward rollout`);
    }
    const between = [...new Set([...except, ...only])].filter((n) => except.has(n) !== only.has(n));
    this.maxBetween = Math.max(this.maxBetween, between.length);
    if (between.length > this.limit) {
      this.violations.push(`${between.length} nodes between revisions: ${between.join(", ")}`);
    }
  }

  private checkStarts(ds: V1DaemonSet): void {
    const raw = ds.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE];
    if (raw === undefined) return;
    const state = JSON.parse(raw) as UpgradeState;
    for (const [node, rec] of Object.entries(state.nodes)) {
      if (rec.startedAt === undefined) continue;
      const before = this.startedAt.get(node);
      if (before !== undefined && before !== rec.startedAt) {
        this.violations.push(`${node}: start rewritten ${before} → ${rec.startedAt}`);
      }
      this.startedAt.set(node, rec.startedAt);
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
