// Time-slicing through DRA end to end: a time-sliced config shares one device the same way on both paths, on the
// world of test/e2e/dra.test.ts (useDraWorld).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { kubeRequest } from "../../src/kube/request.js";
import { apiStatusCode, kubectl, NODE_INDEX_LABEL, waitFor } from "../cluster/helpers.js";
import { type AdmittedPod } from "../../tools/kubelet-sim/node-simulator.js";
import {
  CONFIGS,
  kc,
  custom,
  core,
  sim,
  bigNode,
  namespace,
  slicesOf,
  configStatus,
  mapsExtendedResources,
  ready,
  apply,
  claimSpec,
  pod,
  admitted,
  useDraWorld,
} from "./dra-support.js";

useDraWorld();

/**
 * Time-slicing through DRA (issue 23): whether the control plane keeps ResourceSlice
 * allowMultipleAllocations. DRAConsumableCapacity is beta and on by default from 1.36, alpha and off in
 * 1.35, and tools/cluster sets no feature gates.
 */
function sharesDevices(): boolean {
  return mapsExtendedResources();
}

describe("a time-sliced config shares one device the same way on both paths", () => {
  const SHARED = "e2e-dra-shared";
  const SHARED_RESOURCE = "e2e-dra.example/shared";
  const SHARED_DRIVER = "shared.e2e-dra.example";
  const REPLICAS = 3;
  const claimsApi = (name: string) =>
    `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims/${name}`;

  async function unschedulable(name: string): Promise<void> {
    await waitFor(
      `pod ${name} unschedulable while every share of the device is held`,
      async (observe) => {
        const live = await core.readNamespacedPod({ name, namespace });
        const scheduled = live.status?.conditions?.find((c) => c.type === "PodScheduled");
        observe({ node: live.spec?.nodeName, scheduled });
        return scheduled?.status === "False" && scheduled.reason === "Unschedulable";
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }

  async function deletePods(names: string[]): Promise<void> {
    await kubectl(["delete", "pod", "-n", namespace, ...names, "--wait=true", "--ignore-not-found"]);
  }

  afterAll(async () => {
    await custom.deleteClusterCustomObject({ ...CONFIGS, name: SHARED }).catch((err: unknown) => {
      if (apiStatusCode(err) !== 404) throw err;
    });
  });

  it(`gives ${REPLICAS} pods with a claim each the one device of a node through DRA, and the next pod none; as a device plugin the same`, async () => {
    const shared = sharesDevices();
    await apply([
      {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: SHARED },
        spec: {
          resourceName: SHARED_RESOURCE,
          backend: { type: "Mock", mock: { devices: 1, idPrefix: "shared" } },
          sharing: { strategy: "TimeSlicing", replicas: REPLICAS },
          nodeSelector: { [NODE_INDEX_LABEL]: "0" },
          publish: "DRA",
        },
      },
    ]);
    const status = await configStatus(
      SHARED,
      `Ready through DRA with ${REPLICAS} shares of its device, saying whether they are shared`,
      (s) =>
        ready(s) &&
        s.devices?.summary === `${REPLICAS}/${REPLICAS}` &&
        s.conditions?.find((c) => c.type === "DRASharing")?.status === (shared ? "True" : "False"),
    );
    expect(status.conditions?.find((c) => c.type === "DRASharing")).toMatchObject(
      shared ? { reason: "SharedAllocations" } : { reason: "SharedAllocationsUnsupported" },
    );
    const [slice] = await slicesOf(SHARED);
    expect(slice?.metadata.labels?.["dpo.dev/shared-allocations"]).toBe("true");
    expect(slice?.spec.devices).toEqual([
      expect.objectContaining(
        shared
          ? {
              name: "shared-0",
              allowMultipleAllocations: true,
              capacity: expect.objectContaining({
                "dpo.dev/replicas": {
                  value: String(REPLICAS),
                  requestPolicy: { default: "1", validValues: ["1"] },
                },
              }),
            }
          : { name: "shared-0" },
      ),
    ]);

    // DRA: one claim per pod from the config's DeviceClass (named after the driver).
    const holders = shared ? REPLICAS : 1;
    const pods = Array.from({ length: holders + 1 }, (_, i) => `sharer-${i}`);
    await apply([
      {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceClaimTemplate",
        metadata: { name: "shared-one", namespace },
        spec: { spec: claimSpec(SHARED_DRIVER) },
      },
    ]);
    // One pod at a time, each once the one before it runs: kube-scheduler (1.37) counts a claim's consumed
    // capacity twice from when it sees the allocation stored until that pod's binding step ends (once as
    // allocated, once as in flight), so a pod scheduled in between can find the shared device full. No
    // queueing hint requeues it when another claim gets allocated, so it waits for the scheduler's 5-minute
    // flush of unschedulable pods (docs/dra.md). What is asserted is the sharing: N holders, pod N+1 none.
    const admittedPods: AdmittedPod[] = [];
    for (const name of pods.slice(0, holders)) {
      await apply([pod(name, { template: "shared-one" })]);
      admittedPods.push(await admitted(name));
    }
    const allocations: { device?: string; shareID?: string }[] = [];
    for (const p of admittedPods) {
      expect(p.node).toBe(bigNode);
      const live = await core.readNamespacedPod({ name: p.pod.split("/")[1]!, namespace });
      const claimName = live.status?.resourceClaimStatuses?.[0]?.resourceClaimName ?? "";
      const claim = await kubeRequest<{
        status?: { allocation?: { devices?: { results?: { device: string; shareID?: string }[] } } };
      }>(kc, { method: "GET", path: claimsApi(claimName) });
      allocations.push(...(claim.status?.allocation?.devices?.results ?? []));
    }
    expect(allocations.map((a) => a.device)).toEqual(Array(holders).fill("shared-0"));
    if (shared) expect(new Set(allocations.map((a) => a.shareID)).size).toBe(holders);
    // Each claim has its own CDI device, with the device's own edits (what each replica gets through CDI),
    // and one for its request (the plugin's env, as Allocate gives it).
    const ids = admittedPods.flatMap((p) => Object.values(p.cdiDeviceIds).flat());
    expect(new Set(ids).size).toBe(2 * holders);
    const cdiDir = sim.hostPath(bigNode, "/var/run/cdi");
    for (const file of readdirSync(cdiDir).filter((f) => f.startsWith(`${SHARED_DRIVER}-`))) {
      expect(readFileSync(join(cdiDir, file), "utf8")).toContain("=shared-0");
    }
    await apply([pod(pods[holders]!, { template: "shared-one" })]);
    await unschedulable(pods[holders]!);

    // Unpreparing one claim leaves the others prepared: the pod after them gets the freed share.
    await deletePods([pods[0]!]);
    const late = await admitted(pods[holders]!);
    expect(late.node).toBe(bigNode);
    const specFiles = readdirSync(cdiDir).filter((f) => f.startsWith(`${SHARED_DRIVER}-`));
    expect(specFiles, specFiles.join(", ")).toHaveLength(holders);
    await deletePods(pods);

    // The device plugin path: the same config advertises REPLICAS ids of the one device.
    await custom.patchClusterCustomObject({
      ...CONFIGS,
      name: SHARED,
      body: [{ op: "replace", path: "/spec/publish", value: "DevicePlugin" }],
    });
    await waitFor(
      `${SHARED} as a device plugin: no slices, the Node advertises ${REPLICAS}`,
      async (observe) => {
        const slices = await slicesOf(SHARED);
        const node = await core.readNode({ name: bigNode });
        const allocatable = node.status?.allocatable?.[SHARED_RESOURCE];
        observe({ slices: slices.length, allocatable });
        return slices.length === 0 && allocatable === String(REPLICAS);
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    const dpPods = Array.from({ length: REPLICAS + 1 }, (_, i) => `replica-${i}`);
    const limited = (name: string) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace },
      spec: {
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: "main",
            image: "registry.example/workload:1",
            resources: { limits: { [SHARED_RESOURCE]: "1" } },
          },
        ],
      },
    });
    await apply(dpPods.slice(0, REPLICAS).map(limited));
    const replicaIds = await waitFor(
      `${REPLICAS} pods admitted with a replica id each`,
      (observe) => {
        const found = sim
          .admittedPods(bigNode)
          .filter((p) => dpPods.includes(p.pod.split("/")[1]!) && p.pod.startsWith(`${namespace}/`));
        const ids = found.flatMap((p) => p.containers.flatMap((c) => c.devices[SHARED_RESOURCE] ?? []));
        observe({ pods: found.map((p) => p.pod), ids });
        return found.length === REPLICAS ? ids : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect([...replicaIds].sort()).toEqual(Array.from({ length: REPLICAS }, (_, r) => `shared-0::${r}`));
    await apply([limited(dpPods[REPLICAS]!)]);
    await unschedulable(dpPods[REPLICAS]!);
    await deletePods(dpPods);
  });
});
