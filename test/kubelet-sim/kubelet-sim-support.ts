// The kubelet-sim test's world: a namespace the plugin pods may run privileged in, a Mock config rendered as
// the operator would and applied, the simulated kubelets running its pods' `dpo plugin` processes (useKubeletSim),
// and what the tests read of it: advertised capacity, plugin processes, workload pods and their admission.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1Pod,
  type V1PodSpec,
} from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, beforeEach, expect } from "vitest";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import { API_VERSION, GROUP, KIND, PLURAL, VERSION } from "../../src/api/v1beta1/config.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import { LABEL_CONFIG, configLabelValue } from "../../src/contract/names.js";
import { ServerSideApplier, type ApplyObject } from "../../src/kube/apply.js";
import {
  renderPluginConfigMap,
  renderPluginDaemonSet,
  type RenderContext,
} from "../../src/operator/render/index.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  uniqueName,
  waitFor,
  installCrds,
} from "../cluster/helpers.js";
import { KubeletSimulator, type PluginProcessInfo } from "../../tools/kubelet-sim/node-simulator.js";

export const repoRoot = join(import.meta.dirname, "..", "..");
export const dpoEntrypoint = join(repoRoot, "dist", "dpo.js");
export const FIELD_MANAGER = "dpo-kubelet-sim-test";
export const DEVICES = 4;
export const ID_PREFIX = "ks";
export const HEALTH_FILE = "/run/dpo/health.json";
/** Short, so the test can watch a resource go away; long enough for the steps that need it kept. */
export const GRACE_PERIOD_MS = 15_000;
export const PLUGIN_SERVICE_ACCOUNT = "dpo-plugin";

export const cluster = injectedCluster();
export const kubeconfig = kubeConfigFromInjected();
export const core = kubeconfig.makeApiClient(CoreV1Api);
export const apps = kubeconfig.makeApiClient(AppsV1Api);
export const rbac = kubeconfig.makeApiClient(RbacAuthorizationV1Api);
export const customObjects = kubeconfig.makeApiClient(CustomObjectsApi);
export const applier = new ServerSideApplier(kubeconfig, { fieldManager: FIELD_MANAGER });

export const namespace = uniqueName("ks-dpo-system");
export const configName = uniqueName("ks-mock");
export const resource = `kubelet-sim.example/${uniqueName("mock")}`;
export const slot = `${namespace}/${configLabelValue(configName)}`;

/** Whether a plugin process belongs to a config's slot: the simulator's slots add the plugin revision. */
export function ofSlot(p: { slot: string }, configSlot: string): boolean {
  return p.slot === configSlot || p.slot.startsWith(`${configSlot}/`);
}
export const renderContext: RenderContext = {
  namespace,
  operatorImage: "dpo:kubelet-sim",
  pluginServiceAccount: PLUGIN_SERVICE_ACCOUNT,
  registrationMode: "kubelet",
};
export const nodes = cluster.nodeNames;

export let sim: KubeletSimulator | undefined;
/** Every DevicePluginConfig this file creates, deleted at the end so a reused cluster stays clean. */
export const createdConfigs = [configName];
export let config: DevicePluginConfig;

/** For a test that changed the config: the one the next tests render. */
export function setConfig(next: DevicePluginConfig): void {
  config = next;
}

export function simulator(): KubeletSimulator {
  if (sim === undefined) throw new Error("the kubelet simulator did not start");
  return sim;
}

export function node(index: number): string {
  const name = nodes[index];
  if (name === undefined) throw new Error(`the cluster has no node ${index} (nodes: ${nodes.join(", ")})`);
  return name;
}

/** What the Node object advertises for the test's resource (undefined when absent). */
export async function advertised(nodeName: string): Promise<{ capacity?: string; allocatable?: string }> {
  const status = (await core.readNode({ name: nodeName })).status;
  return { capacity: status?.capacity?.[resource], allocatable: status?.allocatable?.[resource] };
}

export async function waitForAdvertised(
  nodeName: string,
  expected: { capacity?: string; allocatable?: string },
  timeoutMs = 30_000,
): Promise<void> {
  let lastRead: unknown = "not read yet";
  await waitFor(
    `${nodeName} to advertise ${resource} as ${JSON.stringify(expected)}`,
    async (observe) => {
      // Observed before the read too, so a read cut off by the deadline still leaves a picture.
      observe({ node: lastRead, simulator: simulator().capacity(nodeName, resource) });
      const seen = await advertised(nodeName);
      lastRead = seen;
      observe({ node: seen, simulator: simulator().capacity(nodeName, resource) });
      return seen.capacity === expected.capacity && seen.allocatable === expected.allocatable;
    },
    { timeoutMs },
  );
}

export async function writeHealthFile(nodeName: string, content: Record<string, unknown>): Promise<void> {
  const path = simulator().hostPath(nodeName, HEALTH_FILE);
  await mkdir(dirname(path), { recursive: true });
  // Replaced by rename, as a careful writer would, so the plugin never reads half a file.
  await writeFile(`${path}.tmp`, JSON.stringify(content));
  await rename(`${path}.tmp`, path);
}

