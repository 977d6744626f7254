// End to end: workload pods get devices on a simulated node through Allocate; the plugin reads the node's
// PodResources API and its real /metrics name the pod, namespace and container of every device it holds;
// DeviceNodeState and the config's status (in both API versions) count them; when the pods go, so do the
// labels and the counts. Both components' /metrics pass Prometheus' own linter.
import { CoreV1Api, CustomObjectsApi, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { buildPromlint, PROM_CLIENT_DEFAULT_PROBLEMS, promlint } from "../../tools/promlint/harness.js";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  NODE_INDEX_LABEL,
  uniqueName,
  waitFor,
  createWorkloadNamespace,
} from "../cluster/helpers.js";
import { serveConversionFromTest, type TestConversionWebhook } from "../cluster/conversion-webhook.js";
import { kubectlTable } from "../cluster/kubectl-table.js";
import { KubeletSimulator, type AdmittedPod } from "../../tools/kubelet-sim/node-simulator.js";
import { deviceTable, samplesOf } from "../metrics/exposition.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = "e2e-podres";
const RESOURCE = "e2e.example/podres";
const HEALTH_FILE = "/run/dpo/e2e-podres-health.json";
/** Physical devices per node, each shared by two containers: the kubelet knows 8 ids per node. */
const DEVICES = 4;
const REPLICAS = 2;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

let operator: OperatorProcess;
let sim: KubeletSimulator;
/** Serves v1alpha1 reads (the operator runs without its webhook here). */
let conversion: TestConversionWebhook | undefined;
let nodes: string[];
/** Where the workload pods run: the node with index 0. */
let node: string;
let workloads: string;

interface StoredConfig {
  metadata: { generation: number };
  status?: DevicePluginConfigStatus;
}

