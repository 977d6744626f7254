// Two device plugins for one resource on the simulated device manager, as in a surge upgrade.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type DevicePluginOptions } from "../../src/plugin-runtime/proto/index.js";
import { pino } from "pino";
import { PluginWatcherRegistration } from "../../src/plugin-runtime/registration/plugin-watcher.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import {
  DEVICE_IDS,
  ScriptedPlugin,
  dir,
  kubelet,
  plugins,
  register,
  registerAgain,
  devicesSeen,
  setKubelet,
  useDeviceManager,
} from "./device-manager-support.js";

useDeviceManager();

describe("two plugins for one resource (a surge upgrade)", () => {
  const OPTIONS: DevicePluginOptions = { preStartRequired: false, getPreferredAllocationAvailable: false };

  /** The healthy device count the kubelet would advertise as allocatable. */
  const allocatable = (resourceName: string): number | undefined =>
    kubelet.capacity(resourceName)?.allocatable;

  it.each([
    // kubernetes #121994: the old plugin's end is taken for the resource's, and the new plugin is cut off.
    { oneEndpointPerResource: true, after: 0 },
    // kubernetes PR #135437 (v1.37.0): one endpoint per socket; the old plugin's end changes nothing.
    { oneEndpointPerResource: false, after: DEVICE_IDS.length },
  ])(
    "one endpoint per resource: $oneEndpointPerResource → allocatable $after once the old plugin goes",
    async ({ oneEndpointPerResource, after }) => {
      await kubelet.stop();
      setKubelet(new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000, oneEndpointPerResource }));
      await kubelet.start();
      const resource = "vendor.example/surge";
      const old = await register(resource, OPTIONS);
      expect(old.error).toBeUndefined();
      await devicesSeen(resource);
      const next = await register(resource, OPTIONS);
      expect(next.error).toBeUndefined();
      await devicesSeen(resource);
      expect(allocatable(resource)).toBe(DEVICE_IDS.length);

      old.plugin.close();
      await waitFor(
        `allocatable ${after} after the old plugin went`,
        (observe) => {
          observe({
            allocatable: allocatable(resource),
            connected: kubelet.resources.get(resource)?.connected,
          });
          return allocatable(resource) === after;
        },
        { timeoutMs: 10_000, intervalMs: 10 },
      );
      if (after > 0) {
        // And it stays so: give a wrongly applied disconnect the time to land.
        await new Promise((r) => setTimeout(r, 300));
        expect(allocatable(resource)).toBe(after);
      }
    },
  );

  it("one endpoint per socket: the old plugin keeps its stream, and serves the resource when the new one goes first", async () => {
    await kubelet.stop();
    setKubelet(new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000, oneEndpointPerResource: false }));
    await kubelet.start();
    const resource = "vendor.example/rollback";
    await register(resource, OPTIONS);
    await devicesSeen(resource);
    const next = await register(resource, OPTIONS);
    await devicesSeen(resource);
    expect(kubelet.resources.get(resource)?.endpoint).toBe("p-2.sock");
    // A rollback: the new plugin goes, the old one was never cut off and is promoted.
    next.plugin.close();
    await waitFor(
      "the old plugin serving the resource",
      (observe) => {
        const r = kubelet.resources.get(resource);
        observe({ endpoint: r?.endpoint, connected: r?.connected, allocatable: allocatable(resource) });
        return r?.endpoint === "p-1.sock" && r.connected;
      },
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    expect(allocatable(resource)).toBe(DEVICE_IDS.length);
    // A second registration on a socket that is still connected is refused, as PluginConnected does.
    const again = await registerAgain(resource, "p-1.sock", OPTIONS);
    expect(again?.details).toBe(`device plugin already connected: ${join(dir, "p-1.sock")}`);
    expect(allocatable(resource)).toBe(DEVICE_IDS.length);
  });

  it.each([
    // Before v1.37 DeRegisterPlugin finds the client by resource name: the new plugin is cut off.
    { oneEndpointPerResource: true, after: 0 },
    { oneEndpointPerResource: false, after: DEVICE_IDS.length },
  ])(
    "through the plugin watcher, one endpoint per resource: $oneEndpointPerResource → allocatable $after once the old registration socket goes",
    async ({ oneEndpointPerResource, after }) => {
      await kubelet.stop();
      const registryDir = join(dir, "plugins_registry");
      setKubelet(
        new SimulatedDeviceManager({
          dir,
          pluginsRegistryDir: registryDir,
          gracePeriodMs: 60_000,
          oneEndpointPerResource,
        }),
      );
      await kubelet.start();
      const resource = "vendor.example/watched";
      const watcherRegistration = async (name: string): Promise<PluginWatcherRegistration> => {
        const plugin = new ScriptedPlugin(OPTIONS);
        plugins.push(plugin);
        await plugin.listen(join(dir, `${name}.sock`));
        const registration = new PluginWatcherRegistration({
          registryDir,
          socketName: () => `${name}-reg.sock`,
          resourceName: resource,
          endpointPath: () => join(dir, `${name}.sock`),
          supportedVersions: ["v1beta1"],
          logger: pino({ level: "silent" }),
          onStatus: () => undefined,
        });
        await registration.serve();
        return registration;
      };
      const old = await watcherRegistration("old");
      await devicesSeen(resource);
      const next = await watcherRegistration("new");
      try {
        await waitFor(
          "the new plugin serving the resource",
          () => kubelet.resources.get(resource)?.endpoint === join(dir, "new.sock"),
          { timeoutMs: 10_000, intervalMs: 10 },
        );
        // Only the old registration socket goes; the old plugin's own endpoint keeps serving.
        await old.close();
        await waitFor(
          `allocatable ${after} after the old registration socket went`,
          (observe) => {
            observe({
              allocatable: allocatable(resource),
              registrations: kubelet.watcherRegistrations.length,
            });
            return allocatable(resource) === after;
          },
          { timeoutMs: 10_000, intervalMs: 10 },
        );
        if (after > 0) {
          // The watcher looks again every second: give a wrongly applied deregistration the time to land.
          await new Promise((r) => setTimeout(r, 1_200));
          expect(allocatable(resource)).toBe(after);
        }
      } finally {
        await next.close();
      }
    },
  );
});
