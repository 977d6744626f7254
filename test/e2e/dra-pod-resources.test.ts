// End to end in DRA mode: a workload pod's ResourceClaim, allocated by the real scheduler and prepared by the
// simulated kubelet, shows in the real plugin's /metrics: the claimed device's series names the pod,
// namespace and container, as in device-plugin mode, read from the node's PodResources API (its
// dynamicResources); the prepare and unprepare latencies are recorded; when the pod goes, the device is
// free again. The plugin's /metrics passes Prometheus' own linter.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeRequest } from "../../src/kube/request.js";
import { draDeviceName } from "../../src/plugin-runtime/dra/devices.js";
import { buildPromlint, PROM_CLIENT_DEFAULT_PROBLEMS, promlint } from "../../tools/promlint/harness.js";
import {
  apiStatusCode,
  createWorkloadNamespace,
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  NODE_INDEX_LABEL,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { KubeletSimulator, type AdmittedPod } from "../../tools/kubelet-sim/node-simulator.js";
import { deviceTable, samplesOf } from "../metrics/exposition.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = "e2e-dra-podres";
const RESOURCE = "e2e-dra-podres.example/gpu";
const DRIVER = "gpu.e2e-dra-podres.example";
const CLASS = "gpu.e2e-dra-podres.example";
/**
 * Mock ids with an underscore are not DNS labels, so the slice publishes other names for them
 * (draDeviceName): the metrics must name the devices by their ids, as in device-plugin mode.
 */
const IDS = ["dra_pr-0", "dra_pr-1"];

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

let operator: OperatorProcess;
let sim: KubeletSimulator;
/** Where the workload pod runs: the node with index 0. */
let node: string;
let namespace: string;

async function configStatus(
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${NAME}: ${description}`,
    async (observe) => {
      const c = (await custom.getClusterCustomObject({ ...CONFIGS, name: NAME })) as {
        status?: DevicePluginConfigStatus;
      };
      observe({ devices: c.status?.devices, problems: c.status?.problems, conditions: c.status?.conditions });
      return c.status && check(c.status) ? c.status : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/** The /metrics of this config's plugin on the workload node, as a scraper would read it. */
async function pluginMetrics(): Promise<string> {
  const plugin = sim
    .plugins(node)
    .find((p) => p.running && p.slot.startsWith(`${NAMESPACE}/${NAME}`) && p.metricsUrl !== undefined);
  if (plugin?.metricsUrl === undefined) throw new Error(`no running plugin of ${NAME} on ${node}`);
  const response = await fetch(plugin.metricsUrl);
  if (!response.ok) throw new Error(`${plugin.metricsUrl}: HTTP ${response.status}`);
  return response.text();
}

/** Waits until the plugin's per-device series read `want` (device → "namespace/pod/container=value"). */
async function metricsShow(
  metric: string,
  description: string,
  want: Record<string, string>,
): Promise<string> {
  return waitFor(
    `the plugin on ${node}: ${description}`,
    async (observe) => {
      const text = await pluginMetrics();
      const table = deviceTable(text, metric);
      observe(table);
      return JSON.stringify(table) === JSON.stringify(want) ? text : undefined;
    },
    // The plugin reads the PodResources API every 10 s (its default).
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/** The count of a histogram of the plugin for this config's resource; 0 before its first observation. */
function histogramCount(text: string, name: string): number {
  return samplesOf(text, `${name}_count`, { resource: RESOURCE })[0]?.value ?? 0;
}

async function apply(objects: unknown[]): Promise<void> {
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  });
}

beforeAll(async () => {
  const nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(1);
  await installDpo();
  // The plugins serve their real /metrics on their probe port, where the test scrapes them.
  sim = await KubeletSimulator.start({ kubeconfig: kc, nodes, pluginMetrics: true });
  operator = await startOperator(["--status-write-interval", "500"]);
  const labelled = await core.listNode({ labelSelector: `${NODE_INDEX_LABEL}=0` });
  node = labelled.items[0]?.metadata?.name ?? "";
  expect(nodes).toContain(node);
  namespace = uniqueName("e2e-dra-podres");
  await createWorkloadNamespace(core, namespace);
  await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: IDS.length, idPrefix: "dra_pr" } },
        nodeSelector: { [NODE_INDEX_LABEL]: "0" },
        publish: "DRA",
        dra: { driverName: DRIVER, deviceClass: { name: CLASS } },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...CONFIGS, name: NAME }).catch((err: unknown) => {
    if (apiStatusCode(err) !== 404) throw err;
  });
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("devices held through DRA claims, from the kubelet's PodResources API", () => {
  it("labels the claimed device with its pod, namespace and container, records prepare and unprepare latencies, and frees it when the pod goes", async () => {
    await configStatus(
      "Ready with both devices",
      (s) =>
        s.devices?.summary === `${IDS.length}/${IDS.length}` &&
        s.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true,
    );
    const free = Object.fromEntries(IDS.map((id) => [id, "=0"]));
    await metricsShow("dpo_plugin_device_allocated", "every device free", free);

    // A trainer whose main container uses a claim from a template, next to a logger that uses none.
    const admitted = new Map<string, AdmittedPod>();
    const onAdmitted = (p: AdmittedPod): void => void admitted.set(p.pod, p);
    sim.on("podAdmitted", onAdmitted);
    try {
      await apply([
        {
          apiVersion: "resource.k8s.io/v1",
          kind: "ResourceClaimTemplate",
          metadata: { name: "one-gpu", namespace },
          spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: CLASS } }] } } },
        },
        {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "trainer", namespace },
          spec: {
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: "main",
                image: "registry.example/workload:1",
                resources: { claims: [{ name: "gpu" }] },
              },
              { name: "logger", image: "registry.example/workload:1" },
            ],
            resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "one-gpu" }],
          },
        },
      ]);
      await waitFor(
        "the trainer prepared and started by the simulated kubelet",
        (observe) => {
          observe([...admitted.keys()]);
          return admitted.has(`${namespace}/trainer`);
        },
        { timeoutMs: 90_000, intervalMs: 250 },
      );
    } finally {
      sim.off("podAdmitted", onAdmitted);
    }
    expect(admitted.get(`${namespace}/trainer`)?.node).toBe(node);

    // The claim's allocation is the truth: its one device, by the name the slice published.
    const trainer = await core.readNamespacedPod({ name: "trainer", namespace });
    const claimName = trainer.status?.resourceClaimStatuses?.[0]?.resourceClaimName ?? "";
    const claim = await kubeRequest<{
      status?: {
        allocation?: { devices?: { results?: { driver: string; pool: string; device: string }[] } };
      };
    }>(kc, {
      method: "GET",
      path: `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims/${claimName}`,
    });
    const results = claim.status?.allocation?.devices?.results ?? [];
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ driver: DRIVER, pool: node });
    const held = IDS.find((id) => draDeviceName(id) === results[0]?.device);
    expect(held, `${results[0]?.device} is not the DRA name of one of ${IDS.join(", ")}`).toBeDefined();
    expect(draDeviceName(held!)).not.toBe(held);

    const scraped = await metricsShow("dpo_plugin_device_allocated", "the claimed device with its pod", {
      ...free,
      [held!]: `${namespace}/trainer/main=1`,
    });
    // The health series carry the same holder; no other pod (the plugin's, the logger) shows up.
    expect(deviceTable(scraped, "dpo_plugin_device_healthy")).toEqual({
      ...Object.fromEntries(IDS.map((id) => [id, "=1"])),
      [held!]: `${namespace}/trainer/main=1`,
    });
    expect(samplesOf(scraped, "dpo_plugin_pod_resources_up", { resource: RESOURCE })[0]?.value).toBe(1);
    expect(histogramCount(scraped, "dpo_plugin_dra_prepare_duration_seconds")).toBeGreaterThanOrEqual(1);

    // What Prometheus' own linter says of the plugin's real /metrics in DRA mode, these series in them.
    const lint = await promlint(await buildPromlint(), "plugin", scraped);
    expect(lint.error).toBeUndefined();
    expect(lint.problems.filter((p) => p.metric.startsWith("dpo_"))).toEqual([]);
    expect(lint.problems).toEqual(expect.arrayContaining([...PROM_CLIENT_DEFAULT_PROBLEMS]));
    expect(lint.problems).toHaveLength(PROM_CLIENT_DEFAULT_PROBLEMS.length);

    // The pod goes: the kubelet unprepares its claim, the device is free again and its labels gone.
    await core.deleteNamespacedPod({ name: "trainer", namespace, gracePeriodSeconds: 0 });
    const after = await metricsShow("dpo_plugin_device_allocated", "every device free again", free);
    for (const metric of ["dpo_plugin_device_allocated", "dpo_plugin_device_healthy"]) {
      expect(samplesOf(after, metric, { namespace }), metric).toEqual([]);
      expect(samplesOf(after, metric), metric).toHaveLength(IDS.length);
    }
    await waitFor("the unprepare recorded", async (observe) => {
      const count = histogramCount(await pluginMetrics(), "dpo_plugin_dra_unprepare_duration_seconds");
      observe({ count });
      return count >= 1;
    });
  });
});
