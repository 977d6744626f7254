// The DRA end-to-end world (useDraWorld): three simulated nodes with a 1.34, a 1.33 and a 1.32 kubelet, the
// operator, a workload namespace and three DevicePluginConfigs published through DRA; with builders for a config,
// a claim and a pod, and what the tests read: slices, a config's status, an admitted pod.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, expect } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { kubeRequest } from "../../src/kube/request.js";
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
import { KubeletSimulator, type AdmittedPod } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, startOperator, type OperatorProcess } from "./support.js";

export const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
export const DRIVER = "gpu.e2e-dra.example";
/** Two configs of one driver on different nodes: X100s with 80Gi on node 0, Y10s with 16Gi on node 1. */
export const BIG = "e2e-dra-x100";
export const SMALL = "e2e-dra-y10";
/** X100s with only 16Gi on node 2 (a 1.32 kubelet): the model matches a big claim, the memory does not. */
export const LEAN = "e2e-dra-x100-lean";
export const CONFIG_NAMES = [BIG, SMALL, LEAN];
export const BIG_CLASS = "x100.gpu.e2e-dra.example";
export const SMALL_CLASS = "y10.gpu.e2e-dra.example";
export const LEAN_CLASS = "x100-lean.gpu.e2e-dra.example";
export const HEALTH_FILE = "/run/dpo/e2e-dra-health.json";
export const SLICES = "/apis/resource.k8s.io/v1/resourceslices";
export const CLASSES = "/apis/resource.k8s.io/v1/deviceclasses";

export const kc = kubeConfigFromInjected();
export const custom = kc.makeApiClient(CustomObjectsApi);
export const core = kc.makeApiClient(CoreV1Api);

export let operator: OperatorProcess;
export let sim: KubeletSimulator;
export let bigNode: string;
export let smallNode: string;
export let leanNode: string;
export let namespace: string;

export interface Slice {
  metadata: { name: string; uid?: string; labels?: Record<string, string> };
  spec: {
    nodeName: string;
    driver: string;
    pool: { generation: number };
    devices?: {
      name: string;
      attributes?: unknown;
      capacity?: unknown;
      taints?: { key: string; value?: string; effect: string; timeAdded?: string }[];
    }[];
  };
}

export function config(
  name: string,
  resource: string,
  node: string,
  model: string,
  memory: string,
  deviceClass: string,
) {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: resource,
      backend: {
        type: "Mock",
        mock: {
          devices: 2,
          idPrefix: model.toLowerCase(),
          healthFile: HEALTH_FILE,
          attributes: { model, memory },
        },
      },
      nodeSelector: { [NODE_INDEX_LABEL]: node },
      publish: "DRA",
      // One driver on both nodes: each class narrows it to its model, as the spec's extra selectors allow.
      dra: {
        driverName: DRIVER,
        deviceClass: {
          name: deviceClass,
          selectors: [{ cel: { expression: `device.attributes["${DRIVER}"].model == "${model}"` } }],
        },
      },
    },
  };
}

export async function slicesOf(configName: string): Promise<Slice[]> {
  const list = await kubeRequest<{ items: Slice[] }>(kc, {
    method: "GET",
    path: SLICES,
    query: { labelSelector: `dpo.dev/config=${configName}` },
  });
  return list.items;
}

