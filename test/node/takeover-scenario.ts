// The takeover scenario of the node tier (ADR 0012): the upstream sample device plugin
// (k8s.io/kubernetes/test/images/sample-device-plugin, the image tools/image builds) runs as a DaemonSet in
// kube-system with a rolling update, as a chart makes it, and serves example.com/resource (Dev-1, Dev-2) on
// the real node; a pod holds one of its devices; a dpo config takes the resource over with the same ids while
// a workload creates pods through the scheduler, with the node's allocatable watched on the Node and in the
// kubelet.
import * as grpc from "@grpc/grpc-js";
import { AppsV1Api, CustomObjectsApi, type V1DaemonSet } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { POD_RESOURCES_DIR, POD_RESOURCES_SOCKET_NAME } from "../../src/contract/kubelet-paths.js";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import { configLabelValue, LABEL_CONFIG } from "../../src/contract/names.js";
import { LiveWatch } from "../../tools/upgrade-load/live-watch.js";
import { ANNOTATION_TAKEOVER } from "../../src/operator/model/takeover.js";
import {
  PodResourcesListerClient,
  type ListPodResourcesResponse,
} from "../../src/plugin-runtime/proto/index.js";
import { imageArchive, imageReference, samplePluginImage } from "../../tools/image/images.js";
import { kubeConfigFromInjected, waitFor } from "../cluster/helpers.js";
import { NAMESPACE, repo } from "../e2e/support.js";
import { configStatusWhere, podStream, type PodStreamResult } from "../e2e/upgrade-support.js";
import {
  advertised,
  core,
  ctr,
  KubeletAllocatablePoller,
  ON_REAL_NODE,
  realNode,
  waitForPodPhase,
  workloadImage,
} from "./support.js";
import { AllocatableWatch, type AllocatableFigures } from "./upgrade-scenario.js";

/** What the sample plugin serves: its resource name and device ids are fixed in its source. */
export const SAMPLE_RESOURCE = "example.com/resource";
export const SAMPLE_IDS = ["Dev-1", "Dev-2"];
export const INCUMBENT = { namespace: "kube-system", name: "sample-device-plugin" };
const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };

const kc = () => kubeConfigFromInjected();
export const apps = (): AppsV1Api => kc().makeApiClient(AppsV1Api);
const custom = (): CustomObjectsApi => kc().makeApiClient(CustomObjectsApi);

/** Imports the sample plugin's image (make test-images) into the real node's containerd. */
export async function importSamplePlugin(): Promise<string> {
  await ctr(["images", "import", `${repo}/${imageArchive(samplePluginImage)}`]);
  return imageReference(samplePluginImage);
}

/**
 * The sample plugin's DaemonSet: a rolling update, the kubelet's device-plugins directory, and /tmp of the
 * host at /tmp, where its Allocate creates the files /tmp/<id> it answers as mounts (containerd bind-mounts
 * the host's path into the workload's container, so they must exist on the host).
 */
export function incumbentDaemonSet(image: string): V1DaemonSet {
  const labels = { app: INCUMBENT.name };
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { ...INCUMBENT, labels },
    spec: {
      selector: { matchLabels: labels },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels },
        spec: {
          ...ON_REAL_NODE,
          terminationGracePeriodSeconds: 10,
          containers: [
            {
              name: "plugin",
              image,
              securityContext: { privileged: true },
              volumeMounts: [
                { name: "device-plugins", mountPath: "/var/lib/kubelet/device-plugins" },
                { name: "tmp", mountPath: "/tmp" },
              ],
            },
          ],
          volumes: [
            { name: "device-plugins", hostPath: { path: "/var/lib/kubelet/device-plugins" } },
            { name: "tmp", hostPath: { path: "/tmp" } },
          ],
        },
      },
    },
  };
}

export async function readIncumbent(): Promise<V1DaemonSet> {
  return apps().readNamespacedDaemonSet(INCUMBENT);
}

/** The incumbent's pods (uid and phase), on the real node. */
export async function incumbentPods(): Promise<string[]> {
  const pods = await core().listNamespacedPod({
    namespace: INCUMBENT.namespace,
    labelSelector: `app=${INCUMBENT.name}`,
  });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp).map((p) => p.metadata!.uid!);
}

