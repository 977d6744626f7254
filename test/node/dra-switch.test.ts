// The DevicePlugin <-> DRA switch on the real node (issue 23, acceptance 2): a Deployment whose pods ask for
// `resources.limits: {<resourceName>: 1}` (no claim written by the user) keeps running and scaling while its
// config's spec.publish goes from DevicePlugin to DRA and back, through the real kubelet 1.37 and the real
// scheduler. The pods from before each switch keep running (same uids, no restart); not one pod fails
// admission (watched for the whole test); pods created after the switch to DRA get their device through the
// scheduler's ResourceClaim for the extended resource (pod.status.extendedResourceClaimStatus) with the same
// env and CDI edit a device plugin pod of the config sees; after the switch back, new pods get it through the
// device plugin again. No device is given twice: the DRA slice leaves out what device-plugin pods still
// hold, the device plugin never hands out what DRA claims hold, and the report lists those devices as held.
import { AppsV1Api, CustomObjectsApi, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { resourceEnvName } from "../../src/plugin-runtime/devices/env.js";
import { kubeRequest } from "../../src/kube/request.js";
import { PodWatch } from "./pod-watch.js";
import { kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { configStatusWhere } from "../e2e/upgrade-support.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import {
  advertised,
  core,
  dpoImage,
  ON_REAL_NODE,
  realNode,
  removeConfig,
  waitForAdvertised,
  workloadImage,
} from "./support.js";

const NAME = uniqueName("node-switch");
const RESOURCE = "node-switch.example/gpu";
const DRIVER = "gpu.node-switch.example";
/** Enough for every pod the test creates on either path (8), whichever path counts the others. */
const DEVICES = 8;
const NAMESPACE_WORKLOADS = "default";
const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const apps = kc.makeApiClient(AppsV1Api);
let operator: OperatorProcess | undefined;
let watched: PodWatch | undefined;

interface ClaimAllocation {
  status?: { allocation?: { devices?: { results?: { driver: string; pool: string; device: string }[] } } };
}

function statusWhere(
  what: string,
  check: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs?: number,
): Promise<DevicePluginConfigStatus> {
  return configStatusWhere(custom, NAME, what, check, timeoutMs);
}

async function workloadPods(): Promise<V1Pod[]> {
  const list = await core().listNamespacedPod({
    namespace: NAMESPACE_WORKLOADS,
    labelSelector: `app=${NAME}`,
  });
  return list.items;
}

async function scale(replicas: number): Promise<void> {
  await apps.patchNamespacedDeploymentScale({
    name: NAME,
    namespace: NAMESPACE_WORKLOADS,
    body: [{ op: "replace", path: "/spec/replicas", value: replicas }],
  });
}

/** Waits until `count` pods of the Deployment run with their container ready; returns them. */
async function runningPods(count: number, timeoutMs = 180_000): Promise<V1Pod[]> {
  return waitFor(
    `${count} Running pods of ${NAME}`,
    async (observe) => {
      const pods = await workloadPods();
      observe(
        pods.map((p) => ({
          name: p.metadata?.name,
          node: p.spec?.nodeName,
          phase: p.status?.phase,
          scheduled: p.status?.conditions?.find((c) => c.type === "PodScheduled")?.message,
          state: p.status?.containerStatuses?.[0]?.state,
        })),
      );
      const running = pods.filter(
        (p) => p.status?.phase === "Running" && p.status.containerStatuses?.every((c) => c.ready) === true,
      );
      return pods.length === count && running.length === count ? running : undefined;
    },
    { timeoutMs, intervalMs: 500 },
  );
}

async function containerEnv(pod: string): Promise<Record<string, string>> {
  const { stdout } = await kubectl(["exec", "-n", NAMESPACE_WORKLOADS, pod, "--", "env"]);
  return Object.fromEntries(
    stdout
      .trim()
      .split("\n")
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/**
 * What a container sees of its device, with the device's id taken out: the env of the plugin and of the
 * CDI edit (`MOCK_DEVICE_<ID>=<id>`, which only a CDI-aware runtime sets), and the id it names.
 */
async function deviceView(pod: string): Promise<{ id: string; env: Record<string, string> }> {
  const env = await containerEnv(pod);
  const cdi = Object.entries(env).filter(([k]) => /^MOCK_DEVICE_S_\d+$/.test(k));
  expect(cdi, `${pod}: exactly one CDI-set device variable in ${JSON.stringify(env)}`).toHaveLength(1);
  const id = cdi[0]![1];
  const ours = Object.entries(env).filter(
    ([k]) => k.startsWith("MOCK_DEVICE_") || k === resourceEnvName(RESOURCE),
  );
  return {
    id,
    env: Object.fromEntries(
      ours.map(([k, v]) => [
        k.replace(id.toUpperCase().replace(/-/g, "_"), "<ID>"),
        v.split(id).join("<id>"),
      ]),
    ),
  };
}

/** The scheduler's claim for a pod's extended resource, as the pod's status names it; undefined if none. */
async function extendedResourceClaim(
  pod: V1Pod,
): Promise<{ name: string; claim: ClaimAllocation } | undefined> {
  const status = pod.status?.extendedResourceClaimStatus;
  if (status === undefined) return undefined;
  expect(status.requestMappings, pod.metadata?.name).toEqual([
    expect.objectContaining({ containerName: "main", resourceName: RESOURCE }),
  ]);
  const claim = await kubeRequest<ClaimAllocation>(kc, {
    method: "GET",
    path: `/apis/resource.k8s.io/v1/namespaces/${NAMESPACE_WORKLOADS}/resourceclaims/${status.resourceClaimName}`,
  });
  return { name: status.resourceClaimName, claim };
}

/** Switches spec.publish and scales up by one at once (pods created during the switch), until Complete. */
async function switchTo(target: "DRA" | "DevicePlugin", replicasDuring: number): Promise<number> {
  const before = await statusWhere("a revision", (s) => s.upgrade !== undefined);
  const started = performance.now();
  await custom.patchClusterCustomObject({
    ...GROUP,
    name: NAME,
    body: [{ op: "replace", path: "/spec/publish", value: target }],
  });
  await scale(replicasDuring);
  await statusWhere(
    `the switch to ${target} Complete`,
    (s) =>
      s.upgrade?.phase === "Complete" &&
      s.upgrade.updateRevision !== before.upgrade!.updateRevision &&
      s.upgrade.updated === s.upgrade.total,
    300_000,
  );
  return Math.round(performance.now() - started);
}

interface HeldReport {
  spec: { configName: string; nodeName: string };
  status?: { devices?: { id: string; heldBy?: string }[] };
}

/**
 * The devices the `by` path's pods among `pods` hold (at least two), once a report of the config on the
 * real node lists exactly those as held by that path.
 */
async function heldThrough(by: "DevicePlugin" | "DRA", pods: readonly V1Pod[]): Promise<string[]> {
  const ids = (
    await Promise.all(
      pods
        .filter((p) => (p.status?.extendedResourceClaimStatus === undefined) === (by === "DevicePlugin"))
        .map(async (p) => (await deviceView(p.metadata!.name!)).id),
    )
  ).sort();
  expect(ids.length, `pods holding devices through ${by}`).toBeGreaterThanOrEqual(2);
  await waitFor(
    `a report to list ${JSON.stringify(ids)} as held by ${by}`,
    async (observe) => {
      const held = await heldInReports(by);
      observe(held);
      return held.some((r) => JSON.stringify(r) === JSON.stringify(ids));
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
  return ids;
}

/** Per report of the config on the real node: the devices it lists as held by the `by` path, sorted. */
async function heldInReports(by: "DevicePlugin" | "DRA"): Promise<string[][]> {
  const list = await kubeRequest<{ items: HeldReport[] }>(kc, {
    method: "GET",
    path: "/apis/dpo.dev/v1beta1/devicenodestates",
  });
  return list.items
    .filter((r) => r.spec.configName === NAME && r.spec.nodeName === realNode())
    .map((r) =>
      (r.status?.devices ?? [])
        .filter((d) => d.heldBy === by)
        .map((d) => d.id)
        .sort(),
    );
}

/** The device names the driver's slices publish for the real node. */
async function sliceDevices(): Promise<string[]> {
  const list = await kubeRequest<{
    items: { spec: { driver: string; nodeName?: string; devices?: { name: string }[] } }[];
  }>(kc, { method: "GET", path: "/apis/resource.k8s.io/v1/resourceslices" });
  return list.items
    .filter((s) => s.spec.driver === DRIVER && s.spec.nodeName === realNode())
    .flatMap((s) => (s.spec.devices ?? []).map((d) => d.name))
    .sort();
}

function uidsOf(pods: readonly V1Pod[]): string[] {
  return pods.map((p) => p.metadata!.uid!).sort();
}

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", "250"], {}, { pluginImage: dpoImage() });
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        publish: "DevicePlugin",
        dra: { driverName: DRIVER },
        cdi: { enabled: true },
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "s" } },
        upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 300 },
        ...ON_REAL_NODE,
      },
    }),
  });
  await statusWhere(
    "Ready on the device plugin, with the extended resource mapping possible",
    (s) =>
      s.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true &&
      s.conditions.some((c) => c.type === "ExtendedResourceMapping" && c.status === "True"),
  );
  await waitForAdvertised(RESOURCE, { capacity: DEVICES, allocatable: DEVICES });
  watched = new PodWatch(kc, NAMESPACE_WORKLOADS, NAME);
  await watched.start();
}, 300_000);

