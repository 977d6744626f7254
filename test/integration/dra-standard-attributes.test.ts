// The standard DRA attributes on a real API server: the DevFS backend over a recorded 2-GPU MI300 tree and
// the PCI backend over a recorded SR-IOV NIC publish resource.kubernetes.io/numaNode and pcieRoot in
// their ResourceSlices as the API server stores them, and the scheduler allocates a claim that asks for
// a GPU on one PCIe root by CEL to the GPU on that root.
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { draDriverName, type DevicePluginConfigSpecInput } from "../../src/api/v1beta1/spec.js";
import { draDeviceName } from "../../src/plugin-runtime/dra/devices.js";
import { DraRuntime } from "../../src/plugin-runtime/dra/dra-runtime.js";
import { resourceSliceName, type ResourceSlice } from "../../src/plugin-runtime/dra/slices.js";
import { ApiClient, loadKubeconfig } from "../../src/plugin-runtime/report/api-client.js";
import { injectedCluster, uniqueName, waitFor } from "../cluster/helpers.js";
import { makeConfig, tempDir } from "../protocol/support.js";
import { layOutFixtureTree, type FixtureTree } from "../unit/support/fixture-tree.js";

const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });
const node = injectedCluster().nodeNames[0] ?? "node-a";
const namespace = "default";
const work = tempDir("dra-std");
const NUMA = "resource.kubernetes.io/numaNode";
const ROOT = "resource.kubernetes.io/pcieRoot";
let api: ApiClient;
const runtimes: DraRuntime[] = [];
const trees: FixtureTree[] = [];
const cleanups: (() => Promise<unknown>)[] = [];

/** A DRA runtime of `spec` on the node; its driver name. */
async function serve(name: string, spec: Partial<DevicePluginConfigSpecInput>): Promise<string> {
  const config = makeConfig({ publish: "DRA", ...spec }, uniqueName(name));
  const runtime = new DraRuntime({
    config,
    nodeName: node,
    logger,
    api,
    draPluginsDir: join(work.dir, name, "plugins"),
    pluginsRegistryDir: join(work.dir, name, "reg"),
    cdiDir: join(work.dir, name, "cdi"),
    sliceRetryBaseMs: 50,
  });
  runtimes.push(runtime);
  await runtime.start();
  const driver = draDriverName(config.spec);
  cleanups.push(() =>
    api.request({
      method: "DELETE",
      path: `/apis/resource.k8s.io/v1/resourceslices/${resourceSliceName(driver, node, 0)}`,
    }),
  );
  return driver;
}

function slice(driver: string): Promise<ResourceSlice> {
  return waitFor(`the slice of ${driver}`, () =>
    api
      .request<ResourceSlice>({
        method: "GET",
        path: `/apis/resource.k8s.io/v1/resourceslices/${resourceSliceName(driver, node, 0)}`,
      })
      .catch(() => undefined),
  );
}

let gpuDriver: string;
let vfDriver: string;

beforeAll(async () => {
  api = new ApiClient(await loadKubeconfig(injectedCluster().kubeconfigPath));
  const gpus = await layOutFixtureTree("amd-instinct-mi300");
  const nic = await layOutFixtureTree("sriov-nic-e810");
  trees.push(gpus, nic);
  gpuDriver = await serve("gpu", {
    resourceName: `${uniqueName("amd")}.example/gpu`,
    backend: {
      type: "DevFS",
      devFS: {
        root: gpus.root,
        sysfsRoot: join(gpus.root, "sys"),
        pciVendor: "1002",
        paths: [{ glob: "/dev/dri/card*" }, { glob: "/dev/dri/renderD*" }],
        groupBy: { key: "PCIAddress" },
        sharedPaths: [{ glob: "/dev/kfd" }],
      },
    },
  });
  vfDriver = await serve("vf", {
    resourceName: `${uniqueName("sriov")}.example/vf`,
    backend: {
      type: "PCI",
      pci: {
        vendor: "8086",
        devices: ["1889"],
        drivers: ["iavf"],
        sysfsRoot: join(nic.root, "sys"),
        devRoot: join(nic.root, "dev"),
      },
    },
  });
});