async function configStatus(
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${NAME}: ${description}`,
    async (observe) => {
      const c = (await custom.getClusterCustomObject({ ...CONFIGS, name: NAME })) as StoredConfig;
      observe({ devices: c.status?.devices, nodes: c.status?.nodes, problems: c.status?.problems });
      return c.status && check(c.status) ? c.status : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
}

/** The node's report written by the plugin pod that runs there now. */
async function nodeReport(
  description: string,
  check: (r: DeviceNodeState) => boolean,
): Promise<DeviceNodeState> {
  return waitFor(
    `the DeviceNodeState of ${node}: ${description}`,
    async (observe) => {
      const list = (await custom.listNamespacedCustomObject({
        group: "dpo.dev",
        version: "v1beta1",
        plural: "devicenodestates",
        namespace: NAMESPACE,
        labelSelector: `dpo.dev/config=${NAME},dpo.dev/node=${node}`,
      })) as { items: DeviceNodeState[] };
      observe(list.items.map((r) => ({ name: r.metadata.name, allocated: r.status?.allocated })));
      return list.items.find(check);
    },
    // A new count alone is written at most every 30 s, after the plugin's next read (every 10 s).
    { timeoutMs: 90_000, intervalMs: 250 },
  );
}

/** The /metrics of the plugin of this config on the workload node, as a scraper would read it. */
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

function writeHealth(content: Record<string, unknown>): void {
  sim.writeHostFile(node, HEALTH_FILE, JSON.stringify(content));
}

function workloadPod(name: string, containers: { name: string; devices: number }[]): V1Pod {
  return {
    metadata: { name, namespace: workloads },
    spec: {
      nodeSelector: { [NODE_INDEX_LABEL]: "0" },
      terminationGracePeriodSeconds: 0,
      containers: containers.map((c) => ({
        name: c.name,
        image: "registry.example/workload:1",
        ...(c.devices > 0 ? { resources: { limits: { [RESOURCE]: String(c.devices) } } } : {}),
      })),
    },
  };
}

/** Every id the kubelet knows on a node: `<prefix>-<k>::<replica>`. */
function allDeviceIds(): string[] {
  return Array.from({ length: DEVICES }, (_, k) =>
    Array.from({ length: REPLICAS }, (_, r) => `pr-${k}::${r}`),
  ).flat();
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(1);
  await installDpo();
  conversion = await serveConversionFromTest();
  // The plugins serve their real /metrics on their probe port, where the test scrapes them.
  sim = await KubeletSimulator.start({ kubeconfig: kc, nodes, gracePeriodMs: 60_000, pluginMetrics: true });
  operator = await startOperator(["--status-write-interval", "500"]);
  const labelled = await core.listNode({ labelSelector: `${NODE_INDEX_LABEL}=0` });
  node = labelled.items[0]?.metadata?.name ?? "";
  expect(nodes).toContain(node);
  workloads = uniqueName("e2e-podres");
  await createWorkloadNamespace(core, workloads);
  await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "pr", healthFile: HEALTH_FILE } },
        sharing: { strategy: "TimeSlicing", replicas: REPLICAS },
        nodeSelector: { "feature.example/foo": "true" },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await core.deleteNamespace({ name: workloads }).catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...CONFIGS, name: NAME }).catch((err: unknown) => {
    if (apiStatusCode(err) !== 404) throw err;
  });
  await operator?.stop();
  await sim?.stop();
  await conversion?.stop();
}, 120_000);

describe("devices held by workload pods, from the kubelet's PodResources API", () => {
  it("labels each device with its pod, namespace and container, counts them in the node report and the config, and forgets them when the pods go", async () => {
    const perNode = DEVICES * REPLICAS;
    await configStatus(
      "Ready on every node, nothing allocated",
      (s) =>
        s.devices?.summary === `${perNode * nodes.length}/${perNode * nodes.length}` &&
        s.devices.allocated === 0 &&
        s.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true,
    );
    const free = Object.fromEntries(allDeviceIds().map((id) => [id, "=0"]));
    await metricsShow("dpo_plugin_device_allocated", "every device free", free);

    // Two pods on the node: a trainer whose main container holds two devices next to a logger that holds
    // none, and a renderer with one.
    const admitted = new Map<string, AdmittedPod>();
    const onAdmitted = (p: AdmittedPod): void => void admitted.set(p.pod, p);
    sim.on("podAdmitted", onAdmitted);
    try {
      await core.createNamespacedPod({
        namespace: workloads,
        body: workloadPod("trainer", [
          { name: "main", devices: 2 },
          { name: "logger", devices: 0 },
        ]),
      });
      await core.createNamespacedPod({
        namespace: workloads,
        body: workloadPod("render", [{ name: "app", devices: 1 }]),
      });
      await waitFor("both pods admitted on the node", (observe) => {
        observe([...admitted.keys()]);
        return admitted.has(`${workloads}/trainer`) && admitted.has(`${workloads}/render`);
      });
    } finally {
      sim.off("podAdmitted", onAdmitted);
    }
    // What the simulated kubelet gave each container is the truth the labels must tell.
    const held = { ...free };
    const holders = new Map<string, string>();
    for (const pod of admitted.values()) {
      expect(pod.node).toBe(node);
      for (const container of pod.containers) {
        for (const id of container.devices[RESOURCE] ?? []) {
          held[id] = `${pod.pod}/${container.name}=1`;
          holders.set(id, pod.pod.split("/")[1]!);
        }
      }
    }
    expect(holders.size).toBe(3);
    const scraped = await metricsShow(
      "dpo_plugin_device_allocated",
      "the three held devices with their pods",
      held,
    );
    // The health series carry the same holders; no other pod (the plugin pods, the logger) shows up.
    expect(
      Object.fromEntries(
        Object.entries(deviceTable(scraped, "dpo_plugin_device_healthy")).map(([id, v]) => [
          id,
          v.replace(/=\d$/, ""),
        ]),
      ),
    ).toEqual(Object.fromEntries(Object.entries(held).map(([id, v]) => [id, v.replace(/=\d$/, "")])));

    const report = await nodeReport("allocated 3", (r) => r.status?.allocated === 3);
    expect(report.status?.advertised).toBe(perNode);
    const status = await configStatus("allocated 3", (s) => s.devices?.allocated === 3);
    expect(status.devices).toMatchObject({ capacity: perNode * nodes.length, allocated: 3 });
    // `kubectl get dpc -o wide` and the same in v1alpha1, which carries the count too.
    for (const resource of ["devicepluginconfigs.v1beta1.dpo.dev", "devicepluginconfigs.v1alpha1.dpo.dev"]) {
      const table = (await kubectl(["get", resource, NAME, "-o", "wide"])).stdout;
      expect(kubectlTable(table)[0]?.ALLOCATED, `${resource}:\n${table}`).toBe("3");
    }
    const alpha = await kubectl([
      "get",
      "devicepluginconfigs.v1alpha1.dpo.dev",
      NAME,
      "-o",
      "jsonpath={.apiVersion} {.status.devices.allocated}",
    ]);
    expect(alpha.stdout).toBe("dpo.dev/v1alpha1 3");
    const dnstate = (await kubectl(["get", "dnstate", "-n", NAMESPACE, report.metadata.name])).stdout;
    expect(kubectlTable(dnstate)[0]?.ALLOCATED, dnstate).toBe("3");

    // The renderer's device turns unhealthy: its health series names the renderer.
    const [renderDevice] = [...holders].find(([, pod]) => pod === "render")!;
    const physical = renderDevice.split("::")[0]!;
    writeHealth({ [physical]: { health: "Unhealthy", reason: "Overheated" } });
    await waitFor("the unhealthy device to name the renderer", async (observe) => {
      const unhealthy = samplesOf(await pluginMetrics(), "dpo_plugin_device_healthy").filter(
        (s) => s.value === 0,
      );
      observe(unhealthy.map((s) => s.labels));
      return unhealthy.some(
        (s) =>
          s.labels.device === renderDevice &&
          s.labels.namespace === workloads &&
          s.labels.pod === "render" &&
          s.labels.container === "app",
      );
    });
    writeHealth({});

    // What Prometheus' own linter says of both components' real /metrics, with these series in them.
    const binary = await buildPromlint();
    const operatorText = await (await fetch(`http://127.0.0.1:${operator.metricsPort}/metrics`)).text();
    for (const [source, text] of [
      ["plugin", await pluginMetrics()],
      ["operator", operatorText],
    ] as const) {
      const lint = await promlint(binary, source, text);
      expect(lint.error, source).toBeUndefined();
      expect(lint.families, source).toBeGreaterThan(20);
      expect(
        lint.problems.filter((p) => p.metric.startsWith("dpo_")),
        source,
      ).toEqual([]);
      expect(lint.problems, source).toEqual(expect.arrayContaining([...PROM_CLIENT_DEFAULT_PROBLEMS]));
      expect(lint.problems, source).toHaveLength(PROM_CLIENT_DEFAULT_PROBLEMS.length);
    }
    expect(samplesOf(operatorText, "dpo_operator_reconciles_total").length).toBeGreaterThan(0);

    // The pods go: their devices are free again, their labels gone, the counts back to 0.
    await core.deleteNamespacedPod({ name: "trainer", namespace: workloads, gracePeriodSeconds: 0 });
    await core.deleteNamespacedPod({ name: "render", namespace: workloads, gracePeriodSeconds: 0 });
    const after = await metricsShow("dpo_plugin_device_allocated", "every device free again", free);
    for (const metric of ["dpo_plugin_device_allocated", "dpo_plugin_device_healthy"]) {
      expect(samplesOf(after, metric, { namespace: workloads }), metric).toEqual([]);
      expect(samplesOf(after, metric), metric).toHaveLength(perNode);
    }
    await nodeReport("allocated 0", (r) => r.status?.allocated === 0);
    await configStatus("allocated 0", (s) => s.devices?.allocated === 0);
  });
});
