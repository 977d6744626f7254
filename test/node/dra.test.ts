// DRA on the real node: the plugin pod publishes the node's ResourceSlices, the real scheduler allocates a
// ResourceClaimTemplate's claim, the real kubelet prepares it through the plugin and containerd applies the CDI
// device; after a kubelet restart (which deletes every slice of its node) the slices are back within 2 s of the
// new kubelet's /healthz answering; and the plugin's per-pod metrics come from the real kubelet's PodResources
// API. Device health on the DRA path: a device flipped unhealthy is tainted in the slice within 2 s, a new pod's
// claim avoids it, the pod holding it shows it in allocatedResourcesStatus (the kubelet's DRAResourceHealth
// stream), and the taint goes within 2 s of recovery.
import { CustomObjectsApi } from "@kubernetes/client-node";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeRequest } from "../../src/kube/request.js";
import { kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { deviceTable } from "../metrics/exposition.js";
import { configStatusWhere } from "../e2e/upgrade-support.js";
import { installDpo, startOperator, type OperatorProcess } from "../e2e/support.js";
import {
  core,
  dpoImage,
  ON_REAL_NODE,
  pluginMetrics,
  realNode,
  removeConfig,
  restartRealKubeletTimed,
  waitForPodPhase,
  workloadImage,
} from "./support.js";

const NAME = uniqueName("node-dra");
const DRIVER = "gpu.node-dra.example";
const SLICES = "/apis/resource.k8s.io/v1/resourceslices";
const NAMESPACE_WORKLOADS = "default";
/** The Mock backend's health file on the real node (the plugin pod mounts its directory). */
const HEALTH_FILE = "/run/dpo-node-dra/health.json";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
let operator: OperatorProcess;

interface Slice {
  metadata: { name: string; uid: string };
  spec: {
    nodeName?: string;
    driver: string;
    devices?: { name: string; taints?: { key: string; value?: string; effect: string }[] }[];
  };
}

/** Replaces the health file in one step, as the mock backend's watch expects. */
async function writeHealth(content: Record<string, unknown>): Promise<void> {
  await mkdir(dirname(HEALTH_FILE), { recursive: true });
  await writeFile(`${HEALTH_FILE}.tmp`, JSON.stringify(content));
  await rm(HEALTH_FILE, { force: true });
  await writeFile(HEALTH_FILE, JSON.stringify(content));
}

/** The node's published devices with their taints, by name. */
async function deviceTaints(): Promise<Record<string, string[]>> {
  const devices = (await nodeSlices()).flatMap((s) => s.spec.devices ?? []);
  return Object.fromEntries(
    devices.map((d) => [d.name, (d.taints ?? []).map((t) => `${t.key}=${t.value ?? ""}:${t.effect}`)]),
  );
}

async function nodeSlices(): Promise<Slice[]> {
  const list = await kubeRequest<{ items: Slice[] }>(kc, {
    method: "GET",
    path: `${SLICES}?fieldSelector=${encodeURIComponent(`spec.nodeName=${realNode()},spec.driver=${DRIVER}`)}`,
  });
  return list.items;
}

function configStatus(
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return configStatusWhere(custom, NAME, description, check);
}

beforeAll(async () => {
  await writeHealth({});
  await installDpo();
  operator = await startOperator([], {}, { pluginImage: dpoImage() });
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: `node-dra.example/gpu`,
        publish: "DRA",
        dra: { driverName: DRIVER },
        backend: {
          type: "Mock",
          mock: { devices: 2, idPrefix: "g", attributes: { model: "X100" }, healthFile: HEALTH_FILE },
        },
        ...ON_REAL_NODE,
      },
    }),
  });
  await configStatus(
    "Ready",
    (s) => s.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true,
  );
}, 300_000);

afterAll(async () => {
  await kubectl(
    [
      "delete",
      "pod,resourceclaimtemplate",
      "-n",
      NAMESPACE_WORKLOADS,
      "-l",
      `dpo.dev/test=${NAME}`,
      "--wait=true",
    ],
    {
      allowFailure: true,
    },
  );
  await removeConfig(NAME);
  await operator?.stop();
  await rm(dirname(HEALTH_FILE), { recursive: true, force: true });
}, 120_000);

