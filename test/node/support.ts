// Helpers of the node tier: the real node's name and images, its containerd, the Node's view of a resource,
// and pods pinned to the real node.
import * as grpc from "@grpc/grpc-js";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { CoreV1Api, type V1Node, type V1Pod } from "@kubernetes/client-node";
import { inject } from "vitest";
import { POD_RESOURCES_DIR, POD_RESOURCES_SOCKET_NAME } from "../../src/contract/kubelet-paths.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import { PodResourcesListerClient } from "../../src/plugin-runtime/proto/index.js";
import { REAL_NODE_LABEL, REAL_NODE_TAINT, restartKubelet } from "../../tools/real-node/real-node.js";
import { kubeConfigFromInjected, kubectl, waitFor } from "../cluster/helpers.js";
import { NAMESPACE } from "../e2e/support.js";
import "../cluster/provided-context.js";

const run = promisify(execFile);

export const realNode = (): string => inject("realNodeName");
export const dpoImage = (): string => inject("realNodeDpoImage");
export const workloadImage = (): string => inject("realNodeWorkloadImage");

/** Placement on the real node only: its label, and a toleration of its taint. */
export const ON_REAL_NODE = {
  nodeSelector: { [REAL_NODE_LABEL]: "true" },
  tolerations: [{ key: REAL_NODE_TAINT.key, operator: "Exists", effect: REAL_NODE_TAINT.effect }],
};

/** `ctr` against the real node's containerd, in the Kubernetes namespace. */
export async function ctr(args: readonly string[]): Promise<string> {
  const { stdout } = await run(
    inject("realNodeCtr"),
    ["--address", inject("realNodeContainerdSocket"), "--namespace", "k8s.io", ...args],
    { maxBuffer: 16 << 20 },
  );
  return stdout;
}

export function core(): CoreV1Api {
  return kubeConfigFromInjected().makeApiClient(CoreV1Api);
}

/** Capacity and allocatable of a resource as the kubelet last reported them on the Node. */
export function advertised(node: V1Node, resource: string): { capacity: number; allocatable: number } {
  return {
    capacity: Number(node.status?.capacity?.[resource] ?? 0),
    allocatable: Number(node.status?.allocatable?.[resource] ?? 0),
  };
}

