// Helpers of the node tier: the real node's name and images, its containerd, the Node's view of a resource,
// and pods pinned to the real node.
import * as grpc from "@grpc/grpc-js";
import { execFile, spawn } from "node:child_process";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api, type V1Node, type V1Pod } from "@kubernetes/client-node";
import { inject } from "vitest";
import {
  DEVICE_PLUGINS_DIR,
  POD_RESOURCES_DIR,
  POD_RESOURCES_SOCKET_NAME,
} from "../../src/contract/kubelet-paths.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import { KUBELET_SOCKET_NAME, PodResourcesListerClient } from "../../src/plugin-runtime/proto/index.js";
import { readRecordedProcesses } from "../../tools/cluster/processes.js";
import {
  KUBELET_HEALTHZ_PORT,
  REAL_NODE_LABEL,
  REAL_NODE_TAINT,
  restartKubelet,
} from "../../tools/real-node/real-node.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, waitFor } from "../cluster/helpers.js";
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
  await restartKubelet(injectedCluster().stateDir, binary);
}

/** When a restarted kubelet was back, on the wall clock (Date.now). */
export interface KubeletBack {
  /** The SIGTERM to the old kubelet. */
  stoppedAt: number;
  /** The old process gone and the new one started. */
  startedAt: number;
  /** The new kubelet's /healthz first answered ok: the kubelet is up. */
  healthyAt: number;
  /** Its device-plugin registration socket (kubelet.sock) was there anew: plugins can register. */
  socketAt: number;
}

/**
 * Restarts the real kubelet as restartRealKubelet does and times its return: its /healthz (on 127.0.0.1 of the
 * node's network namespace, so polled every 20 ms by a process started there, which must have seen the old
 * kubelet answer first) and its device-plugin socket, which the new kubelet's device manager creates afresh.
 */
export async function restartRealKubeletTimed(binary?: string): Promise<KubeletBack> {
  const kubelet = (await readRecordedProcesses(injectedCluster().stateDir)).find((p) => p.name === "kubelet");
  if (!kubelet?.netns) throw new Error("the real node's kubelet has no recorded network namespace");
  const prober = spawn(
    "nsenter",
    [`--net=${kubelet.netns}`, "--", process.execPath, "-e", HEALTHZ_PROBER, String(KUBELET_HEALTHZ_PORT)],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const answers: { at: number; ok: boolean }[] = [];
  let partial = "";
  prober.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      const [state, at] = line.split(" ");
      answers.push({ at: Number(at), ok: state === "up" });
    }
  });
  try {
    await waitFor("the old kubelet's /healthz to answer the prober", () => answers.some((a) => a.ok), {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    const socket = join(DEVICE_PLUGINS_DIR, KUBELET_SOCKET_NAME);
    const before = await stat(socket);
    const stoppedAt = Date.now();
    await restartRealKubelet(binary);
    const startedAt = Date.now();
    const socketAt = await waitFor(
      `the restarted kubelet's ${socket}`,
      async () => {
        const now = await stat(socket).catch(() => undefined);
        return now !== undefined && (now.ino !== before.ino || now.ctimeMs > before.ctimeMs)
          ? Date.now()
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 10 },
    );
    const healthyAt = await waitFor(
      "the restarted kubelet's /healthz to answer ok",
      (observe) => {
        observe(answers.slice(-4));
        return answers.find((a) => a.ok && a.at >= startedAt)?.at;
      },
      { timeoutMs: 60_000, intervalMs: 20 },
    );
    return { stoppedAt, startedAt, healthyAt, socketAt };
  } finally {
    prober.kill();
  }
}

/** Polls http://127.0.0.1:PORT/healthz every 20 ms; prints "up <ms>" or "down <ms>" on each change. */
const HEALTHZ_PROBER = `
const port = process.argv.at(-1);
let last;
(async () => {
  for (;;) {
    const ok = await fetch("http://127.0.0.1:" + port + "/healthz", { signal: AbortSignal.timeout(1000) })
      .then(async (r) => r.ok && (await r.text()).trim() === "ok", () => false);
    if (ok !== last) process.stdout.write((ok ? "up " : "down ") + Date.now() + "\\n");
    last = ok;
    await new Promise((r) => setTimeout(r, 20));
  }
})();
`;

/**
 * The real kubelet's own view of a resource's healthy devices, polled through its PodResources API
 * (`GetAllocatableResources` on /var/lib/kubelet/pod-resources/kubelet.sock): it changes the moment the
 * device manager's does, while the Node object follows only at the kubelet's next status update (10 s).
 * Records the lowest count and how long it stayed at 0, and each change of the answer with its time on the
 * wall clock (undefined: the call failed, as while the kubelet restarts). Failed calls count no sample.
 */
export class KubeletAllocatablePoller {
  min = Number.POSITIVE_INFINITY;
  zeroMs = 0;
  samples = 0;
  readonly changes: { at: number; count: number | undefined }[] = [];
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
        if (count !== this.changes.at(-1)?.count || this.changes.length === 0)
          this.changes.push({ at: Date.now(), count });
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

  /** When the kubelet first answered `count` after `since` (wall clock), undefined if it has not. */
  firstAnswer(count: number, since: number): number | undefined {
    return this.changes.find((c) => c.count === count && c.at >= since)?.at;
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
