// No silent capacity loss: when the kubelet hands out fewer of the plugin's devices than the plugin
// advertises as healthy (its PodResources GetAllocatableResources) for longer than --capacity-heal-after
// while the plugin believes it is registered, the plugin registers again by itself, and says so. Another
// device plugin registers the same resource name and answers ListAndWatch with no devices: the simulated
// v1.37 kubelet, as the real one, keeps the resource's devices from the last answer of any of its
// endpoints, so its allocatable drops to 0 while the plugin's stream and socket stay as they were, and
// none of the plugin's other paths (kubelet restart, stream ended) sees anything.
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { RegistrationMode } from "../../src/contract/registration.js";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { ForeignDevicePlugin } from "../../tools/kubelet-sim/foreign-plugin.js";
import { SimulatedPodResourcesServer } from "../../tools/kubelet-sim/pod-resources.js";
import { makeConfig, RESOURCE, tempDir, waitFor } from "./support.js";

const DEVICES = 4;
const HEAL_AFTER_MS = 600;
const READ_EVERY_MS = 50;
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function start(registration: RegistrationMode, capacityHealAfterMs: number) {
  const tmp = tempDir("heal");
  cleanups.push(() => tmp.cleanup());
  const dir = join(tmp.dir, "dp");
  const registryDir = join(tmp.dir, "reg");
  const kubelet = new SimulatedDeviceManager({ dir, pluginsRegistryDir: registryDir, gracePeriodMs: 60_000 });
  await kubelet.start();
  cleanups.push(() => kubelet.stop());
  const podResources = new SimulatedPodResourcesServer({
    socketPath: join(tmp.dir, "pod-resources", "kubelet.sock"),
    deviceManager: kubelet,
    pods: () => [],
  });
  await podResources.start();
  cleanups.push(() => podResources.stop());
  const runtime = new PluginRuntime({
    config: makeConfig({}),
    devicePluginDir: dir,
    pluginsRegistryDir: registryDir,
    registration,
    nodeName: "node-a",
    logger,
    pollIntervalMs: 200,
    retryBaseMs: 20,
    retryMaxMs: 200,
    cdiDir: join(tmp.dir, "cdi"),
    podResources: { socketPath: podResources.socketPath, intervalMs: READ_EVERY_MS, capacityHealAfterMs },
  });
  await runtime.start();
  cleanups.push(() => runtime.stop());
  await waitFor(
    "the kubelet to list every device as allocatable",
    (observe) => {
      observe({ capacity: kubelet.capacity(RESOURCE), plugin: runtime.status() });
      return kubelet.capacity(RESOURCE)?.allocatable === DEVICES && runtime.status().registered;
    },
    { timeoutMs: 10_000, intervalMs: 5 },
  );
  const foreign = new ForeignDevicePlugin({ dir, socketName: "foreign.sock", resourceName: RESOURCE });
  cleanups.push(() => foreign.stop());
  return { kubelet, podResources, runtime, foreign };
}

describe("another plugin takes the resource's devices from under a registered plugin", () => {
  it.each(["kubelet", "watcher"] as const)(
    "registration %s: the plugin registers again within the bound, and reports the heal",
    async (registration) => {
      const { kubelet, podResources, runtime, foreign } = await start(registration, HEAL_AFTER_MS);
      const socketBefore = runtime.status().socketPath;
      const reports: string[] = [];
      runtime.on("selfHeal", (s) =>
        reports.push(s.selfHeal?.healedAtMs === undefined ? "healing" : "healed"),
      );

      await foreign.start();
      await waitFor("the kubelet to list 0 devices", () => kubelet.capacity(RESOURCE)?.allocatable === 0, {
        timeoutMs: 5_000,
        intervalMs: 1,
      });
      const lost = performance.now();
      await waitFor(
        "the kubelet to list every device as allocatable again",
        (observe) => {
          observe({ capacity: kubelet.capacity(RESOURCE), plugin: runtime.status() });
          return kubelet.capacity(RESOURCE)?.allocatable === DEVICES;
        },
        // The bound, a read interval either side and the re-registration's own backoff.
        { timeoutMs: HEAL_AFTER_MS + 10 * READ_EVERY_MS + 2_000, intervalMs: 5 },
      );
      const backMs = performance.now() - lost;
      console.log(
        `registration ${registration}: allocatable back ${backMs.toFixed(0)} ms after the kubelet lost it`,
      );
      expect(backMs).toBeGreaterThanOrEqual(HEAL_AFTER_MS);
      // Through a fresh socket: the plugin registered again.
      expect(runtime.status().socketPath).not.toBe(socketBefore);
      expect(podResources.calls.getAllocatableResources).toBeGreaterThan(0);

      await waitFor("the plugin to see the heal", () => runtime.status().selfHeal?.healedAtMs !== undefined, {
        timeoutMs: 5_000,
        intervalMs: 5,
      });
      const heal = runtime.status().selfHeal!;
      expect(heal.count).toBe(1);
      expect(heal.message).toMatch(
        /^kubelet advertised 0 of 4 healthy devices for \d+(\.\d)? s; registered again$/,
      );
      expect(heal.healedAtMs).toBeGreaterThanOrEqual(heal.lastAtMs);
      expect(reports).toEqual(["healing", "healed"]);
      expect(runtime.status().registered).toBe(true);
      const metrics = await runtime.metrics.registry.metrics();
      expect(metrics).toContain(
        `dpo_plugin_reregistrations_total{resource="${RESOURCE}",reason="CapacityLost"} 1`,
      );
    },
  );

  it("with --capacity-heal-after 0 the loss stays: nothing else notices it", async () => {
    const { kubelet, runtime, foreign } = await start("kubelet", 0);
    const socketBefore = runtime.status().socketPath;
    await foreign.start();
    // Several bounds' worth of reads: a poll of the directory and the PodResources reads happen meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 3 * HEAL_AFTER_MS));
    expect(kubelet.capacity(RESOURCE)?.allocatable).toBe(0);
    expect(runtime.status().registered).toBe(true);
    expect(runtime.status().socketPath).toBe(socketBefore);
    expect(runtime.status().selfHeal).toBeUndefined();
  });
});
