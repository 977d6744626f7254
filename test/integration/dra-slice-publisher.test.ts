// The ResourceSlice publisher against a real API server (resource.k8s.io/v1 of Kubernetes 1.34): the API
// server accepting the objects is the check of their wire format. Creation, a health change within 1 s,
// a restart that continues the generation without deleting, more than 128 devices, and a conflict.
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { draTypedAttributes } from "../../src/plugin-runtime/devices/attributes.js";
import { SlicePublisher } from "../../src/plugin-runtime/dra/publisher.js";
import {
  resourceSliceName,
  type PoolDevice,
  type ResourceSlice,
} from "../../src/plugin-runtime/dra/slices.js";
import { ApiClient, loadKubeconfig } from "../../src/plugin-runtime/report/api-client.js";
import { injectedCluster, uniqueName, waitFor } from "../cluster/helpers.js";

const SLICES = "/apis/resource.k8s.io/v1/resourceslices";
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });
const node = injectedCluster().nodeNames[0] ?? "node-a";
const configName = uniqueName("it-slices");
let client: ApiClient;
const publishers: SlicePublisher[] = [];

/** Mutable devices a test changes, read by the publisher on every pass. */
class Devices {
  constructor(public list: PoolDevice[]) {}
  readonly get = (): readonly PoolDevice[] => this.list;
  setHealth(name: string, health: PoolDevice["health"]): void {
    this.list = this.list.map((d) => (d.name === name ? { ...d, health } : d));
  }
}

function mockDevices(count: number): PoolDevice[] {
  return Array.from({ length: count }, (_, index) => {
    const typed = draTypedAttributes({
      attributes: {
        model: "X100",
        memory: "80Gi",
        index: String(index),
        "pci-address": `0000:3b:00.${index}`,
      },
      numaNode: index % 2,
    });
    return {
      name: `mock-${index}`,
      health: "Healthy",
      attributes: typed.attributes,
      capacity: typed.capacity,
    };
  });
}

function publisher(driver: string, devices: Devices): SlicePublisher {
  const p = new SlicePublisher({
    client,
    driver,
    node,
    configName,
    devices: devices.get,
    logger,
    retryBaseMs: 50,
  });
  publishers.push(p);
  return p;
}

async function poolSlices(driver: string): Promise<ResourceSlice[]> {
  const selector = encodeURIComponent(`spec.nodeName=${node},spec.driver=${driver}`);
  const list = await client.request<{ items: ResourceSlice[] }>({
    method: "GET",
    path: `${SLICES}?fieldSelector=${selector}`,
  });
  return list.items.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
}

function driverName(): string {
  return `${uniqueName("pub")}.example.com`;
}

beforeAll(async () => {
  client = new ApiClient(await loadKubeconfig(injectedCluster().kubeconfigPath));
});

afterAll(async () => {
  for (const p of publishers) await p.stop();
  await client
    .request({
      method: "DELETE",
      path: `${SLICES}?labelSelector=${encodeURIComponent(`dpo.dev/config=${configName}`)}`,
    })
    .catch(() => undefined);
  client.close();
});

