// The plugin-upgrade scenario of the node tier, run against the real node (upgrade.test.ts) and a simulated one
// (upgrade-simulated.test.ts) alike: a config of 4 Mock devices on one node, rolled to a new revision while a
// workload creates pods through the scheduler, with the node's allocatable watched on the Node and, through
// the kubelet's PodResources API, as the kubelet itself sees it.
import { CustomObjectsApi, type V1Node } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { NODE_REPLACE_TAINT_PREFIX, nodeKeys } from "../../src/operator/model/targeting.js";
import { kubeConfigFromInjected, waitFor } from "../cluster/helpers.js";
import { NAMESPACE } from "../e2e/support.js";
import {
  configStatusWhere,
  FenceTimes,
  podStream,
  RolloutWatch,
  type PodStreamResult,
} from "../e2e/upgrade-support.js";
import { NodeWatch } from "./node-watch.js";
import { advertised, core, KubeletAllocatablePoller, removeConfig, workloadImage } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
export const UPGRADE_DEVICES = 4;
/**
 * The longest a Replace may leave the kubelet without a healthy device (its own count): the Replace window's
 * target in docs/benchmarks.md (window p99 ≤ 1 s), held on the real node and the simulated one alike.
 */
export const REPLACE_WINDOW_MS = 1_000;

/** Where the scenario runs: one node, how pods get there, and where its kubelet's PodResources API is. */
export interface UpgradeTarget {
  node: string;
  placement: {
    nodeSelector: Record<string, string>;
    tolerations?: { key: string; operator: string; effect: string }[];
  };
  /** Asked at each rollout: a restarted simulator serves it elsewhere. */
  podResourcesSocket: () => string;
}

export interface RolloutFigures {
  rollout: RolloutWatch;
  /** The Node object's allocatable, from a watch, with what the watch went through. */
  allocatable: AllocatableFigures;
  /**
   * How long the Node carried the config's Replace fence (the NoSchedule taint that keeps pods off while
   * its plugin is replaced): what pods that do not need the resource pay. 0 when it was never fenced.
   */
  fenceMs: number;
  /** The kubelet's own count of healthy devices, polled every 20 ms. */
  kubelet: { min: number; zeroMs: number; samples: number };
  pods: PodStreamResult;
  ms: number;
}

/** What a Node watch saw of a resource's allocatable, and what the watch itself went through. */
export interface AllocatableFigures {
  min: number;
  zeroMs: number;
  /** Node objects the watch delivered: 0 means the watch saw nothing, and min says nothing. */
  samples: number;
  /** Ends of the watch it resumed from its last resourceVersion. */
  restarts: number;
  /** Ends it could not resume from: events may be missing there. */
  gaps: string[];
}

/**
 * A node's allocatable for a resource as a Node watch sees it: its lowest, how long it sat at 0, and what the
 * watch itself went through (samples, restarts, gaps), so a watch that saw nothing cannot pass for a node
 * that never dropped.
 */
export class AllocatableWatch {
  min = Number.POSITIVE_INFINITY;
  zeroMs = 0;
  private zeroSince: number | undefined;
  private readonly fences: FenceTimes;
  private lastNode: V1Node | undefined;
  private readonly watch: NodeWatch;

  constructor(
    private readonly node: string,
    private readonly resource: string,
    config: string,
  ) {
    this.fences = new FenceTimes(nodeKeys(config).replace);
    this.watch = new NodeWatch(node, (seen) => {
      this.lastNode = seen;
      this.fences.observe(seen);
      this.seen(advertised(seen, this.resource).allocatable);
    });
  }

  start(): Promise<void> {
    return this.watch.start();
  }

  private seen(allocatable: number): void {
    this.min = Math.min(this.min, allocatable);
    if (allocatable === 0 && this.zeroSince === undefined) this.zeroSince = performance.now();
    if (allocatable > 0 && this.zeroSince !== undefined) {
      this.zeroMs += performance.now() - this.zeroSince;
      this.zeroSince = undefined;
    }
  }

  /** Stops once the watch has caught up with the Node as it is now (its liveness, checked). */
  async stop(): Promise<{
    allocatable: AllocatableFigures;
    fenceMs: number;
    fencedAtEnd: boolean;
  }> {
    await this.watch.caughtUp();
    this.watch.stop();
    if (this.zeroSince !== undefined) this.zeroMs += performance.now() - this.zeroSince;
    const fencedAtEnd = (this.lastNode?.spec?.taints ?? []).some((t) =>
      t.key.startsWith(NODE_REPLACE_TAINT_PREFIX),
    );
    return {
      allocatable: {
        min: this.min,
        zeroMs: Math.round(this.zeroMs),
        samples: this.watch.samples,
        restarts: this.watch.restarts,
        gaps: [...this.watch.gaps],
      },
      fenceMs: Math.round(this.fences.ms.get(this.node) ?? 0),
      fencedAtEnd,
    };
  }
}

export class UpgradeScenario {
  readonly resource: string;
  private readonly custom = kubeConfigFromInjected().makeApiClient(CustomObjectsApi);

