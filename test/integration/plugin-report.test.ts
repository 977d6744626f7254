// The plugin's node report on a real API server, written with nothing but the plugin's own Role: create, health changes, coalescing, shutdown, garbage collection, and an API that is away.
import {
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type V1ManagedFieldsEntry,
} from "@kubernetes/client-node";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import type { DeviceNodeStateStatus } from "../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { deviceNodeStateName } from "../../src/contract/node-state.js";
import { PLUGIN_CONFIG_KEY } from "../../src/contract/plugin-config.js";
import { metricValue } from "../../src/observability/metrics.js";
import { pluginConfigHash, renderPluginConfigData } from "../../src/operator/render/configmap.js";
import { loadKubeconfig } from "../../src/plugin-runtime/report/api-client.js";
import { createNodeReporter, type NodeReporter } from "../../src/plugin-runtime/report/index.js";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  kubeConfigWithToken,
  kubectl,
  uniqueName,
  waitFor,
  installCrds,
} from "../cluster/helpers.js";

const GROUP = "dpo.dev";
const VERSION = "v1beta1";
const FIELD_MANAGER = "dpo-plugin-report-test";
const PLUGIN_ACCOUNT = "dpo-plugin";
const RESOURCE = "report.example/foo";

const kubeconfig = kubeConfigFromInjected();
const core = kubeconfig.makeApiClient(CoreV1Api);
const rbac = kubeconfig.makeApiClient(RbacAuthorizationV1Api);
const customObjects = kubeconfig.makeApiClient(CustomObjectsApi);
const namespace = uniqueName("it-report");
const nodeName = injectedCluster().nodeNames[0] ?? "node-a";
const work = mkdtempSync(join(tmpdir(), "dpo-report-"));
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

interface DeviceNodeStateObject {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    ownerReferences?: Record<string, unknown>[];
    managedFields?: V1ManagedFieldsEntry[];
  };
  spec: Record<string, unknown>;
  status?: DeviceNodeStateStatus;
}

/** The DeviceNodeState, or undefined while it does not exist. */
async function readReport(name: string): Promise<DeviceNodeStateObject | undefined> {
  try {
    return (await customObjects.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: "devicenodestates",
      name,
    })) as DeviceNodeStateObject;
  } catch (error) {
    if (apiStatusCode(error) === 404) return undefined;
    throw error;
  }
}

function summary(status: DeviceNodeStateStatus | undefined): string {
  if (!status) return "no status";
  return `${status.registration.state} ${status.healthy}/${status.advertised} ${status.devices
    .map((d) => `${d.id}=${d.health}${d.reason ? `(${d.reason})` : ""}`)
    .join(" ")}`;
}

/** Replaces the health file at once, the way an operator of a real node would flip a device. */
function writeHealth(path: string, health: Record<string, unknown>): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, JSON.stringify(health));
  renameSync(tmp, path);
}

/** The plugin's pod on `nodeName`, which its tokens are bound to (set in beforeAll). */
let pluginPod: { name: string; uid: string } | undefined;

/**
 * A kubeconfig for the plugin's ServiceAccount, with a token bound to its pod as the kubelet would mint it:
 * such a token names the pod's node, which config/policy requires of plugin writes once it is installed.
 */
async function pluginKubeconfig(): Promise<string> {
  if (!pluginPod) throw new Error("the plugin pod was not created");
  const response = await core.createNamespacedServiceAccountToken({
    name: PLUGIN_ACCOUNT,
    namespace,
    body: {
      spec: {
        audiences: [],
        expirationSeconds: 3600,
        boundObjectRef: { apiVersion: "v1", kind: "Pod", ...pluginPod },
      },
    },
  });
  const path = join(work, "plugin.kubeconfig");
  writeFileSync(path, kubeConfigWithToken(response.status?.token ?? "").exportConfig(), { mode: 0o600 });
  return path;
}

