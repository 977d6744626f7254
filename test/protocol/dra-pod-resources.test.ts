// The runtime in DRA mode reading the kubelet's PodResources API over a real unix socket (the kubelet
// simulator's server, answering from its DRA manager's prepared claims): the same per-device series as in
// device-plugin mode, each claimed device of this driver and pool labelled with its pod and container,
// absent until the kubelet first answers, failures counted, and free again when the pod goes.
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { draDriverName } from "../../src/api/v1beta1/spec.js";
import { draDeviceName } from "../../src/plugin-runtime/dra/devices.js";
import { DraRuntime } from "../../src/plugin-runtime/dra/dra-runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import type { PreparedClaim } from "../../tools/kubelet-sim/dra-manager.js";
import { SimulatedPodResourcesServer, type PodResourcesPod } from "../../tools/kubelet-sim/pod-resources.js";
import { deviceTable, samplesOf } from "../metrics/exposition.js";
import { makeConfig, SliceStore, tempDir, waitFor } from "./support.js";

const NODE = "node-a";
/** Mock ids with an underscore are not DNS labels: their DRA device names differ from them. */
const IDS = ["gpu_a-0", "gpu_a-1", "gpu_a-2"];
const config = makeConfig({
  resourceName: "dra-podres.example/gpu",
  publish: "DRA",
  backend: { type: "Mock", mock: { devices: IDS.length, idPrefix: "gpu_a" } },
});
const DRIVER = draDriverName(config.spec);

let runtime: DraRuntime | undefined;
let podResources: SimulatedPodResourcesServer | undefined;
const cleanups: (() => void | Promise<void>)[] = [];
afterEach(async () => {
  await runtime?.stop();
  runtime = undefined;
  await podResources?.stop();
  podResources = undefined;
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A claim the simulated kubelet prepared: its devices as the drivers answered (driver, pool, name). */
function prepared(name: string, devices: [driver: string, pool: string, device: string][]): PreparedClaim {
  return {
    ref: { namespace: "ml", name, uid: `uid-${name}` },
    drivers: [...new Set(devices.map(([driver]) => driver))],
    devices: devices.map(([driver, poolName, deviceName]) => ({
      driver,
      poolName,
      deviceName,
      requestNames: ["gpu"],
      cdiDeviceIds: [`${driver}/device=uid-${name}-${deviceName}`],
    })),
    pods: new Set(["uid-trainer"]),
  };
}

async function table(description: string, metric: string, want: Record<string, string>): Promise<string> {
  return waitFor(
    description,
    async (observe) => {
      const text = await runtime!.metrics.render();
      observe(deviceTable(text, metric));
      return JSON.stringify(deviceTable(text, metric)) === JSON.stringify(want) ? text : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
}

describe("per-device metrics in DRA mode, from the dynamic resources of the kubelet's PodResources API", () => {
  it("names the pod holding each claimed device of this driver and pool, counts failures before the kubelet answers, and frees the device when the pod goes", async () => {
    const tmp = tempDir("dra-podres");
    cleanups.push(tmp.cleanup);
    const socketPath = join(tmp.dir, "pod-resources", "kubelet.sock");
    runtime = new DraRuntime({
      config,
      nodeName: NODE,
      logger: pino({ level: "silent" }),
      api: new SliceStore(),
      draPluginsDir: join(tmp.dir, "plugins"),
      pluginsRegistryDir: join(tmp.dir, "plugins_registry"),
      cdiDir: join(tmp.dir, "cdi"),
      podResources: { socketPath, intervalMs: 50 },
    });
    await runtime.start();

    // No PodResources socket yet: every device healthy with no holder, allocation unknown (absent), the
    // failures counted by gRPC status and the API marked down.
    const free = Object.fromEntries(IDS.map((id) => [id, "=1"]));
    await table("every device healthy, no holder", "dpo_plugin_device_healthy", free);
    const down = await waitFor("a failed read counted", async () => {
      const text = await runtime!.metrics.render();
      return samplesOf(text, "dpo_plugin_pod_resources_errors_total", { code: "UNAVAILABLE" })[0]?.value
        ? text
        : undefined;
    });
    expect(samplesOf(down, "dpo_plugin_device_allocated")).toEqual([]);
    expect(samplesOf(down, "dpo_plugin_pod_resources_up")).toMatchObject([
      { labels: { resource: config.spec.resourceName }, value: 0 },
    ]);

    // The kubelet answers: a trainer whose main container uses a claim with two of this plugin's devices,
    // another driver's device and one of another node's pool (not ours), and a sidecar using none.
    const claims = new Map<string, PreparedClaim>();
    const pods: PodResourcesPod[] = [];
    podResources = new SimulatedPodResourcesServer({
      socketPath,
      deviceManager: new SimulatedDeviceManager({ dir: join(tmp.dir, "device-plugins") }),
      draManager: { prepared: claims },
      pods: () => pods,
    });
    await podResources.start();
    await table(
      "every device free",
      "dpo_plugin_device_allocated",
      Object.fromEntries(IDS.map((id) => [id, "=0"])),
    );
    const claim = prepared("trainer-gpus", [
      [DRIVER, NODE, draDeviceName("gpu_a-0")],
      ["nic.example.com", NODE, draDeviceName("gpu_a-1")],
      [DRIVER, "node-b", draDeviceName("gpu_a-1")],
      [DRIVER, NODE, draDeviceName("gpu_a-2")],
    ]);
    claims.set(claim.ref.uid, claim);
    pods.push({
      uid: "uid-trainer",
      name: "trainer",
      namespace: "ml",
      containers: ["sidecar", "main"],
      claims: { main: ["trainer-gpus"] },
    });
    const held = {
      "gpu_a-0": "ml/trainer/main=1",
      "gpu_a-1": "=0",
      "gpu_a-2": "ml/trainer/main=1",
    };
    const text = await table("two devices held by ml/trainer/main", "dpo_plugin_device_allocated", held);
    expect(deviceTable(text, "dpo_plugin_device_healthy")).toEqual({
      "gpu_a-0": "ml/trainer/main=1",
      "gpu_a-1": "=1",
      "gpu_a-2": "ml/trainer/main=1",
    });
    expect(samplesOf(text, "dpo_plugin_pod_resources_up")[0]?.value).toBe(1);

    // The pod goes (the kubelet unprepares its claim): the devices are free again, one series each.
    pods.splice(0);
    claims.clear();
    const after = await table(
      "every device free again",
      "dpo_plugin_device_allocated",
      Object.fromEntries(IDS.map((id) => [id, "=0"])),
    );
    expect(samplesOf(after, "dpo_plugin_device_healthy", { pod: "trainer" })).toEqual([]);
    expect(samplesOf(after, "dpo_plugin_device_healthy")).toHaveLength(IDS.length);
  });
});
