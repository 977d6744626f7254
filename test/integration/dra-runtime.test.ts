// The plugin runtime in DRA mode against a real API server: the Mock backend's devices become this node's
// ResourceSlice, the kubelet's plugin watcher registers the DRA plugin, a claim allocated in the API is
// read and prepared, a health change reaches the slice within 1 s, the slice is back within 2 s after the
// node's slices were deleted (a starting kubelet deletes them), and stopping leaves the slice.
import * as grpc from "@grpc/grpc-js";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { draDriverName } from "../../src/api/v1beta1/spec.js";
import { DraRuntime } from "../../src/plugin-runtime/dra/dra-runtime.js";
import { resourceSliceName, type ResourceSlice } from "../../src/plugin-runtime/dra/slices.js";
import {
  draV1,
  PluginRegistrationClient,
  type InfoRequest,
  type PluginInfo,
} from "../../src/plugin-runtime/proto/index.js";
import { ApiClient, loadKubeconfig } from "../../src/plugin-runtime/report/api-client.js";
import { injectedCluster, uniqueName, waitFor } from "../cluster/helpers.js";
import { makeConfig, tempDir } from "../protocol/support.js";

const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });
const node = injectedCluster().nodeNames[0] ?? "node-a";
const configName = uniqueName("it-dra-runtime");
const namespace = "default";
const work = tempDir("dra-rt");
const healthFile = join(work.dir, "health.json");
const config = makeConfig(
  {
    resourceName: `${uniqueName("dra")}.example/foo`,
    publish: "DRA",
    backend: {
      type: "Mock",
      mock: {
        devices: 3,
        idPrefix: "foo",
        numaNodes: 1,
        healthFile,
        attributes: { model: "X100", memory: "80Gi" },
      },
    },
  },
  configName,
);
const driver = draDriverName(config.spec);
const sliceName = resourceSliceName(driver, node, 0);
let api: ApiClient;
let runtime: DraRuntime;

async function slice(): Promise<ResourceSlice> {
  return api.request<ResourceSlice>({
    method: "GET",
    path: `/apis/resource.k8s.io/v1/resourceslices/${sliceName}`,
  });
}

/** The slice's devices without a taint: the ones new claims can get. */
function untainted(s: ResourceSlice): NonNullable<ResourceSlice["spec"]["devices"]> {
  return (s.spec.devices ?? []).filter((d) => (d.taints?.length ?? 0) === 0);
}