async function createConfig(healthFile: string): Promise<DevicePluginConfig> {
  const name = uniqueName("report");
  await kubectl(["apply", "--server-side", `--field-manager=${FIELD_MANAGER}`, "-f", "-"], {
    input: JSON.stringify({
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "DevicePluginConfig",
      metadata: { name },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2, healthFile } },
        sharing: { strategy: "TimeSlicing", replicas: 2 },
      },
    }),
  });
  const { stdout } = await kubectl(["get", "devicepluginconfigs.dpo.dev", name, "-o", "json"]);
  const result = validateDevicePluginConfig(JSON.parse(stdout));
  if (!result.ok)
    throw new Error(`the API server returned a config dpo cannot read: ${JSON.stringify(result.errors)}`);
  expect(result.value.metadata.uid).toBeTruthy();
  return result.value;
}

interface Plugin {
  kubelet: SimulatedDeviceManager;
  runtime: PluginRuntime;
  reporter: NodeReporter;
  stop(): Promise<void>;
}

/** An in-process plugin on a simulated kubelet, reporting with the given kubeconfig. */
async function startPlugin(config: DevicePluginConfig, kubeconfigPath: string, dir: string): Promise<Plugin> {
  const devicePluginDir = join(dir, "dp");
  const kubelet = new SimulatedDeviceManager({ dir: devicePluginDir, gracePeriodMs: 60_000 });
  await kubelet.start();
  const runtime = new PluginRuntime({
    config,
    devicePluginDir,
    pluginsRegistryDir: join(dir, "reg"),
    registration: "kubelet",
    nodeName,
    logger,
    pollIntervalMs: 200,
    retryBaseMs: 20,
    retryMaxMs: 200,
  });
  const reporter = createNodeReporter({
    credentials: await loadKubeconfig(kubeconfigPath),
    namespace,
    config,
    configText: renderPluginConfigData(config)[PLUGIN_CONFIG_KEY] ?? "",
    nodeName,
    runtime,
    logger,
  });
  await runtime.start();
  reporter.start();
  let stopped = false;
  return {
    kubelet,
    runtime,
    reporter,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await Promise.all([
        runtime.stop(),
        reporter.stop({ budgetMs: 1_000, reason: "the plugin stopped (test)" }),
      ]);
      await kubelet.stop();
    },
  };
}

beforeAll(async () => {
  await installCrds(FIELD_MANAGER);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await waitFor("DeviceNodeState endpoint serving", async (observe) => {
    const result = await kubectl(["get", "devicenodestates.dpo.dev", "-n", namespace], {
      allowFailure: true,
    });
    observe(result.stderr.trim());
    return result.exitCode === 0;
  });
  // Exactly what the plugin needs, nothing else: server-side apply is a patch, and a patch that creates
  // the object is also authorized as create; the status subresource is only ever patched.
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: PLUGIN_ACCOUNT } } });
  await rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name: PLUGIN_ACCOUNT },
      rules: [
        { apiGroups: [GROUP], resources: ["devicenodestates"], verbs: ["create", "patch"] },
        { apiGroups: [GROUP], resources: ["devicenodestates/status"], verbs: ["patch"] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: PLUGIN_ACCOUNT },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: PLUGIN_ACCOUNT },
      subjects: [{ kind: "ServiceAccount", name: PLUGIN_ACCOUNT, namespace }],
    },
  });
  // Bound to the node directly, as the scheduler would; it goes with the namespace.
  const pod = await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name: "plugin" },
      spec: {
        nodeName,
        serviceAccountName: PLUGIN_ACCOUNT,
        containers: [{ name: "plugin", image: "dpo:report-test" }],
      },
    },
  });
  pluginPod = { name: pod.metadata?.name ?? "", uid: pod.metadata?.uid ?? "" };
});

afterAll(async () => {
  await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
});