describe("DRA on the real node", () => {
  it("publishes the node's slices, and a ResourceClaimTemplate pod runs with its CDI device", async () => {
    const slices = await waitFor("the node's ResourceSlices", async (observe) => {
      const found = await nodeSlices();
      observe(found.map((s) => s.spec.devices?.map((d) => d.name)));
      return found.flatMap((s) => s.spec.devices ?? []).length === 2 ? found : undefined;
    });
    expect(slices.every((s) => s.spec.nodeName === realNode())).toBe(true);

    const deviceClass = DRIVER;
    await kubectl(["apply", "--server-side", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "v1",
        kind: "List",
        items: [
          {
            apiVersion: "resource.k8s.io/v1",
            kind: "ResourceClaimTemplate",
            metadata: { name: "one-gpu", namespace: NAMESPACE_WORKLOADS, labels: { "dpo.dev/test": NAME } },
            spec: {
              spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: deviceClass } }] } },
            },
          },
          {
            apiVersion: "v1",
            kind: "Pod",
            metadata: {
              name: "dra-workload",
              namespace: NAMESPACE_WORKLOADS,
              labels: { "dpo.dev/test": NAME },
            },
            spec: {
              ...ON_REAL_NODE,
              terminationGracePeriodSeconds: 0,
              containers: [
                {
                  name: "main",
                  image: workloadImage(),
                  command: ["sleep", "3600"],
                  resources: { claims: [{ name: "gpu" }] },
                },
              ],
              resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "one-gpu" }],
            },
          },
        ],
      }),
    });
    await waitForPodPhase(NAMESPACE_WORKLOADS, "dra-workload", "Running");
    const { stdout } = await kubectl(["exec", "-n", NAMESPACE_WORKLOADS, "dra-workload", "--", "env"]);
    // The Mock backend's CDI edit for its device, applied by containerd from the spec the plugin wrote.
    expect(stdout).toMatch(/^MOCK_DEVICE_G_[01]=g-[01]$/m);
  });

  it("taints a device flipped unhealthy within 2 s, a new claim avoids it, the pod holding it shows it, and the taint goes within 2 s of recovery", async () => {
    const holder = await core().readNamespacedPod({ name: "dra-workload", namespace: NAMESPACE_WORKLOADS });
    const claimName = holder.status?.resourceClaimStatuses?.[0]?.resourceClaimName ?? "";
    const claim = await kubeRequest<{
      status?: { allocation?: { devices?: { results?: { device: string }[] } } };
    }>(kc, {
      method: "GET",
      path: `/apis/resource.k8s.io/v1/namespaces/${NAMESPACE_WORKLOADS}/resourceclaims/${claimName}`,
    });
    const held = claim.status?.allocation?.devices?.results?.[0]?.device ?? "";
    const free = ["g-0", "g-1"].find((d) => d !== held)!;
    expect(held, `claim ${claimName}`).toMatch(/^g-[01]$/);

    // Both devices fail: the held one for the holder's status, the free one so a new claim has to avoid it.
    const failedAt = performance.now();
    await writeHealth({
      [held]: { health: "Unhealthy", reason: "Overheated" },
      [free]: { health: "Unhealthy", reason: "ECC error" },
    });
    const tainted = await waitFor(
      "both devices tainted in the node's slice",
      async (observe) => {
        const taints = await deviceTaints();
        observe(taints);
        return taints[held]?.length === 1 && taints[free]?.length === 1 ? taints : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const taintMs = performance.now() - failedAt;
    console.log(`device unhealthy -> slice tainted: ${Math.round(taintMs)} ms`);
    expect(tainted).toEqual({
      [held]: ["dpo.dev/unhealthy=Overheated:NoSchedule"],
      [free]: ["dpo.dev/unhealthy=ECC_error:NoSchedule"],
    });
    expect(taintMs).toBeLessThan(2_000);

    // The real kubelet reads the plugin's DRAResourceHealth stream into the holder's container status.
    const shown = await waitFor(
      `dra-workload's allocatedResourcesStatus to show ${held} unhealthy`,
      async (observe) => {
        const pod = await core().readNamespacedPod({ name: "dra-workload", namespace: NAMESPACE_WORKLOADS });
        const statuses = pod.status?.containerStatuses?.flatMap((c) => c.allocatedResourcesStatus ?? []);
        observe(statuses);
        return statuses?.find((s) =>
          s.resources?.some((r) => r.resourceID.endsWith(`-${held}`) && r.health === "Unhealthy"),
        );
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    console.log(`dra-workload allocatedResourcesStatus: ${JSON.stringify(shown)}`);
    // The container names the claim without a request: the kubelet calls it "claim:<name>".
    expect(shown.name).toBe("claim:gpu");

    // A new pod's claim avoids both tainted devices (the scheduler refuses them) while they stay unhealthy.
    await kubectl(["apply", "--server-side", "-f", "-"], {
      input: JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "dra-late", namespace: NAMESPACE_WORKLOADS, labels: { "dpo.dev/test": NAME } },
        spec: {
          ...ON_REAL_NODE,
          terminationGracePeriodSeconds: 0,
          containers: [
            {
              name: "main",
              image: workloadImage(),
              command: ["sleep", "3600"],
              resources: { claims: [{ name: "gpu" }] },
            },
          ],
          resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "one-gpu" }],
        },
      }),
    });
    await waitFor(
      "dra-late unschedulable while the free device is tainted",
      async (observe) => {
        const pod = await core().readNamespacedPod({ name: "dra-late", namespace: NAMESPACE_WORKLOADS });
        const scheduled = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
        observe({ node: pod.spec?.nodeName, scheduled });
        return scheduled?.status === "False" && scheduled.reason === "Unschedulable";
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    const recoveredAt = performance.now();
    await writeHealth({});
    await waitFor(
      "both taints gone from the node's slice",
      async (observe) => {
        const taints = await deviceTaints();
        observe(taints);
        return Object.keys(taints).length === 2 && Object.values(taints).every((t) => t.length === 0);
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const untaintMs = performance.now() - recoveredAt;
    console.log(`device healthy -> taint gone: ${Math.round(untaintMs)} ms`);
    expect(untaintMs).toBeLessThan(2_000);
    await waitForPodPhase(NAMESPACE_WORKLOADS, "dra-late", "Running");
    const { stdout } = await kubectl(["exec", "-n", NAMESPACE_WORKLOADS, "dra-late", "--", "env"]);
    expect(stdout).toContain(`=${free}`);
    // The holder's status reads healthy again from the stream.
    await waitFor(
      `dra-workload's allocatedResourcesStatus to show ${held} healthy again`,
      async (observe) => {
        const pod = await core().readNamespacedPod({ name: "dra-workload", namespace: NAMESPACE_WORKLOADS });
        const statuses = pod.status?.containerStatuses?.flatMap((c) => c.allocatedResourcesStatus ?? []);
        observe(statuses);
        return statuses?.some((s) =>
          s.resources?.some((r) => r.resourceID.endsWith(`-${held}`) && r.health === "Healthy"),
        );
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  });

  it("has the node's slices back within 2 s of the restarted kubelet's /healthz answering, though it deletes them", async () => {
    const before = await nodeSlices();
    expect(before.length).toBeGreaterThan(0);
    const kubelet = await restartRealKubeletTimed();
    // The new kubelet deletes its node's slices as it starts: wait to see them replaced (new uids).
    const back = await waitFor(
      "the node's slices deleted by the restarted kubelet and published again",
      async (observe) => {
        const now = await nodeSlices();
        observe(now.map((s) => s.metadata.uid));
        const fresh = now.filter((s) => !before.some((b) => b.metadata.uid === s.metadata.uid));
        return fresh.length > 0 && fresh.flatMap((s) => s.spec.devices ?? []).length === 2
          ? Date.now()
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    console.log(
      `kubelet restart: /healthz ok ${kubelet.healthyAt - kubelet.startedAt} ms after the new process started ` +
        `(${kubelet.healthyAt - kubelet.stoppedAt} ms after the SIGTERM); slices back ${back - kubelet.healthyAt} ms after /healthz`,
    );
    expect(back - kubelet.healthyAt).toBeLessThan(2_000);
  });

  it("names the pod holding each device in the plugin's metrics, from the real kubelet's PodResources API", async () => {
    await waitFor(
      "the plugin's per-device series to name dra-workload",
      async (observe) => {
        const table = deviceTable(await pluginMetrics(NAME), "dpo_plugin_device_allocated");
        observe(table);
        return Object.values(table).some((v) => v.startsWith(`${NAMESPACE_WORKLOADS}/dra-workload/main=1`));
      },
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
  });
});
