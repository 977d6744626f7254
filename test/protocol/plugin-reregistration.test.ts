// A plugin whose ListAndWatch stream the kubelet ended while its socket stays registers again: on a kubelet
// before v1.37 two overlapping instances make the kubelet cut off the newer one when the older one exits
// (kubernetes #121994), and the resource must come back. Registering again backs off, never takes the
// resource from a newer instance beside it, and on a v1.37 kubelet (one endpoint per socket) a surge
// needs none of it. Two runtimes in-process against the simulated device manager, over real unix sockets.
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { type RegistrationMode } from "../../src/contract/registration.js";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { makeConfig, RESOURCE, tempDir, waitFor } from "./support.js";

const DEVICES = 4;
const RETRY_BASE_MS = 20;
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

interface Node {
  dir: string;
  registryDir: string;
  kubelet: SimulatedDeviceManager;
  /** A plugin instance started now: later ones are newer (their socket names carry the start time). */
  instance(registration: RegistrationMode): Promise<PluginRuntime>;
}

async function node(oneEndpointPerResource: boolean): Promise<Node> {
  const tmp = tempDir("rereg");
  cleanups.push(() => tmp.cleanup());
  const dir = join(tmp.dir, "dp");
  const registryDir = join(tmp.dir, "reg");
  const kubelet = new SimulatedDeviceManager({
    dir,
    pluginsRegistryDir: registryDir,
    gracePeriodMs: 60_000,
    oneEndpointPerResource,
  });
  await kubelet.start();
  cleanups.push(() => kubelet.stop());
  let started = 0;
  return {
    dir,
    registryDir,
    kubelet,
    instance: async (registration) => {
      // Instances are ordered by their start in milliseconds: keep two starts apart.
      while (Date.now() <= started) await new Promise((r) => setImmediate(r));
      const runtime = new PluginRuntime({
        config: makeConfig({}),
        devicePluginDir: dir,
        pluginsRegistryDir: registryDir,
        registration,
        nodeName: "node-a",
        logger,
        pollIntervalMs: 200,
        retryBaseMs: RETRY_BASE_MS,
        retryMaxMs: 200,
        cdiDir: join(tmp.dir, "cdi"),
      });
      started = Date.now();
      await runtime.start();
      cleanups.push(() => runtime.stop());
      return runtime;
    },
  };
}

/** The endpoint the simulated kubelet knows `runtime` by: Register's file name, or the watcher's path. */
function endpointOf(runtime: PluginRuntime, registration: RegistrationMode): string | undefined {
  const socket = runtime.status().socketPath;
  if (socket === undefined) return undefined;
  return registration === "kubelet" ? socket.split("/").at(-1) : socket;
}

/** Waits until the kubelet serves the resource through `runtime`'s current socket with every device. */
async function servedBy(
  n: Node,
  runtime: PluginRuntime,
  registration: RegistrationMode,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  await waitFor(
    what,
    (observe) => {
      const r = n.kubelet.resources.get(RESOURCE);
      const capacity = n.kubelet.capacity(RESOURCE);
      observe({
        kubelet: { endpoint: r?.endpoint, connected: r?.connected, capacity },
        plugin: runtime.status(),
        registrations: n.kubelet.registrations.map((q) => q.endpoint),
        watcher: n.kubelet.watcherRegistrations.map((w) => [w.socket, w.registered, w.error]),
      });
      return (
        r?.connected === true &&
        r.endpoint === endpointOf(runtime, registration) &&
        capacity?.allocatable === DEVICES &&
        runtime.status().registered
      );
    },
    { timeoutMs, intervalMs: 5 },
  );
}