export function runningPlugins(): PluginProcessInfo[] {
  return simulator()
    .plugins()
    .filter((p) => ofSlot(p, slot) && p.running);
}

/** Waits for one running plugin per node, each for the pod the DaemonSet has there now. */
export async function waitForPluginsOfCurrentPods(
  timeoutMs = 60_000,
): Promise<Map<string, PluginProcessInfo>> {
  return waitFor(
    `a running plugin for the DaemonSet pod on each of ${nodes.join(", ")}`,
    async (observe) => {
      const pods = await core.listNamespacedPod({
        namespace,
        labelSelector: `${LABEL_CONFIG}=${configLabelValue(configName)}`,
      });
      const podUids = new Map(
        pods.items
          .filter((p: V1Pod) => p.status?.phase === "Running" && p.metadata?.deletionTimestamp == null)
          .map((p) => [p.spec?.nodeName ?? "", p.metadata?.uid ?? ""]),
      );
      const plugins = runningPlugins();
      observe({ pods: Object.fromEntries(podUids), plugins });
      const byNode = new Map(plugins.map((p) => [p.node, p]));
      const complete = nodes.every((n) => podUids.has(n) && byNode.get(n)?.podUid === podUids.get(n));
      return complete && byNode.size === nodes.length && byNode;
    },
    { timeoutMs },
  );
}

/**
 * Brings the main config's plugins to the starting point of every test: its DaemonSet applied (a test
 * deletes it), one running plugin per node for the current pod (a test kills one), every device healthy,
 * and each node registered and advertising all devices. So no test depends on what an earlier one did or
 * left, and each can run alone with -t.
 */
export async function ensurePluginsServing(): Promise<void> {
  // Every per-node assertion below would pass on no node at all.
  if (nodes.length === 0) throw new Error("the cluster has no nodes");
  await applyRendered(config);
  for (const n of nodes) await writeHealthFile(n, {});
  const pods = await core.listNamespacedPod({
    namespace,
    labelSelector: `${LABEL_CONFIG}=${configLabelValue(configName)}`,
  });
  const current = new Set(
    pods.items.filter((p) => p.metadata?.deletionTimestamp == null).map((p) => p.metadata?.uid),
  );
  // The simulator has no restart policy: a plugin killed for a pod that is still current stays down.
  for (const p of simulator().plugins())
    if (ofSlot(p, slot) && !p.running && current.has(p.podUid)) simulator().restartPlugin(p.node, p.slot);
  await waitForPluginsOfCurrentPods();
  for (const n of nodes) {
    const dm = simulator().deviceManager(n);
    await waitFor(`the plugin on ${n} to be registered for ${resource}`, (observe) => {
      observe(dm.registrations.map((r) => r.endpoint));
      return dm.resources.get(resource)?.connected;
    });
    await waitForAdvertised(n, { capacity: String(DEVICES), allocatable: String(DEVICES) });
  }
}

/** A pod of one container asking for `count` devices of the test's resource; `placement` adds to its spec. */
export function workloadPod(name: string, count: number, placement: Partial<V1PodSpec> = {}): V1Pod {
  return {
    metadata: { name },
    spec: {
      ...placement,
      containers: [
        {
          name: "work",
          image: "registry.example/workload:1",
          resources: { limits: { [resource]: String(count) } },
        },
      ],
    },
  };
}

/** The plugin pod of the main config on `nodeName` that is not being deleted. */
export async function podOn(nodeName: string): Promise<V1Pod> {
  const pods = await core.listNamespacedPod({
    namespace,
    labelSelector: `${LABEL_CONFIG}=${configLabelValue(configName)}`,
  });
  const pod = pods.items.find((p) => p.spec?.nodeName === nodeName && p.metadata?.deletionTimestamp == null);
  if (pod === undefined) throw new Error(`no plugin pod on ${nodeName}`);
  return pod;
}

/** Waits for the kubelet's rejection of `pod`: phase Failed, the reason and message, and a Warning Event. */
export async function expectRejected(pod: V1Pod, message: string): Promise<void> {
  const name = pod.metadata!.name!;
  const status = await waitFor(`${name} to be rejected at admission`, async (observe) => {
    const current = await core.readNamespacedPod({ name, namespace });
    observe(current.status);
    return current.status?.phase === "Failed" && current.status;
  });
  expect({ reason: status.reason, message: status.message }).toEqual({
    reason: "UnexpectedAdmissionError",
    message,
  });
  // Events are recorded asynchronously, as the kubelet's recorder does: waited for, not read at once.
  await waitFor(`a Warning Event from the kubelet for ${name}`, async (observe) => {
    const events = await core.listNamespacedEvent({
      namespace,
      fieldSelector: `involvedObject.uid=${pod.metadata!.uid}`,
    });
    const seen = events.items.map((e) => [e.type, e.reason, e.source?.component]);
    observe(seen);
    return seen.some(
      ([type, reason, component]) =>
        type === "Warning" && reason === "UnexpectedAdmissionError" && component === "kubelet",
    );
  });
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}