  constructor(
    readonly name: string,
    private readonly target: UpgradeTarget,
  ) {
    this.resource = `upgrade.example/${name}`;
  }

  statusWhere(
    what: string,
    pred: (s: DevicePluginConfigStatus) => boolean,
    timeoutMs = 180_000,
  ): Promise<DevicePluginConfigStatus> {
    return configStatusWhere(this.custom, this.name, what, pred, timeoutMs);
  }

  async create(): Promise<void> {
    await this.custom.createClusterCustomObject({
      ...GROUP,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: this.name },
        spec: {
          resourceName: this.resource,
          backend: { type: "Mock", mock: { devices: UPGRADE_DEVICES, idPrefix: "u" } },
          plugin: { logLevel: "info" },
          upgrade: { strategy: "Auto", maxUnavailable: 1, progressDeadlineSeconds: 120 },
          ...this.target.placement,
        },
      },
    });
    await this.statusWhere(
      `Ready on ${this.target.node}`,
      (s) => s.conditions?.find((c) => c.type === "Ready")?.status === "True",
    );
    await this.waitForAllDevices();
  }

  async delete(): Promise<void> {
    await removeConfig(this.name);
  }

  async waitForAllDevices(timeoutMs = 60_000): Promise<void> {
    await waitFor(
      `${this.target.node} to advertise all ${UPGRADE_DEVICES} devices of ${this.resource}`,
      async (observe) => {
        const seen = advertised(await core().readNode({ name: this.target.node }), this.resource);
        observe(seen);
        return seen.capacity === UPGRADE_DEVICES && seen.allocatable === UPGRADE_DEVICES;
      },
      { timeoutMs, intervalMs: 200 },
    );
  }

  /** Changes the plugin pods (their log level) so the config rolls to a new revision, and waits for the end. */
  async rollOnce(logLevel: "debug" | "info"): Promise<RolloutFigures> {
    const before = await this.statusWhere("a settled revision", (s) => s.upgrade?.phase === "Complete");
    const kc = kubeConfigFromInjected();
    const rollout = new RolloutWatch(1);
    await rollout.start(kc, NAMESPACE, this.name);
    const allocatable = new AllocatableWatch(this.target.node, this.resource, this.name);
    await allocatable.start();
    const kubelet = new KubeletAllocatablePoller(this.resource, this.target.podResourcesSocket());
    kubelet.start();
    const stream = podStream(kc, "default", this.resource, {
      perSecond: 2,
      holdMs: 1_500,
      name: `${this.name}-${logLevel}`,
      image: workloadImage(),
      command: ["sleep", "3600"],
      ...this.target.placement,
    });
    const started = performance.now();
    await this.custom.patchClusterCustomObject({
      ...GROUP,
      name: this.name,
      body: [{ op: "replace", path: "/spec/plugin/logLevel", value: logLevel }],
    });
    await this.statusWhere(
      `rolled from ${before.upgrade!.updateRevision}`,
      (s) => s.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== before.upgrade!.updateRevision,
    );
    const ms = Math.round(performance.now() - started);
    // Keep pods coming until the node advertises every device again and admits a pod through the new plugin,
    // so the new plugin's first admissions count and a node that never came back fails the scenario.
    await this.waitForAllDevices();
    const admittedAtEnd = stream.admitted();
    await waitFor(
      `a pod admitted on ${this.target.node} after the rollout`,
      (observe) => {
        observe({ admitted: stream.admitted(), before: admittedAtEnd });
        return stream.admitted() > admittedAtEnd;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    const pods = await stream.stop();
    rollout.stop();
    const { fenceMs, fencedAtEnd, allocatable: onNode } = await allocatable.stop();
    if (fencedAtEnd) throw new Error(`${this.target.node} still carries a Replace fence after the rollout`);
    return { rollout, allocatable: onNode, fenceMs, kubelet: await kubelet.stop(), pods, ms };
  }
}

/** One line of figures for the test log (docs/benchmarks.md quotes them). */
export function describeRollout(what: string, f: RolloutFigures): string {
  const admitted = [...f.pods.admitted.values()].reduce((a, b) => a + b, 0);
  return (
    `${what}: rollout ${f.ms} ms, Node allocatable min ${f.allocatable.min} (0 for ${f.allocatable.zeroMs} ms, ` +
    `${f.allocatable.samples} samples, watch restarted ${f.allocatable.restarts} times` +
    (f.allocatable.gaps.length > 0 ? `, gaps: ${JSON.stringify(f.allocatable.gaps)}` : "") +
    `), ` +
    `kubelet's own min ${f.kubelet.min} (0 for ${f.kubelet.zeroMs} ms, ${f.kubelet.samples} samples), ` +
    `fenced for ${f.fenceMs} ms, ` +
    `${f.pods.created} pods created, ${admitted} admitted, ${f.pods.rejected.length} rejected` +
    (f.pods.rejected.length > 0 ? `: ${JSON.stringify(f.pods.rejected.slice(0, 2))}` : "")
  );
}