afterAll(async () => {
  watched?.stop();
  await kubectl(
    ["delete", "deployment", NAME, "-n", NAMESPACE_WORKLOADS, "--ignore-not-found", "--wait=true"],
    {
      allowFailure: true,
    },
  );
  await kubectl(["delete", "pod", "-n", NAMESPACE_WORKLOADS, "-l", `app=${NAME}`, "--wait=true"], {
    allowFailure: true,
  });
  await removeConfig(NAME);
  await operator?.stop();
}, 300_000);

describe("switching a config between DevicePlugin and DRA on the real node", () => {
  it("keeps a Deployment's pods running and scaling: no failed admission, DRA claims after the switch, the device plugin after the way back", async () => {
    const w = watched!;
    await apps.createNamespacedDeployment({
      namespace: NAMESPACE_WORKLOADS,
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: NAME, labels: { app: NAME } },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: NAME } },
          template: {
            metadata: { labels: { app: NAME } },
            spec: {
              ...ON_REAL_NODE,
              terminationGracePeriodSeconds: 0,
              containers: [
                {
                  name: "main",
                  image: workloadImage(),
                  command: ["sleep", "3600"],
                  resources: { limits: { [RESOURCE]: "1" } },
                },
              ],
            },
          },
        },
      },
    });
    const first = await runningPods(2);
    const pluginView = await deviceView(first[0]!.metadata!.name!);
    console.log(`a device plugin pod sees: ${JSON.stringify(pluginView)}`);
    // The device plugin path: the plugin's env and the CDI edit applied by containerd.
    expect(pluginView.env).toEqual({
      [resourceEnvName(RESOURCE)]: "<id>",
      MOCK_DEVICE_IDS: "<id>",
      "MOCK_DEVICE_<ID>": "<id>",
    });
    for (const pod of first)
      expect(pod.status?.extendedResourceClaimStatus, pod.metadata?.name).toBeUndefined();

    // DevicePlugin -> DRA, one pod created during the switch, two after it.
    const toDraMs = await switchTo("DRA", 3);
    // What the scheduler reads: allocatable 0 within 30 s, or the test fails with the capacity and
    // allocatable last seen. The kubelet may keep a stopped plugin's capacity a while, so capacity is
    // not waited for.
    await waitFor(
      `${realNode()}: allocatable ${RESOURCE} 0 after the switch to DRA`,
      async (observe) => {
        const seen = advertised(await core().readNode({ name: realNode() }), RESOURCE);
        observe(seen);
        return seen.allocatable === 0;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const during = await runningPods(3);
    await scale(5);
    const onDra = await runningPods(5);
    const newOnDra = onDra.filter((p) => !uidsOf(during).includes(p.metadata!.uid!));
    expect(newOnDra).toHaveLength(2);
    for (const pod of newOnDra) {
      const name = pod.metadata!.name!;
      const found = await extendedResourceClaim(pod);
      expect(found, `${name}: status.extendedResourceClaimStatus after the switch to DRA`).toBeDefined();
      const results = found!.claim.status?.allocation?.devices?.results ?? [];
      expect(results, `claim ${found!.name}`).toEqual([
        expect.objectContaining({ driver: DRIVER, pool: realNode() }),
      ]);
      const view = await deviceView(name);
      console.log(
        `DRA pod ${name} (claim ${found!.name}, device ${results[0]!.device}) sees: ${JSON.stringify(view)}`,
      );
      expect(view.id).toBe(results[0]!.device);
      expect(view.env, `${name} sees what a device plugin pod sees`).toEqual(pluginView.env);
    }
    // What the device plugin's pods hold stays theirs: the DRA plugin leaves those devices out of its slice
    // (the kubelet's PodResources API names them) and its report lists them as held by the device
    // plugin, not as unhealthy.
    const pluginHeld = await heldThrough("DevicePlugin", onDra);
    const published = await sliceDevices();
    expect(
      published.filter((d) => pluginHeld.includes(d)),
      `slice ${JSON.stringify(published)}`,
    ).toEqual([]);
    expect(published).toHaveLength(DEVICES - pluginHeld.length);
    const onDraStatus = await statusWhere("a status on DRA", (s) => s.devices !== undefined);
    expect(onDraStatus.devices?.unhealthy ?? 0, "held devices are not unhealthy").toBe(0);

    for (const pod of first) {
      const now = onDra.find((p) => p.metadata!.uid === pod.metadata!.uid);
      expect(now, `${pod.metadata!.name} still runs after the switch to DRA`).toBeDefined();
      expect(now!.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    }

    // DRA -> DevicePlugin, one pod during the switch, two after it.
    const toPluginMs = await switchTo("DevicePlugin", 6);
    // The device plugin advertises every device again: the scheduler counts the DRA pods' requests against
    // them. It never hands out what their claims hold (the report says which), so the next pods get others.
    await waitForAdvertised(RESOURCE, { capacity: DEVICES, allocatable: DEVICES }, 60_000);
    const back = await runningPods(6);
    await heldThrough("DRA", back);
    await scale(8);
    const all = await runningPods(8);
    const newOnPlugin = all.filter((p) => !uidsOf(back).includes(p.metadata!.uid!));
    expect(newOnPlugin).toHaveLength(2);
    for (const pod of newOnPlugin) {
      const name = pod.metadata!.name!;
      expect(
        pod.status?.extendedResourceClaimStatus,
        `${name}: no DRA claim after the way back`,
      ).toBeUndefined();
      const view = await deviceView(name);
      expect(view.env, `${name} gets its device from the device plugin again`).toEqual(pluginView.env);
    }
    // Every pod that ran before a switch runs still, under the same uid, never restarted.
    expect(uidsOf(all)).toEqual(expect.arrayContaining(uidsOf(onDra)));
    for (const pod of all)
      expect(pod.status?.containerStatuses?.[0]?.restartCount, pod.metadata?.name).toBe(0);

    await w.sweep();
    // Which device each pod holds, by path: no device is given twice, whichever path gave it.
    const holders: string[] = [];
    const ids: string[] = [];
    for (const pod of all) {
      const path = pod.status?.extendedResourceClaimStatus === undefined ? "device plugin" : "DRA";
      const id = (await deviceView(pod.metadata!.name!)).id;
      ids.push(id);
      holders.push(`${pod.metadata!.name}: ${id} (${path})`);
    }
    console.log(
      `switch on the real node: to DRA ${toDraMs} ms, back ${toPluginMs} ms; ${w.pods.size} pods seen, ${w.admissionFailures.size} failed admission, ${w.restarts.size} restarts; watch ends: ${JSON.stringify(w.ends)}; devices held: ${JSON.stringify(holders)}; warnings: ${JSON.stringify([...w.warnings].filter((x) => !x.includes("MissingClusterDNS")))}`,
    );
    expect(new Set(ids).size, `one device per pod: ${JSON.stringify(holders)}`).toBe(all.length);
    expect([...w.admissionFailures]).toEqual([]);
    expect([...w.restarts]).toEqual([]);
    expect(w.deleted).toEqual([]);
    expect(w.pods.size).toBe(8);
  }, 1_200_000);
});
