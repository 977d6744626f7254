// A switch of spec.publish leaves pods of the old path holding devices: device-plugin pods keep the ids
// the kubelet's device manager gave them after the switch to DRA, DRA pods keep their claims' devices
// after the way back. Each path reads the kubelet's PodResources API (the kubelet simulator's server over
// a real unix socket) and leaves out what the other holds: the DRA plugin's first ResourceSlice and the
// device plugin's first ListAndWatch answer already do, and a device comes back once its pod is gone.
// The node report lists such a device as held by the other path, not as unhealthy nor as gone.
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { draDriverName } from "../../src/api/v1beta1/spec.js";
import { draDeviceName } from "../../src/plugin-runtime/dra/devices.js";
import { DraRuntime } from "../../src/plugin-runtime/dra/dra-runtime.js";
import { buildDeviceNodeState } from "../../src/plugin-runtime/report/node-state.js";
import { reportSourceOf } from "../../src/plugin-runtime/report/writer.js";
import type { PreparedClaim } from "../../tools/kubelet-sim/dra-manager.js";
import { SimulatedPodResourcesServer, type PodResourcesPod } from "../../tools/kubelet-sim/pod-resources.js";
import { deviceTable } from "../metrics/exposition.js";
import { makeConfig, RESOURCE, SliceStore, startHarness, tempDir, waitFor, type Harness } from "./support.js";

const NODE = "node-a";

let dra: DraRuntime | undefined;
let harness: Harness | undefined;
let podResources: SimulatedPodResourcesServer | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await dra?.stop();
  dra = undefined;
  await harness?.close();
  harness = undefined;
  await podResources?.stop();
  podResources = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function reportOf(source: ReturnType<typeof reportSourceOf>) {
  const snapshot = source.snapshot();
  const held = source.heldElsewhere?.() ?? new Set<string>();
  return buildDeviceNodeState({
    namespace: "dpo-system",
    config: { name: "test" },
    nodeName: NODE,
    resourceName: RESOURCE,
    pluginVersion: "test",
    kubeletAPIVersion: "",
    registration: { registered: true, since: "2026-01-01T00:00:00Z" },
    physical: snapshot.physical,
    advertised: snapshot.advertised,
    heldElsewhere: held.size > 0 && source.otherPath ? { by: source.otherPath, ids: held } : undefined,
    since: new Map(),
    now: "2026-01-01T00:00:00Z",
  }).status;
}