describe("a plugin the kubelet stopped watching registers again", () => {
  it.each(["kubelet", "watcher"] as const)(
    "before v1.37, registration %s: the old instance exits, the kubelet cuts the new one off, and the new one registers again within 3 s",
    async (registration) => {
      const n = await node(true);
      const old = await n.instance(registration);
      await servedBy(n, old, registration, "the old instance serving the resource");
      const fresh = await n.instance(registration);
      // The node report follows these events: it must say Registered again after the new registration.
      const events: string[] = [];
      fresh.on("registered", () => events.push("registered"));
      fresh.on("unregistered", () => events.push("unregistered"));
      await servedBy(n, fresh, registration, "the new instance serving the resource");
      const firstSocket = fresh.status().socketPath;

      // The old instance exits (its pod deleted): its stream's end lands on the new instance.
      const t0 = performance.now();
      await old.stop();
      await servedBy(n, fresh, registration, "the new instance serving the resource again", 3_000);
      console.log(
        `registration ${registration}: resource back ${(performance.now() - t0).toFixed(0)} ms after the old instance exited`,
      );
      expect(fresh.status().socketPath).not.toBe(firstSocket);
      // The kubelet's late deregistration of the old instance (by name before v1.37) may cut it off once
      // more; whatever happens, it ends registered.
      await new Promise((r) => setTimeout(r, 1_500));
      await servedBy(n, fresh, registration, "the new instance still serving the resource", 3_000);
      expect(events.at(-1), `registration events: ${events.join(", ")}`).toBe("registered");
      expect(events).toContain("unregistered");
    },
  );

  it("on a v1.37 kubelet the instances of a surge overlap and neither registers again", async () => {
    const n = await node(false);
    const old = await n.instance("kubelet");
    await servedBy(n, old, "kubelet", "the old instance serving the resource");
    const fresh = await n.instance("kubelet");
    await servedBy(n, fresh, "kubelet", "the new instance serving the resource");
    const endpoints = [endpointOf(old, "kubelet"), endpointOf(fresh, "kubelet")];
    // Both stay registered while they overlap: the kubelet keeps the old stream beside the new one.
    await new Promise((r) => setTimeout(r, 500));
    expect(old.status().registered).toBe(true);
    await old.stop();
    await new Promise((r) => setTimeout(r, 500));
    await servedBy(n, fresh, "kubelet", "the new instance serving the resource after the old one left");
    expect(n.kubelet.registrations.map((q) => q.endpoint)).toEqual(endpoints);
  });

  it("an instance dropped while a newer one serves the resource stands by, and registers again once it is gone", async () => {
    const n = await node(false);
    const old = await n.instance("kubelet");
    await servedBy(n, old, "kubelet", "the old instance serving the resource");
    const oldEndpoint = n.kubelet.resources.get(RESOURCE)!;
    const fresh = await n.instance("kubelet");
    await servedBy(n, fresh, "kubelet", "the new instance serving the resource");

    // The kubelet ends the old instance's stream while the new one serves: the old one must not take
    // the resource back.
    oldEndpoint.stream?.cancel();
    await waitFor(
      "the old instance standing by",
      (observe) => {
        observe(old.status());
        return old.status().lastRegistrationError?.startsWith("a newer instance of the plugin serves");
      },
      { timeoutMs: 5_000, intervalMs: 5 },
    );
    await new Promise((r) => setTimeout(r, 600));
    expect(old.status().registered).toBe(false);
    expect(n.kubelet.registrations).toHaveLength(2);
    await servedBy(n, fresh, "kubelet", "the new instance still serving the resource");

    // The new instance goes (a rollback): the old one registers again.
    await fresh.stop();
    await servedBy(n, old, "kubelet", "the old instance serving the resource again", 3_000);
    expect(n.kubelet.registrations).toHaveLength(3);
  });

  it("backs off when the kubelet keeps ending its stream at once", async () => {
    const n = await node(false);
    const runtime = await n.instance("kubelet");
    const registeredAt: number[] = [];
    n.kubelet.on("registered", () => registeredAt.push(performance.now()));
    await servedBy(n, runtime, "kubelet", "the plugin serving the resource");
    for (let i = 1; i <= 5; i++) {
      const before = n.kubelet.registrations.length;
      n.kubelet.resources.get(RESOURCE)!.stream?.cancel();
      await waitFor(
        `registered again after the stream end ${i}`,
        () => n.kubelet.registrations.length === before + 1 && n.kubelet.resources.get(RESOURCE)?.connected,
        { timeoutMs: 5_000, intervalMs: 5 },
      );
    }
    const gaps = registeredAt.slice(1).map((t, i) => t - registeredAt[i]!);
    // 20, 40, 80, 160, 320 ms: each wait at least the backoff's step.
    gaps.forEach((gap, i) =>
      expect(gap, `gap ${i + 1} of ${gaps.join(", ")}`).toBeGreaterThanOrEqual(RETRY_BASE_MS * 2 ** i - 5),
    );
    expect(gaps.at(-1)!).toBeGreaterThan(gaps[0]!);
  });
});