/** Waits until the incumbent is its own again (no takeover record) and its pod serves every device. */
export async function waitForIncumbentServing(timeoutMs = 120_000): Promise<V1DaemonSet> {
  const ds = await waitFor(
    "the incumbent given back and ready on the real node",
    async (observe) => {
      const now = await readIncumbent();
      observe({ annotations: now.metadata?.annotations, status: now.status });
      return now.metadata?.annotations?.[ANNOTATION_TAKEOVER] === undefined && now.status?.numberReady === 1
        ? now
        : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
  await waitForDevices(timeoutMs);
  return ds;
}

export async function waitForDevices(timeoutMs = 120_000): Promise<void> {
  await waitFor(
    `${realNode()} to advertise ${SAMPLE_IDS.length} of ${SAMPLE_RESOURCE}`,
    async (observe) => {
      const seen = advertised(await core().readNode({ name: realNode() }), SAMPLE_RESOURCE);
      observe(seen);
      return seen.capacity === SAMPLE_IDS.length && seen.allocatable === SAMPLE_IDS.length;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** A pod that holds one device for the whole scenario: its devices must survive the takeover. */
export async function createHolder(name: string): Promise<void> {
  await core().createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name },
      spec: {
        ...ON_REAL_NODE,
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: "work",
            image: workloadImage(),
            command: ["sleep", "3600"],
            resources: { limits: { [SAMPLE_RESOURCE]: "1" } },
          },
        ],
      },
    },
  });
  await waitForPodPhase("default", name, "Running");
}

export async function deletePod(name: string): Promise<void> {
  await core()
    .deleteNamespacedPod({ namespace: "default", name, gracePeriodSeconds: 0 })
    .catch(() => undefined);
}

/** Every pod's device ids of SAMPLE_RESOURCE as the real kubelet records them (PodResources List). */
export async function kubeletHolders(): Promise<Map<string, string[]>> {
  const client = new PodResourcesListerClient(
    `unix://${POD_RESOURCES_DIR}/${POD_RESOURCES_SOCKET_NAME}`,
    grpc.credentials.createInsecure(),
  );
  try {
    const answer = await new Promise<ListPodResourcesResponse>((resolve, reject) =>
      client.list({}, (err, res) => (err ? reject(err) : resolve(res))),
    );
    const held = new Map<string, string[]>();
    for (const pod of answer.podResources) {
      const ids = pod.containers
        .flatMap((c) => c.devices)
        .filter((d) => d.resourceName === SAMPLE_RESOURCE)
        .flatMap((d) => d.deviceIds);
      if (ids.length > 0) held.set(`${pod.namespace}/${pod.name}`, ids.sort());
    }
    return held;
  } finally {
    client.close();
  }
}

/** Device ids two pods hold at once, in the kubelet's record. */
export function heldTwice(held: Map<string, string[]>): string[] {
  const ids = [...held.values()].flat();
  return [...new Set(ids.filter((id, i) => ids.indexOf(id) !== i))];
}

export function statusWhere(
  name: string,
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs = 180_000,
): Promise<DevicePluginConfigStatus> {
  return configStatusWhere(custom(), name, what, pred, timeoutMs);
}

/** The takeover config: Mock with the sample plugin's ids, on the real node. */
export async function createTakeoverConfig(
  name: string,
  options: { pluginImage?: string; progressDeadlineSeconds: number },
): Promise<void> {
  await custom().createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name },
      spec: {
        resourceName: SAMPLE_RESOURCE,
        backend: { type: "Mock", mock: { devices: SAMPLE_IDS.length, ids: SAMPLE_IDS } },
        plugin: { logLevel: "info", ...(options.pluginImage ? { image: options.pluginImage } : {}) },
        takeover: { daemonSet: INCUMBENT, socket: "dp.*", deviceIds: "Same" },
        upgrade: {
          strategy: "Auto",
          maxUnavailable: 1,
          progressDeadlineSeconds: options.progressDeadlineSeconds,
        },
        ...ON_REAL_NODE,
      },
    },
  });
}

/**
 * The kubelet's record of who holds which device (PodResources List), polled every 100 ms while the
 * workload runs: every id a pod holds must be one of the devices (an id the incumbent does not know, held
 * beside the holder's, is a device handed out twice), and no id may be held by two pods.
 */
class HoldersPoller {
  samples = 0;
  readonly violations = new Set<string>();
  private running = true;
  private readonly loop: Promise<void>;