/** Rendered objects always carry apiVersion, kind and name; the client-node types leave them optional. */
export function applyable(obj: KubernetesObject): ApplyObject {
  const { apiVersion, kind, metadata } = obj;
  if (!apiVersion || !kind || !metadata?.name) throw new Error(`not applyable: ${JSON.stringify(obj)}`);
  return { ...obj, apiVersion, kind, metadata: { ...metadata, name: metadata.name } };
}

/** The DaemonSet last applied for each config (one per plugin revision, named after it). */
export const appliedDaemonSets = new Map<string, string>();

/**
 * What the operator would do for the config when no upgrade is under way, without the operator: render
 * the current revision, then server-side apply. Returns the DaemonSet's name.
 */
export async function applyRendered(current: DevicePluginConfig, context = renderContext): Promise<string> {
  const daemonSet = renderPluginDaemonSet(current, context);
  const revision = daemonSet.metadata!.labels![LABEL_REVISION]!;
  await applier.apply(applyable(renderPluginConfigMap(current, context, revision)));
  await applier.apply(applyable(daemonSet));
  appliedDaemonSets.set(current.metadata.name, daemonSet.metadata!.name!);
  return daemonSet.metadata!.name!;
}

export function daemonSetOf(configName: string): string {
  const name = appliedDaemonSets.get(configName);
  if (name === undefined) throw new Error(`no DaemonSet applied for ${configName}`);
  return name;
}

/** Creates a DevicePluginConfig through the API, so it has the uid rendering needs, and reads it back. */
export async function createConfig(name: string, spec: Record<string, unknown>): Promise<DevicePluginConfig> {
  const body = { apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec };
  // The CRD may be new to this API server: creation works once its endpoint serves.
  await waitFor(`the DevicePluginConfig ${name} to be created`, () =>
    customObjects.createClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL, body }),
  );
  return readConfig(name);
}

export async function readConfig(name = configName): Promise<DevicePluginConfig> {
  const object = await customObjects.getClusterCustomObject({
    group: GROUP,
    version: VERSION,
    plural: PLURAL,
    name,
  });
  const validated = validateDevicePluginConfig(object);
  if (!validated.ok)
    throw new Error(`the API server returned an invalid config: ${JSON.stringify(validated.errors)}`);
  return validated.value;
}

/** Sets the world up before the file's tests, a plugin serving on every node before each, and tears it down after. */
export function useKubeletSim(): void {
  beforeAll(async () => {
    if (!existsSync(dpoEntrypoint)) {
      throw new Error(`${dpoEntrypoint} is missing: run 'make build' before the kubelet-sim tests`);
    }
    await installCrds(FIELD_MANAGER);
    // Plugin pods use hostPath volumes: only the privileged Pod Security level admits them.
    await core.createNamespace({
      body: {
        metadata: {
          name: namespace,
          labels: {
            "pod-security.kubernetes.io/enforce": "privileged",
            "pod-security.kubernetes.io/warn": "privileged",
          },
        },
      },
    });
    await core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: PLUGIN_SERVICE_ACCOUNT } },
    });
    // Only what a plugin needs to report its node: its DeviceNodeStates in the operator's namespace.
    await rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: PLUGIN_SERVICE_ACCOUNT },
        rules: [
          {
            apiGroups: [GROUP],
            resources: ["devicenodestates"],
            verbs: ["get", "list", "create", "patch", "update"],
          },
          { apiGroups: [GROUP], resources: ["devicenodestates/status"], verbs: ["patch", "update"] },
        ],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: PLUGIN_SERVICE_ACCOUNT },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: PLUGIN_SERVICE_ACCOUNT },
        subjects: [{ kind: "ServiceAccount", name: PLUGIN_SERVICE_ACCOUNT, namespace }],
      },
    });

    config = await createConfig(configName, {
      resourceName: resource,
      backend: {
        type: "Mock",
        mock: { devices: DEVICES, idPrefix: ID_PREFIX, numaNodes: 2, healthFile: HEALTH_FILE },
      },
      plugin: { logLevel: "debug" },
    });

    sim = await KubeletSimulator.start({ kubeconfig, nodes, gracePeriodMs: GRACE_PERIOD_MS });
    await applyRendered(config);
  });

  afterAll(async () => {
    await sim?.stop();
    await kubectl(["delete", `${PLURAL}.${GROUP}`, ...createdConfigs, "--ignore-not-found", "--wait=false"]);
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  beforeEach(async ({ onTestFailed }) => {
    onTestFailed(() => {
      if (sim === undefined) return;
      for (const n of nodes) console.error(sim.pluginLogs(n));
    });
    await ensurePluginsServing();
  }, 180_000);
}