describe("the plugin's DeviceNodeState on a real API server, with only the plugin's Role", () => {
  let healthFile: string;
  let config: DevicePluginConfig;
  let plugin: Plugin;
  let name: string;
  let run = 0;

  // A config, a health file and a plugin of its own for every test: none sees the health changes, the
  // report writes or the deletion of another, so each can run alone (-t) or in any order.
  beforeEach(async () => {
    run += 1;
    healthFile = join(work, `health-${run}.json`);
    writeHealth(healthFile, {});
    config = await createConfig(healthFile);
    plugin = await startPlugin(config, await pluginKubeconfig(), join(work, `main-${run}`));
    name = plugin.reporter.writer.name;
  });

  afterEach(async () => {
    await plugin?.stop();
    if (config) {
      await kubectl([
        "delete",
        "devicepluginconfigs.dpo.dev",
        config.metadata.name,
        "--ignore-not-found",
        "--wait=false",
      ]);
    }
  });

  it("creates the report, owned by the config, listing every device healthy and the plugin registered", async () => {
    const report = await waitFor("the first report", async (observe) => {
      const seen = await readReport(name);
      observe(summary(seen?.status));
      return seen?.status?.registration.state === "Registered" ? seen : undefined;
    });
    // Readable as `<config>-<node>` (cut to fit) and made unique by a hash of the pair.
    expect(name).toBe(deviceNodeStateName(config.metadata.name, nodeName));
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(/-[0-9a-f]{10}$/);
    expect(`${config.metadata.name}-${nodeName}`.startsWith(name.slice(0, -11))).toBe(true);
    expect(report.metadata.labels).toMatchObject({
      "dpo.dev/config": config.metadata.name,
      "dpo.dev/node": nodeName,
    });
    expect(report.metadata.ownerReferences).toEqual([
      {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        name: config.metadata.name,
        uid: config.metadata.uid,
        controller: true,
        blockOwnerDeletion: false,
      },
    ]);
    expect(report.spec).toEqual({ configName: config.metadata.name, nodeName, resourceName: RESOURCE });
    const status = report.status!;
    expect(status).toMatchObject({
      kubeletAPIVersion: "v1beta1",
      advertised: 8,
      healthy: 8,
      configHash: pluginConfigHash(config),
    });
    expect(status.pluginVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(status.registration.socket).toBe(plugin.runtime.status().socketPath);
    expect(status.devices.map((d) => [d.id, d.health, d.numaNode, d.replicas])).toEqual([
      ["foo-0", "Healthy", 0, 2],
      ["foo-1", "Healthy", 1, 2],
      ["foo-2", "Healthy", 0, 2],
      ["foo-3", "Healthy", 1, 2],
    ]);
    // One field manager, the object from the main resource and the status from its subresource.
    const managers = (report.metadata.managedFields ?? []).map((f) => [
      f.manager,
      f.operation,
      f.subresource ?? "",
    ]);
    expect(managers).toEqual(
      expect.arrayContaining([
        ["dpo-plugin", "Apply", ""],
        ["dpo-plugin", "Apply", "status"],
      ]),
    );
    expect(managers).toHaveLength(2);
  });

  it("shows a device made unhealthy, with its reason and since", async () => {
    const first = await waitFor("the first report", async (observe) => {
      const seen = (await readReport(name))?.status;
      observe(summary(seen));
      return seen?.registration.state === "Registered" ? seen : undefined;
    });
    const foo0Since = first.devices.find((d) => d.id === "foo-0")?.since;
    expect(foo0Since).toBeDefined();
    const before = Date.now();
    writeHealth(healthFile, { "foo-1": { health: "Unhealthy", reason: "Overheated" } });
    const status = await waitFor("foo-1 Unhealthy in the report", async (observe) => {
      const seen = (await readReport(name))?.status;
      observe(summary(seen));
      return seen?.devices.find((d) => d.id === "foo-1")?.health === "Unhealthy" ? seen : undefined;
    });
    const device = status.devices.find((d) => d.id === "foo-1")!;
    expect(device.reason).toBe("Overheated");
    expect(Date.parse(device.since)).toBeGreaterThanOrEqual(before - 1_000);
    // Only the changed device gets a new since.
    expect(status.devices.find((d) => d.id === "foo-0")?.since).toBe(foo0Since);
    expect(status).toMatchObject({ advertised: 8, healthy: 6 });
  });

  it("folds a burst of 20 health flips into a few writes that end in the right state", async () => {
    const metrics = plugin.runtime.metrics.reportWrites;
    const writesBefore = await metricValue(metrics, { result: "ok" });
    let deviceChanges = 0;
    const count = (): void => void deviceChanges++;
    plugin.runtime.on("devices", count);
    const started = Date.now();
    for (let i = 0; i < 20; i++) {
      const health = i % 2 === 0 ? "Unhealthy" : "Healthy";
      writeHealth(healthFile, {
        "foo-1": { health: "Unhealthy", reason: "Overheated" },
        "foo-2": { health, reason: `flip-${i}` },
      });
      // Far apart enough for the backend to see most flips, far too close for a write each.
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const status = await waitFor("the last flip in the report", async (observe) => {
      const seen = (await readReport(name))?.status;
      observe(summary(seen));
      const device = seen?.devices.find((d) => d.id === "foo-2");
      return device?.health === "Healthy" && device.reason === "flip-19" ? seen : undefined;
    });
    plugin.runtime.off("devices", count);
    const burstMs = Date.now() - started;
    const writes = (await metricValue(metrics, { result: "ok" })) - writesBefore;
    const seen = `${writes} writes for ${deviceChanges} device changes in ${burstMs} ms`;
    expect(deviceChanges, seen).toBeGreaterThanOrEqual(10);
    // At most one write per 200 ms, plus the one due when the burst began.
    expect(writes, seen).toBeLessThanOrEqual(Math.ceil(burstMs / 200) + 1);
    expect(writes, seen).toBeLessThan(deviceChanges / 2);
    expect(status).toMatchObject({ advertised: 8, healthy: 6 });
    expect(status.devices.find((d) => d.id === "foo-1")).toMatchObject({
      health: "Unhealthy",
      reason: "Overheated",
    });
  });

  it("says NotRegistered when the plugin stops, and goes away with its config", async () => {
    await plugin.stop();
    const stopped = (await readReport(name))?.status;
    expect(stopped?.registration).toMatchObject({
      state: "NotRegistered",
      lastError: "the plugin stopped (test)",
    });

    await kubectl(["delete", "devicepluginconfigs.dpo.dev", config.metadata.name, "--wait=false"]);
    await waitFor(
      "the DeviceNodeState garbage-collected",
      async (observe) => {
        const seen = await readReport(name);
        observe(seen ? `still there: ${summary(seen.status)}` : "gone");
        return seen === undefined;
      },
      { timeoutMs: 60_000 },
    );
  });
});

describe("with the API server away", () => {
  it("registers and serves while the report is retried, without crashing", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);

    // A port that was just free: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const path = join(work, "closed-port.kubeconfig");
    writeFileSync(
      path,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        "current-context": "away",
        clusters: [{ name: "away", cluster: { server: `https://127.0.0.1:${port}` } }],
        users: [{ name: "away", user: { token: "not-a-token" } }],
        contexts: [{ name: "away", context: { cluster: "away", user: "away" } }],
      }),
    );

    const config = validateDevicePluginConfig({
      apiVersion: `${GROUP}/${VERSION}`,
      kind: "DevicePluginConfig",
      metadata: { name: "away", uid: "00000000-0000-0000-0000-000000000001" },
      spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 2, idPrefix: "bar" } } },
    });
    if (!config.ok) throw new Error(JSON.stringify(config.errors));
    const plugin = await startPlugin(config.value, path, join(work, "away"));
    try {
      await waitFor("registered with the kubelet and its devices listed", (observe) => {
        const capacity = plugin.kubelet.capacity(RESOURCE);
        observe({ registered: plugin.runtime.status().registered, capacity });
        return plugin.runtime.status().registered && capacity?.allocatable === 2;
      });
      await waitFor("the report retried", async (observe) => {
        const errors = await metricValue(plugin.runtime.metrics.reportWrites, { result: "error" });
        observe(`${errors} failed writes`);
        return errors >= 2;
      });
      expect(await metricValue(plugin.runtime.metrics.reportWrites, { result: "ok" })).toBe(0);
      const { response } = await plugin.kubelet.allocate(RESOURCE, 1);
      expect(response.containerResponses).toHaveLength(1);
      const started = Date.now();
      await plugin.stop();
      expect(Date.now() - started).toBeLessThan(2_500);
      expect(unhandled).toEqual([]);
    } finally {
      await plugin.stop();
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
