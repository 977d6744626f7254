// DRA on the real node: the plugin pod publishes the node's ResourceSlices, the real scheduler allocates a
// ResourceClaimTemplate's claim, the real kubelet prepares it through the plugin and containerd applies the CDI
// device; a kubelet restart (which deletes every slice of its node) leaves the slices back within 2 s; and the
// plugin's per-pod metrics come from the real kubelet's PodResources API.
import { CustomObjectsApi } from "@kubernetes/client-node";
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
  restartRealKubelet,
  waitForPodPhase,
  workloadImage,
} from "./support.js";

const NAME = uniqueName("node-dra");
const DRIVER = "gpu.node-dra.example";
const SLICES = "/apis/resource.k8s.io/v1/resourceslices";
const NAMESPACE_WORKLOADS = "default";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
let operator: OperatorProcess;

interface Slice {
  metadata: { name: string; uid: string };
  spec: { nodeName?: string; driver: string; devices?: { name: string }[] };
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
        backend: { type: "Mock", mock: { devices: 2, idPrefix: "g", attributes: { model: "X100" } } },
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

  it("has the node's slices back within 2 s of a kubelet restart, which deletes them", async () => {
    const before = await nodeSlices();
    expect(before.length).toBeGreaterThan(0);
    const restarted = performance.now();
    await restartRealKubelet();
    // The new kubelet deletes its node's slices as it starts: wait to see them replaced (new uids).
    const back = await waitFor(
      "the node's slices deleted by the restarted kubelet and published again",
      async (observe) => {
        const now = await nodeSlices();
        observe(now.map((s) => s.metadata.uid));
        const fresh = now.filter((s) => !before.some((b) => b.metadata.uid === s.metadata.uid));
        return fresh.length > 0 && fresh.flatMap((s) => s.spec.devices ?? []).length === 2
          ? performance.now()
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    const kubeletUp = await waitFor("the kubelet to answer again", async () => {
      const node = await core().readNode({ name: realNode() });
      return node.status?.conditions?.find((c) => c.type === "Ready")?.status === "True"
        ? performance.now()
        : undefined;
    });
    console.log(
      `kubelet restart -> slices back: ${Math.round(back - restarted)} ms (node Ready again seen at ${Math.round(kubeletUp - restarted)} ms)`,
    );
    // Measured from the restart, so this also holds the kubelet's own start; the slices must not lag it by more than 2 s.
    expect(back - restarted).toBeLessThan(kubeletStartAllowanceMs + 2_000);
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

/** The kubelet's own start to the point where it deletes its node's slices (measured: ~1 s here). */
const kubeletStartAllowanceMs = 5_000;