export async function configStatus(
  name: string,
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${name}: ${description}`,
    async (observe) => {
      const c = (await custom.getClusterCustomObject({ ...CONFIGS, name })) as {
        status?: DevicePluginConfigStatus;
      };
      observe({ devices: c.status?.devices, problems: c.status?.problems, conditions: c.status?.conditions });
      return c.status && check(c.status) ? c.status : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/** The control plane's minor version (tools/cluster sets no feature gates, so its defaults hold). */
export function clusterMinor(): number {
  const version = injectedCluster().kubernetesVersion;
  const minor = /^v?1\.(\d+)\./.exec(version)?.[1];
  if (minor === undefined)
    throw new Error(`clusterKubernetesVersion ${JSON.stringify(version)} is no v1.N.P`);
  return Number(minor);
}

/**
 * Whether the control plane keeps DeviceClass spec.extendedResourceName: DRAExtendedResource is on by
 * default from 1.36 (locked on in 1.37) and off in 1.35.
 */
export function mapsExtendedResources(): boolean {
  return clusterMinor() >= 36;
}

/** Whether it keeps ResourceSlice device taints: DRADeviceTaints is beta, on by default, from 1.36. */
export function keepsDeviceTaints(): boolean {
  return clusterMinor() >= 36;
}

export const extendedResourceMapping = (s: DevicePluginConfigStatus) =>
  s.conditions?.find((c) => c.type === "ExtendedResourceMapping");

export const ready = (s: DevicePluginConfigStatus): boolean =>
  s.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;

export async function apply(objects: unknown[]): Promise<void> {
  await kubectl(["apply", "--server-side", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  });
}

export function claimSpec(deviceClass: string, expression?: string) {
  return {
    devices: {
      requests: [
        {
          name: "gpu",
          exactly: {
            deviceClassName: deviceClass,
            ...(expression === undefined ? {} : { selectors: [{ cel: { expression } }] }),
          },
        },
      ],
    },
  };
}

export function pod(name: string, claim: { template?: string; claim?: string }) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: {
      terminationGracePeriodSeconds: 0,
      containers: [
        { name: "main", image: "registry.example/workload:1", resources: { claims: [{ name: "gpu" }] } },
      ],
      resourceClaims: [
        claim.template !== undefined
          ? { name: "gpu", resourceClaimTemplateName: claim.template }
          : { name: "gpu", resourceClaimName: claim.claim },
      ],
    },
  };
}

/** Waits until the simulator has prepared and started the pod; returns what it recorded. */
export async function admitted(name: string): Promise<AdmittedPod> {
  return waitFor(
    `pod ${name} prepared and started by the simulated kubelet`,
    async (observe) => {
      const found = sim.admittedPods().find((p) => p.pod === `${namespace}/${name}`);
      const live = await core.readNamespacedPod({ name, namespace });
      const scheduled = live.status?.conditions?.find((c) => c.type === "PodScheduled");
      observe({
        node: live.spec?.nodeName,
        phase: live.status?.phase,
        claims: live.status?.resourceClaimStatuses,
        scheduled: scheduled && {
          status: scheduled.status,
          reason: scheduled.reason,
          message: scheduled.message,
        },
      });
      return found !== undefined && Object.keys(found.cdiDeviceIds).length > 0 ? found : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );
}

export function writeHealth(node: string, content: Record<string, unknown>): void {
  sim.writeHostFile(node, HEALTH_FILE, JSON.stringify(content));
}

/** Starts the world before the file's tests and takes it down after them. */
export function useDraWorld(): void {
  beforeAll(async () => {
    const nodes = injectedCluster().nodeNames;
    expect(nodes.length).toBeGreaterThanOrEqual(3);
    const byIndex = async (i: number) =>
      (await core.listNode({ labelSelector: `${NODE_INDEX_LABEL}=${i}` })).items[0]?.metadata?.name ?? "";
    bigNode = await byIndex(0);
    smallNode = await byIndex(1);
    leanNode = await byIndex(2);
    await installDpo();
    sim = await KubeletSimulator.start({
      kubeconfig: kc,
      nodes,
      kubeletVersions: { [bigNode]: "v1.34.4", [smallNode]: "v1.33.4", [leanNode]: "v1.32.13" },
    });
    operator = await startOperator(["--status-write-interval", "500"]);
    namespace = uniqueName("e2e-dra");
    await createWorkloadNamespace(core, namespace);
    await apply([
      config(BIG, "e2e-dra.example/x100", "0", "X100", "80Gi", BIG_CLASS),
      config(SMALL, "e2e-dra.example/y10", "1", "Y10", "16Gi", SMALL_CLASS),
      config(LEAN, "e2e-dra.example/x100-lean", "2", "X100", "16Gi", LEAN_CLASS),
    ]);
  }, 180_000);

  afterAll(async () => {
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
    for (const name of CONFIG_NAMES) {
      await custom.deleteClusterCustomObject({ ...CONFIGS, name }).catch((err: unknown) => {
        if (apiStatusCode(err) !== 404) throw err;
      });
    }
    await operator?.stop();
    await sim?.stop();
  }, 120_000);
}