  constructor() {
    this.loop = (async () => {
      while (this.running) {
        const held = await kubeletHolders().catch(() => undefined);
        if (held !== undefined) {
          this.samples++;
          for (const id of heldTwice(held))
            this.violations.add(`${id} held twice: ${JSON.stringify([...held])}`);
          for (const [pod, ids] of held)
            for (const id of ids)
              if (!SAMPLE_IDS.includes(id)) this.violations.add(`${pod} holds ${id}, which is no device`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
  }

  async stop(): Promise<{ samples: number; violations: string[] }> {
    this.running = false;
    await this.loop;
    return { samples: this.samples, violations: [...this.violations] };
  }
}

export interface TakeoverFigures {
  /** A report of the config's plugin on the node said StandingBy (it served and waited to register). */
  stoodBy: boolean;
  /** What the kubelet's PodResources record showed throughout. */
  holders: { samples: number; violations: string[] };
  allocatable: AllocatableFigures;
  fenceMs: number;
  kubelet: { min: number; zeroMs: number; samples: number };
  pods: PodStreamResult;
  ms: number;
}

/**
 * Runs `during` (the takeover, or its rollback) with the watches and the workload going, keeps the workload
 * going until a pod was admitted after it, and returns what they saw.
 */
export async function underLoad(
  config: string,
  tag: string,
  during: () => Promise<void>,
): Promise<TakeoverFigures> {
  const allocatable = new AllocatableWatch(realNode(), SAMPLE_RESOURCE, config);
  await allocatable.start();
  const kubelet = new KubeletAllocatablePoller(SAMPLE_RESOURCE);
  kubelet.start();
  const holders = new HoldersPoller();
  let stoodBy = false;
  const reports = new LiveWatch<DeviceNodeState>(
    kc(),
    `/apis/dpo.dev/v1beta1/namespaces/${NAMESPACE}/devicenodestates`,
    { labelSelector: `${LABEL_CONFIG}=${configLabelValue(config)}` },
    (type, report) => {
      if (type !== "DELETED" && report.status?.registration.state === "StandingBy") stoodBy = true;
    },
  );
  await reports.start();
  // One device is the holder's: one pod at a time, each held briefly, so pods queue for the other.
  const stream = podStream(kc(), "default", SAMPLE_RESOURCE, {
    perSecond: 1,
    holdMs: 500,
    name: `${config}-${tag}`,
    image: workloadImage(),
    command: ["sleep", "3600"],
    ...ON_REAL_NODE,
  });
  const started = performance.now();
  let streaming = true;
  let polling = true;
  let recording = true;
  try {
    await during();
    const ms = Math.round(performance.now() - started);
    await waitForDevices();
    const admittedAtEnd = stream.admitted();
    await waitFor(
      `a pod admitted on ${realNode()} after the ${tag}`,
      (observe) => {
        observe({ admitted: stream.admitted(), before: admittedAtEnd, rejected: stream.rejected() });
        return stream.admitted() > admittedAtEnd;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    streaming = false;
    const pods = await stream.stop();
    polling = false;
    const onKubelet = await kubelet.stop();
    recording = false;
    const held = await holders.stop();
    const seen = await allocatable.stop();
    if (seen.fencedAtEnd) throw new Error(`${realNode()} still carries a Replace fence after the ${tag}`);
    return {
      stoodBy,
      allocatable: seen.allocatable,
      fenceMs: seen.fenceMs,
      kubelet: onKubelet,
      holders: held,
      pods,
      ms,
    };
  } finally {
    if (streaming) await stream.stop().catch(() => undefined);
    if (polling) await kubelet.stop().catch(() => undefined);
    if (recording) await holders.stop().catch(() => undefined);
    reports.stop();
  }
}

/** One line of figures for the test log (the docs quote them). */
export function describeTakeover(what: string, f: TakeoverFigures): string {
  const admitted = [...f.pods.admitted.values()].reduce((a, b) => a + b, 0);
  return (
    `${what}: ${f.ms} ms, Node allocatable min ${f.allocatable.min} (0 for ${f.allocatable.zeroMs} ms, ` +
    `${f.allocatable.samples} samples, ${f.allocatable.restarts} watch restarts), ` +
    `kubelet's own min ${f.kubelet.min} (0 for ${f.kubelet.zeroMs} ms, ${f.kubelet.samples} samples), ` +
    `fenced for ${f.fenceMs} ms, ${f.stoodBy ? "stood by" : "never stood by"}, PodResources ${f.holders.samples} samples ` +
    `(${f.holders.violations.length} violations), ${f.pods.created} pods created, ${admitted} admitted, ` +
    `${f.pods.rejected.length} rejected, ${f.pods.unscheduled.length} unscheduled` +
    (f.pods.rejected.length > 0 ? `: ${JSON.stringify(f.pods.rejected.slice(0, 2))}` : "")
  );
}