afterAll(async () => {
  await Promise.all(runtimes.map((r) => r.stop()));
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  api?.close();
  await Promise.all(trees.map((t) => t.remove()));
  work.cleanup();
});

describe("standard DRA attributes on a real API server", () => {
  it("a DevFS GPU group's slice carries its NUMA node and PCIe root, as the API server stores them", async () => {
    const s = await slice(gpuDriver);
    const byName = new Map((s.spec.devices ?? []).map((d) => [d.name, d.attributes ?? {}]));
    expect(byName.get(draDeviceName("0000_02_00.0"))).toMatchObject({
      [NUMA]: { int: 0 },
      [ROOT]: { string: "pci0000:00" },
    });
    expect(byName.get(draDeviceName("0001_02_00.0"))).toMatchObject({
      [NUMA]: { int: 1 },
      [ROOT]: { string: "pci0001:00" },
      paths: { string: "/dev/dri/card8,/dev/dri/renderD136" },
    });
  });

  it("a PCI backend's SR-IOV VFs carry theirs, with the physical function", async () => {
    const s = await slice(vfDriver);
    expect((s.spec.devices ?? []).map((d) => d.attributes?.[ROOT])).toEqual([
      { string: "pci0000:3a" },
      { string: "pci0000:3a" },
      { string: "pci0000:3a" },
    ]);
    expect(s.spec.devices?.[0]?.attributes).toMatchObject({
      [NUMA]: { int: 0 },
      physicalFunction: { string: "0000:3b:00.0" },
    });
  });

  it("the scheduler gives a claim asking for pcieRoot pci0001:00 by CEL the GPU on that root", async () => {
    const className = uniqueName("std-attr");
    const claimName = uniqueName("std-claim");
    const podName = uniqueName("std-pod");
    const claims = `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims`;
    await api.request({
      method: "POST",
      path: "/apis/resource.k8s.io/v1/deviceclasses",
      body: {
        apiVersion: "resource.k8s.io/v1",
        kind: "DeviceClass",
        metadata: { name: className },
        spec: { selectors: [{ cel: { expression: `device.driver == "${gpuDriver}"` } }] },
      },
    });
    cleanups.push(() =>
      api.request({ method: "DELETE", path: `/apis/resource.k8s.io/v1/deviceclasses/${className}` }),
    );
    await api.request({
      method: "POST",
      path: claims,
      body: {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceClaim",
        metadata: { name: claimName, namespace },
        spec: {
          devices: {
            requests: [
              {
                name: "gpu",
                exactly: {
                  deviceClassName: className,
                  selectors: [
                    {
                      cel: {
                        expression: `device.attributes["resource.kubernetes.io"].pcieRoot == "pci0001:00"`,
                      },
                    },
                  ],
                },
              },
            ],
          },
        },
      },
    });
    cleanups.push(() => api.request({ method: "DELETE", path: `${claims}/${claimName}` }));
    await api.request({
      method: "POST",
      path: `/api/v1/namespaces/${namespace}/pods`,
      body: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: podName, namespace },
        spec: {
          terminationGracePeriodSeconds: 0,
          nodeSelector: { "kubernetes.io/hostname": node },
          containers: [
            { name: "main", image: "registry.example/workload:1", resources: { claims: [{ name: "gpu" }] } },
          ],
          resourceClaims: [{ name: "gpu", resourceClaimName: claimName }],
        },
      },
    });
    cleanups.push(() =>
      api.request({
        method: "DELETE",
        path: `/api/v1/namespaces/${namespace}/pods/${podName}?gracePeriodSeconds=0`,
      }),
    );
    const results = await waitFor(
      `claim ${claimName} allocated`,
      async (observe) => {
        const claim = await api.request<{
          status?: { allocation?: { devices?: { results?: { driver: string; device: string }[] } } };
        }>({ method: "GET", path: `${claims}/${claimName}` });
        observe(claim.status);
        return claim.status?.allocation?.devices?.results;
      },
      { timeoutMs: 60_000 },
    );
    expect(results).toEqual([
      expect.objectContaining({ driver: gpuDriver, device: draDeviceName("0001_02_00.0") }),
    ]);
  });
});