function unary<Req, Res>(
  fn: (req: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown,
  req: Req,
): Promise<Res> {
  return new Promise((resolve, reject) => fn(req, (err, res) => (err ? reject(err) : resolve(res))));
}

beforeAll(async () => {
  writeFileSync(healthFile, "{}");
  api = new ApiClient(await loadKubeconfig(injectedCluster().kubeconfigPath));
  runtime = newRuntime(config);
  await runtime.start();
});

/** A runtime of `cfg` on the node, in this run's directories (every instance of the driver shares them). */
function newRuntime(cfg: typeof config, handoverPollMs?: number): DraRuntime {
  return new DraRuntime({
    config: cfg,
    nodeName: node,
    logger,
    api,
    draPluginsDir: join(work.dir, "plugins"),
    pluginsRegistryDir: join(work.dir, "reg"),
    cdiDir: join(work.dir, "cdi"),
    sliceRetryBaseMs: 50,
    handoverPollMs,
  });
}

afterAll(async () => {
  await runtime?.stop();
  await api
    .request({ method: "DELETE", path: `/apis/resource.k8s.io/v1/resourceslices/${sliceName}` })
    .catch(() => undefined);
  api?.close();
  work.cleanup();
});

describe("DraRuntime on a real API server", () => {
  it("publishes the Mock devices with typed attributes and serves the DRA socket", async () => {
    const s = await slice();
    expect(s.spec).toMatchObject({
      driver,
      nodeName: node,
      pool: { name: node, generation: 1, resourceSliceCount: 1 },
    });
    expect(s.metadata.labels?.["dpo.dev/config"]).toBe(configName);
    expect(s.spec.devices?.map((d) => d.name)).toEqual(["foo-0", "foo-1", "foo-2"]);
    expect(s.spec.devices?.[2]).toEqual({
      name: "foo-2",
      attributes: {
        index: { int: 2 },
        model: { string: "X100" },
        numaNode: { int: 0 },
        "resource.kubernetes.io/numaNode": { int: 0 },
      },
      capacity: { memory: { value: "80Gi" } },
    });
    expect(runtime.status().serving).toBe(true);
    expect(runtime.status().socketPath).toContain(join(work.dir, "plugins", driver));
    expect(runtime.published()).toMatchObject({ generation: 1, slices: 1, devices: 3 });
  });

  it("is registered once the kubelet's plugin watcher says so", async () => {
    const socket = runtime.status().registrationSocketPath!;
    const watcher = new PluginRegistrationClient(`unix://${socket}`, grpc.credentials.createInsecure());
    try {
      const info = await unary<InfoRequest, PluginInfo>(watcher.getInfo.bind(watcher), {});
      expect(info).toMatchObject({ type: "DRAPlugin", name: driver, endpoint: runtime.status().socketPath });
      expect(info.supportedVersions).toEqual([
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
      ]);
      const registered = new Promise((resolve) => runtime.once("registered", resolve));
      await unary(watcher.notifyRegistrationStatus.bind(watcher), { pluginRegistered: true, error: "" });
      await registered;
      expect(runtime.status().registered).toBe(true);
    } finally {
      watcher.close();
    }
  });

  it("prepares a claim it reads from the API server", async () => {
    const claimName = uniqueName("claim");
    const claimsPath = `/apis/resource.k8s.io/v1/namespaces/${namespace}/resourceclaims`;
    const created = await api.request<{ metadata: { uid: string; resourceVersion: string } }>({
      method: "POST",
      path: claimsPath,
      body: {
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceClaim",
        metadata: { name: claimName, namespace },
        spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: driver } }] } },
      },
    });
    try {
      // What the scheduler writes when it allocates the claim against the slice.
      await api.request({
        method: "PUT",
        path: `${claimsPath}/${claimName}/status`,
        body: {
          apiVersion: "resource.k8s.io/v1",
          kind: "ResourceClaim",
          metadata: {
            name: claimName,
            namespace,
            uid: created.metadata.uid,
            resourceVersion: created.metadata.resourceVersion,
          },
          spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: driver } }] } },
          status: {
            allocation: { devices: { results: [{ request: "gpu", driver, pool: node, device: "foo-1" }] } },
          },
        },
      });
      const client = new draV1.DRAPluginClient(
        `unix://${runtime.status().socketPath}`,
        grpc.credentials.createInsecure(),
      );
      try {
        const response = await unary<draV1.NodePrepareResourcesRequest, draV1.NodePrepareResourcesResponse>(
          client.nodePrepareResources.bind(client),
          {
            claims: [{ namespace, name: claimName, uid: created.metadata.uid }],
          },
        );
        const result = response.claims[created.metadata.uid];
        expect(result?.error).toBe("");
        expect(result?.devices.map((d) => [d.poolName, d.deviceName])).toEqual([[node, "foo-1"]]);
        const cdiFiles = await readdir(join(work.dir, "cdi"));
        expect(cdiFiles).toEqual([`${driver}-device_${created.metadata.uid}.json`]);
        expect(readFileSync(join(work.dir, "cdi", cdiFiles[0]!), "utf8")).toContain("foo-1");
      } finally {
        client.close();
      }
    } finally {
      await api.request({ method: "DELETE", path: `${claimsPath}/${claimName}` }).catch(() => undefined);
    }
  });

  it("taints an unhealthy device in its slice within 1 s of the backend noticing (the API server keeps taints)", async () => {
    const before = (await slice()).spec.pool.generation;
    const t0 = performance.now();
    writeFileSync(healthFile, JSON.stringify({ "foo-0": "Unhealthy" }));
    await waitFor(
      "foo-0 tainted in the slice",
      async (observe) => {
        const s = await slice();
        const foo0 = s.spec.devices?.find((d) => d.name === "foo-0");
        observe({ generation: s.spec.pool.generation, foo0 });
        return (
          s.spec.pool.generation > before &&
          foo0?.taints?.some((t) => t.key === "dpo.dev/unhealthy" && t.effect === "NoSchedule") === true
        );
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    const elapsed = performance.now() - t0;
    console.log(`health file written → ResourceSlice updated: ${elapsed.toFixed(0)} ms`);
    expect(elapsed).toBeLessThan(1_000);
  });

  it("puts its slice back within 2 s after the node's slices were deleted, as a starting kubelet deletes them", async () => {
    const before = await slice();
    const t0 = performance.now();
    // The kubelet's own call when it starts (wipeResourceSlices): one DeleteCollection of the node's
    // slices, every driver's.
    await api.request({
      method: "DELETE",
      path: `/apis/resource.k8s.io/v1/resourceslices?fieldSelector=${encodeURIComponent(`spec.nodeName=${node}`)}`,
    });
    const back = await waitFor(
      "the slice re-created",
      async (observe) => {
        const s = await slice().catch((err: unknown) => err as Error);
        observe(s instanceof Error ? s.message : { uid: s.metadata.uid, generation: s.spec.pool.generation });
        return s instanceof Error || s.metadata.uid === before.metadata.uid ? undefined : s;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    const elapsed = performance.now() - t0;
    console.log(`node's ResourceSlices deleted → this plugin's slice back: ${elapsed.toFixed(0)} ms`);
    expect(elapsed).toBeLessThan(2_000);
    expect(back.spec.pool.generation).toBeGreaterThan(before.spec.pool.generation);
    expect(back.spec.devices).toEqual(before.spec.devices);
  });

  it("leaves the slice in place when it stops", async () => {
    const before = await slice();
    await runtime.stop();
    expect(runtime.status().serving).toBe(false);
    expect(existsSync(join(work.dir, "plugins", driver))).toBe(true);
    expect((await readdir(join(work.dir, "reg"))).length).toBe(0);
    const after = await slice();
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it("hands the pool over between two instances of the driver, as in a surge upgrade and its rollback", async () => {
    // The instance of the earlier revision, and then the new revision's beside it, with another model.
    const runtimeOf = (model: string): DraRuntime => {
      const spec = structuredClone(config.spec);
      if (spec.backend.type === "Mock" && spec.backend.mock !== undefined) {
        spec.backend.mock.attributes = { model, memory: "80Gi" };
      }
      return newRuntime({ ...config, spec }, 100);
    };
    // The models of the devices new claims can get: an unhealthy device stays in the slice, tainted.
    const models = async (): Promise<string[]> =>
      untainted(await slice()).map((d) => {
        const model = d.attributes?.["model"];
        return model !== undefined && "string" in model ? model.string : "";
      });
    const old = runtimeOf("X100");
    const fresh = runtimeOf("X200");
    try {
      await old.start();
      expect(await models()).toEqual(["X100", "X100"]);

      // The newer instance's view is in the slice once its start resolves, whether or not the older one has
      // noticed it yet (it polls every 100 ms, and a start can take longer than that on a loaded machine).
      await fresh.start();
      expect(await models()).toEqual(["X200", "X200"]);
      await waitFor(
        "the old instance standing by",
        () => old.publisher.standingByFor() === fresh.status().socketPath,
        {
          timeoutMs: 5_000,
          intervalMs: 20,
        },
      );

      // A health change both instances see: only the newer one writes it.
      writeFileSync(healthFile, JSON.stringify({ "foo-0": "Unhealthy", "foo-1": "Unhealthy" }));
      await waitFor("foo-1 tainted in the slice", async () => untainted(await slice()).length === 1, {
        timeoutMs: 5_000,
        intervalMs: 20,
      });
      await waitFor(
        "the old instance to see the change too",
        () => old.devices.snapshot().physical.find((d) => d.id === "foo-1")?.health === "Unhealthy",
        { timeoutMs: 5_000, intervalMs: 20 },
      );
      // Absence over a window: the old instance's coalesced pass (50 ms) would have run by now.
      const settled = await slice();
      await new Promise((r) => setTimeout(r, 300));
      const later = await slice();
      expect(later.metadata.resourceVersion).toBe(settled.metadata.resourceVersion);
      expect(await models()).toEqual(["X200"]);

      // The new instance goes (a rollback deletes its pod): the old one publishes its own devices again.
      await fresh.stop();
      await waitFor("the old instance's model back", async () => (await models()).join() === "X100", {
        timeoutMs: 5_000,
        intervalMs: 20,
      });
      expect(old.publisher.standingByFor()).toBeUndefined();
      expect(untainted(await slice()).map((d) => d.name)).toEqual(["foo-2"]);
    } finally {
      await fresh.stop();
      await old.stop();
    }
  });
});