describe("SlicePublisher on a real API server", () => {
  it("creates the node's pool with typed attributes and capacities the API server accepts", async () => {
    const driver = driverName();
    const devices = new Devices(mockDevices(3));
    const p = publisher(driver, devices);
    await p.start();
    expect(p.error()).toBeUndefined();
    const slices = await poolSlices(driver);
    expect(slices).toHaveLength(1);
    const [slice] = slices;
    expect(slice!.metadata.name).toBe(resourceSliceName(driver, node, 0));
    expect(slice!.metadata.labels).toMatchObject({
      "dpo.dev/config": configName,
      "app.kubernetes.io/managed-by": "dpo",
    });
    expect(slice!.spec).toMatchObject({
      driver,
      nodeName: node,
      pool: { name: node, generation: 1, resourceSliceCount: 1 },
    });
    expect(slice!.spec.devices?.map((d) => d.name)).toEqual(["mock-0", "mock-1", "mock-2"]);
    expect(slice!.spec.devices?.[1]).toEqual({
      name: "mock-1",
      attributes: {
        index: { int: 1 },
        model: { string: "X100" },
        numaNode: { int: 1 },
        pci_address: { string: "0000:3b:00.1" },
        "resource.kubernetes.io/numaNode": { int: 1 },
      },
      capacity: { memory: { value: "80Gi" } },
    });
    await p.stop();
  });

  it("drops an unhealthy device and bumps the generation within 1 s; a restart continues and deletes nothing", async () => {
    const driver = driverName();
    const devices = new Devices(mockDevices(4));
    const first = publisher(driver, devices);
    await first.start();
    const [before] = await poolSlices(driver);
    expect(before!.spec.pool.generation).toBe(1);

    // Measured from the change signal to the updated object being readable from the API server.
    const latencies: number[] = [];
    for (const [i, health] of (["Unhealthy", "Healthy", "Unhealthy"] as const).entries()) {
      devices.setHealth("mock-2", health);
      const t0 = performance.now();
      first.changed();
      await waitFor(
        `generation ${2 + i}`,
        async () => {
          const [s] = await poolSlices(driver);
          return s!.spec.pool.generation === 2 + i;
        },
        { timeoutMs: 5_000, intervalMs: 5 },
      );
      latencies.push(performance.now() - t0);
    }
    console.log(
      `ResourceSlice update after a health change: ${latencies.map((l) => `${l.toFixed(0)} ms`).join(", ")}`,
    );
    for (const l of latencies) expect(l).toBeLessThan(1_000);
    const [afterHealth] = await poolSlices(driver);
    expect(afterHealth!.spec.devices?.map((d) => d.name)).toEqual(["mock-0", "mock-1", "mock-3"]);

    // Stop leaves the slice; a new process with a changed device set continues the generation.
    await first.stop();
    const [kept] = await poolSlices(driver);
    expect(kept!.metadata.uid).toBe(before!.metadata.uid);
    devices.setHealth("mock-2", "Healthy");
    const second = publisher(driver, devices);
    await second.start();
    const [restarted] = await poolSlices(driver);
    expect(restarted!.metadata.uid).toBe(before!.metadata.uid);
    expect(restarted!.spec.pool.generation).toBe(5);
    expect(restarted!.spec.devices).toHaveLength(4);

    // A restart with nothing changed writes nothing.
    await second.stop();
    const third = publisher(driver, devices);
    await third.start();
    const [same] = await poolSlices(driver);
    expect(same!.metadata.resourceVersion).toBe(restarted!.metadata.resourceVersion);
    expect(third.state()?.generation).toBe(5);
    await third.stop();
  });

  it("splits more than 128 devices into slices with the right count, and shrinks back", async () => {
    const driver = driverName();
    const devices = new Devices(mockDevices(300));
    const p = publisher(driver, devices);
    await p.start();
    expect(p.error()).toBeUndefined();
    let slices = await poolSlices(driver);
    expect(slices.map((s) => s.spec.devices?.length).sort()).toEqual([128, 128, 44].sort());
    for (const s of slices)
      expect(s.spec.pool).toMatchObject({ name: node, generation: 1, resourceSliceCount: 3 });
    expect(new Set(slices.map((s) => s.metadata.name))).toEqual(
      new Set([0, 1, 2].map((i) => resourceSliceName(driver, node, i))),
    );

    devices.list = devices.list.slice(0, 10);
    p.changed();
    await waitFor("one slice left", async () => (await poolSlices(driver)).length === 1, {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    slices = await poolSlices(driver);
    expect(slices[0]!.spec.pool).toMatchObject({ generation: 2, resourceSliceCount: 1 });
    expect(slices[0]!.spec.devices).toHaveLength(10);
    await p.stop();
  });

  it("re-reads the pool after a conflict and still publishes above the generation someone else wrote", async () => {
    const driver = driverName();
    const devices = new Devices(mockDevices(2));
    const p = publisher(driver, devices);
    await p.start();
    const [slice] = await poolSlices(driver);
    // Another writer (an older instance during a surge upgrade) moves the pool on behind our back.
    await client.request({
      method: "PUT",
      path: `${SLICES}/${slice!.metadata.name}`,
      body: { ...slice, spec: { ...slice!.spec, pool: { ...slice!.spec.pool, generation: 40 } } },
    });
    devices.setHealth("mock-0", "Unhealthy");
    p.changed();
    // The API server shows the write before its answer reaches the publisher, which records its success
    // (and clears the conflict it met first) only then: wait for both, the publisher's side included.
    await waitFor(
      "generation 41 after the conflict, on the API server and recorded by the publisher",
      async (observe) => {
        const [s] = await poolSlices(driver);
        const seen = {
          server: { generation: s?.spec.pool.generation, devices: s?.spec.devices?.length },
          published: p.state(),
          error: p.error(),
        };
        observe(seen);
        return (
          seen.server.generation === 41 && seen.server.devices === 1 && seen.published?.generation === 41
        );
      },
      { timeoutMs: 5_000, intervalMs: 20 },
    );
    expect(p.state()).toMatchObject({ generation: 41, slices: 1, devices: 1 });
    expect(p.error()).toBeUndefined();
    await p.stop();
  });
});