export async function waitForAdvertised(
  resource: string,
  want: { capacity: number; allocatable: number },
  timeoutMs = 60_000,
): Promise<V1Node> {
  return waitFor(
    `${realNode()} to advertise ${resource} ${JSON.stringify(want)}`,
    async (observe) => {
      const node = await core().readNode({ name: realNode() });
      const seen = advertised(node, resource);
      observe(seen);
      return seen.capacity === want.capacity && seen.allocatable === want.allocatable ? node : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** Waits for a pod to reach `phase`, printing its conditions and container states on timeout. */
export async function waitForPodPhase(
  namespace: string,
  name: string,
  phase: "Running" | "Failed" | "Succeeded",
  timeoutMs = 90_000,
): Promise<V1Pod> {
  return waitFor(
    `pod ${namespace}/${name} to be ${phase}`,
    async (observe) => {
      const pod = await core().readNamespacedPod({ namespace, name });
      observe({
        phase: pod.status?.phase,
        reason: pod.status?.reason,
        message: pod.status?.message,
        containers: pod.status?.containerStatuses?.map((c) => c.state),
      });
      return pod.status?.phase === phase ? pod : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** Restarts the real node's kubelet (another build of it when given); resolves once the process runs. */
export async function restartRealKubelet(binary?: string): Promise<void> {
  await restartKubelet(inject("clusterStateDir"), binary);
}

/**
 * The real kubelet's own view of a resource's healthy devices, polled through its PodResources API
 * (`GetAllocatableResources` on /var/lib/kubelet/pod-resources/kubelet.sock): it changes the moment the
 * device manager's does, while the Node object follows only at the kubelet's next status update (10 s).
 * Records the lowest count and how long it stayed at 0. Calls that fail (the kubelet restarting) are skipped.
 */
export class KubeletAllocatablePoller {
  min = Number.POSITIVE_INFINITY;
  zeroMs = 0;
  samples = 0;
  private zeroSince: number | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly client: PodResourcesListerClient;

  constructor(
    private readonly resource: string,
    socket = `${POD_RESOURCES_DIR}/${POD_RESOURCES_SOCKET_NAME}`,
    private readonly intervalMs = 20,
  ) {
    this.client = new PodResourcesListerClient(`unix://${socket}`, grpc.credentials.createInsecure());
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const count = await new Promise<number | undefined>((resolve) =>
          this.client.getAllocatableResources(
            {},
            new grpc.Metadata(),
            { deadline: Date.now() + 1_000 },
            (err, answer) =>
              resolve(
                err ? undefined : answer.devices.filter((d) => d.resourceName === this.resource).length,
              ),
          ),
        );
        if (count !== undefined) this.seen(count);
        await new Promise((resolve) => setTimeout(resolve, this.intervalMs));
      }
    })();
  }

  private seen(count: number): void {
    this.samples++;
    this.min = Math.min(this.min, count);
    if (count === 0 && this.zeroSince === undefined) this.zeroSince = performance.now();
    if (count > 0 && this.zeroSince !== undefined) {
      this.zeroMs += performance.now() - this.zeroSince;
      this.zeroSince = undefined;
    }
  }

  async stop(): Promise<{ min: number; zeroMs: number; samples: number }> {
    this.running = false;
    await this.loop;
    this.client.close();
    if (this.zeroSince !== undefined) this.zeroMs += performance.now() - this.zeroSince;
    return { min: this.min, zeroMs: Math.round(this.zeroMs), samples: this.samples };
  }
}

/** The /metrics of a config's plugin pod on the real node, read from the host through the pod network. */
export async function pluginMetrics(config: string): Promise<string> {
  const pods = await core().listNamespacedPod({
    namespace: NAMESPACE,
    fieldSelector: `spec.nodeName=${realNode()}`,
  });
  const pod = pods.items.find(
    (p) => p.metadata?.labels?.["dpo.dev/config"] === config && p.status?.phase === "Running",
  );
  if (!pod?.status?.podIP) throw new Error(`no running plugin pod of ${config} on ${realNode()}`);
  const port = pod.spec?.containers[0]?.ports?.find((p) => p.name === "metrics")?.containerPort ?? 8080;
  const response = await fetch(`http://${pod.status.podIP}:${port}/metrics`);
  if (!response.ok) throw new Error(`the metrics of ${pod.metadata?.name}: HTTP ${response.status}`);
  return response.text();
}

/**
 * Deletes a DevicePluginConfig and waits until its plugin pods are gone too (garbage collection removes them
 * after the config), so the next file starts on a node without them.
 */
export async function removeConfig(name: string): Promise<void> {
  await kubectl(["delete", "devicepluginconfig", name, "--ignore-not-found", "--wait=true"], {
    allowFailure: true,
  });
  await waitFor(
    `the plugin pods of ${name} to be gone`,
    async (observe) => {
      const pods = await core().listNamespacedPod({
        namespace: NAMESPACE,
        labelSelector: `${LABEL_CONFIG}=${name}`,
      });
      observe(pods.items.map((p) => `${p.metadata?.name} on ${p.spec?.nodeName}: ${p.status?.phase}`));
      return pods.items.length === 0;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/** Waits until the real node runs the kubelet of `version` and is Ready (after a restart on another build). */
export async function waitForKubelet(version: string): Promise<void> {
  await waitFor(
    `${realNode()} to run kubelet ${version} and be Ready`,
    async (observe) => {
      const node = await core().readNode({ name: realNode() });
      const ready = node.status?.conditions?.find((c) => c.type === "Ready")?.status;
      observe({ version: node.status?.nodeInfo?.kubeletVersion, ready });
      return node.status?.nodeInfo?.kubeletVersion === version && ready === "True";
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}