describe("devices the other publish path holds after a switch", () => {
  it("DRA: the first slice leaves out what device-plugin pods hold, and publishes it once they are gone", async () => {
    const tmp = tempDir("cross-dra");
    cleanups.push(tmp.cleanup);
    const socketPath = join(tmp.dir, "pod-resources", "kubelet.sock");
    const config = makeConfig({
      publish: "DRA",
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "s" } },
      sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false },
    });
    // The kubelet's device manager still holds replicas of s-1 and s-3 for pods admitted before the
    // switch (one replica id each is enough to hold the physical device); the plugin that gave them is gone.
    const held = new Map<string, string[]>([
      ["uid-a", ["s-1::0"]],
      ["uid-b", ["s-3::1"]],
    ]);
    const deviceManager = {
      containerDevices: (owner: string) => new Map([[RESOURCE, held.get(owner) ?? []]]),
      device: () => undefined,
      allocatableDevices: () => [],
    };
    const pods: PodResourcesPod[] = [
      { uid: "uid-a", name: "old-a", namespace: "ml", containers: ["main"] },
      { uid: "uid-b", name: "old-b", namespace: "ml", containers: ["main"] },
    ];
    podResources = new SimulatedPodResourcesServer({
      socketPath,
      deviceManager,
      draManager: { prepared: new Map<string, PreparedClaim>() },
      pods: () => pods,
    });
    await podResources.start();

    const api = new SliceStore();
    dra = new DraRuntime({
      config,
      nodeName: NODE,
      logger: pino({ level: "silent" }),
      api,
      draPluginsDir: join(tmp.dir, "plugins"),
      pluginsRegistryDir: join(tmp.dir, "plugins_registry"),
      cdiDir: join(tmp.dir, "cdi"),
      podResources: { socketPath, intervalMs: 50 },
      sliceCoalesceMs: 10,
    });
    await dra.start();
    expect(api.writes[0]?.devices.sort(), "the first slice written").toEqual(["s-0", "s-2"]);
    expect(api.published()).toEqual(["s-0", "s-2"]);

    // The report: four devices, two held by the device plugin's pods (no replica here), none unhealthy.
    const report = reportOf(reportSourceOf(dra));
    expect(report.devices.map((d) => [d.id, d.replicas, d.heldBy ?? "-", d.health])).toEqual([
      ["s-0", 2, "-", "Healthy"],
      ["s-2", 2, "-", "Healthy"],
      ["s-1", 0, "DevicePlugin", "Healthy"],
      ["s-3", 0, "DevicePlugin", "Healthy"],
    ]);
    expect(report.advertised).toBe(4);
    expect(report.healthy).toBe(4);
    // The per-device series name the devices the slice publishes, one each (not the replica ids).
    await waitFor("the per-device series", async (observe) => {
      const table = deviceTable(await dra!.metrics.render(), "dpo_plugin_device_allocated");
      observe(table);
      return JSON.stringify(table) === JSON.stringify({ "s-0": "=0", "s-2": "=0" });
    });

    // One old pod goes: its device is published again, the other stays out.
    held.delete("uid-a");
    pods.splice(0, 1);
    await waitFor(
      "s-1 published again",
      (observe) => {
        observe(api.published());
        return JSON.stringify(api.published()) === JSON.stringify(["s-0", "s-1", "s-2"]);
      },
      { timeoutMs: 10_000, intervalMs: 20 },
    );
  });

  it("device plugin: keeps advertising what DRA claims hold (the scheduler counts their pods), but hands out only the rest", async () => {
    const tmp = tempDir("cross-dp");
    cleanups.push(tmp.cleanup);
    const socketPath = join(tmp.dir, "pod-resources", "kubelet.sock");
    const config = makeConfig({ backend: { type: "Mock", mock: { devices: 3, idPrefix: "s" } } });
    const driver = draDriverName(config.spec);
    // A pod admitted through DRA before the way back: its claim holds s-2 of this node's pool; a claim of
    // another node's pool and one of another driver are not this plugin's.
    const claims = new Map<string, PreparedClaim>([
      [
        "uid-claim",
        {
          ref: { namespace: "ml", name: "c", uid: "uid-claim" },
          drivers: [driver, "nic.example.com"],
          devices: [
            [driver, NODE, draDeviceName("s-2")],
            [driver, "node-b", draDeviceName("s-0")],
            ["nic.example.com", NODE, draDeviceName("s-1")],
          ].map(([d, poolName, deviceName]) => ({
            driver: d!,
            poolName: poolName!,
            deviceName: deviceName!,
            requestNames: ["gpu"],
            cdiDeviceIds: [],
          })),
          pods: new Set(["uid-dra"]),
        },
      ],
    ]);
    const pods: PodResourcesPod[] = [
      { uid: "uid-dra", name: "dra-pod", namespace: "ml", containers: ["main"], claims: { main: ["c"] } },
    ];
    podResources = new SimulatedPodResourcesServer({
      socketPath,
      deviceManager: {
        containerDevices: () => new Map(),
        device: () => undefined,
        allocatableDevices: () => [],
      },
      draManager: { prepared: claims },
      pods: () => pods,
    });
    await podResources.start();

    // The default policy (None) would not offer GetPreferredAllocation; with devices held, it is offered.
    harness = await startHarness(config, { podResources: { socketPath, intervalMs: 50 } });
    const h = harness;
    await waitFor(
      "the simulated kubelet to hear the plugin's devices",
      (observe) => {
        const r = h.kubelet.resources.get(RESOURCE);
        observe({ connected: r?.connected, updates: r?.updates });
        return r?.connected === true && r.updates > 0;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    const resource = h.kubelet.resources.get(RESOURCE)!;
    expect(resource.options?.getPreferredAllocationAvailable, "offered at registration").toBe(true);
    expect(resource.devices.map((d) => d.ID).sort(), "every device advertised").toEqual([
      "s-0",
      "s-1",
      "s-2",
    ]);
    const report = reportOf(reportSourceOf(h.runtime));
    expect(report.devices.map((d) => [d.id, d.replicas, d.heldBy ?? "-"])).toEqual([
      ["s-0", 1, "-"],
      ["s-1", 1, "-"],
      ["s-2", 1, "DRA"],
    ]);
    expect([report.advertised, report.healthy]).toEqual([3, 3]);
    await waitFor("the DRA pod counted as allocated", () => h.runtime.allocatedDevices() === 1);

    // Two pods through the device plugin get s-0 and s-1, never s-2, whatever the kubelet's map order.
    const a = await h.kubelet.allocate(RESOURCE, 1, { owner: "uid-a", container: "main" });
    const b = await h.kubelet.allocate(RESOURCE, 1, { owner: "uid-b", container: "main" });
    expect([...a.deviceIds, ...b.deviceIds].sort()).toEqual(["s-0", "s-1"]);
    // A kubelet that gives s-2 anyway (it ignored the preference) is refused, naming the device.
    await expect(h.kubelet.allocate(RESOURCE, 1, { owner: "uid-c", container: "main" })).rejects.toThrow(
      /held through DRA claims.*"s-2"/,
    );

    // The DRA pod goes (its claim unprepared): s-2 can be given again.
    pods.splice(0);
    claims.clear();
    await waitFor("s-2 free", () => h.runtime.heldElsewhere().size === 0, {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    const c = await h.kubelet.allocate(RESOURCE, 1, { owner: "uid-c", container: "main" });
    expect(c.deviceIds).toEqual(["s-2"]);
  });
});
