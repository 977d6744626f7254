// A Replace with the new plugin started ahead, on a kubelet before v1.37 (one registration per resource):
// the new instance serves its socket but stands by while the older one serves the node, says so in its
// report, and registers as soon as the older one is gone, without the kubelet cutting it off
// (kubernetes #121994). Two runtimes in-process against the simulated device manager, over real unix
// sockets; the Node is read through the runtime's readNode option (no API server here).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { nodeKeys, serializeNodeRecord } from "../../src/contract/node-upgrade.js";
import type { RegistrationMode } from "../../src/contract/registration.js";
import { NodeStateWriter, reportSourceOf, type ApiRequest } from "../../src/plugin-runtime/report/index.js";
import { socketPrefix } from "../../src/plugin-runtime/registration/sockets.js";
import type { ReadNodeAnnotations } from "../../src/plugin-runtime/registration/standby.js";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { makeConfig, RESOURCE, tempDir, waitFor } from "./support.js";

const CONFIG = "test";
const logger = pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" });

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

interface Node {
  dir: string;
  registration: RegistrationMode;
  kubelet: SimulatedDeviceManager;
  /** The endpoints the kubelet took on, in order (Register or the plugin watcher). */
  attached: string[];
  instance(revision: string, readNode?: ReadNodeAnnotations): Promise<PluginRuntime>;
}

async function node(registration: RegistrationMode = "kubelet"): Promise<Node> {
  const tmp = tempDir("standby");
  cleanups.push(() => tmp.cleanup());
  const dir = join(tmp.dir, "dp");
  const registryDir = join(tmp.dir, "reg");
  // Before v1.37: a second registration replaces the first, whose later end cuts the new one off.
  const kubelet = new SimulatedDeviceManager({
    dir,
    pluginsRegistryDir: registryDir,
    gracePeriodMs: 60_000,
    oneEndpointPerResource: true,
  });
  await kubelet.start();
  cleanups.push(() => kubelet.stop());
  const attached: string[] = [];
  kubelet.on("registered", (r) => attached.push(r.endpoint));
  let started = 0;
  return {
    dir,
    registration,
    kubelet,
    attached,
    instance: async (revision, readNode) => {
      // Instances are ordered by their start in milliseconds: keep two starts apart.
      while (Date.now() <= started) await new Promise((r) => setImmediate(r));
      const runtime = new PluginRuntime({
        config: makeConfig({}, CONFIG),
        devicePluginDir: dir,
        pluginsRegistryDir: registryDir,
        registration,
        nodeName: "node-a",
        logger,
        pollIntervalMs: 500,
        retryBaseMs: 20,
        retryMaxMs: 200,
        cdiDir: join(tmp.dir, "cdi"),
        revision,
        ...(readNode ? { readNode } : {}),
      });
      started = Date.now();
      await runtime.start();
      cleanups.push(() => runtime.stop());
      return runtime;
    },
  };
}

/** The endpoint the simulated kubelet knows `runtime` by: Register's file name, or the watcher's path. */
function endpointOf(n: Node, runtime: PluginRuntime): string | undefined {
  const socket = runtime.status().socketPath;
  return n.registration === "kubelet" ? socket?.split("/").at(-1) : socket;
}

function servedBy(n: Node, runtime: PluginRuntime): boolean {
  const r = n.kubelet.resources.get(RESOURCE);
  return (
    r?.connected === true &&
    r.endpoint === endpointOf(n, runtime) &&
    n.kubelet.capacity(RESOURCE)?.allocatable === 4 &&
    runtime.status().registered
  );
}

/** The node's record of the upgrade r1 → r2 with the new plugin started ahead. */
const STANDBY_RECORD = {
  [nodeKeys(CONFIG).upgrade]: serializeNodeRecord({ from: "r1", to: "r2", standby: true }),
};

/** The registration states a writer of `runtime`'s report wrote, in order. */
function reportStates(runtime: PluginRuntime): string[] {
  const states: string[] = [];
  const writer = new NodeStateWriter({
    api: {
      request: (req: ApiRequest) => {
        const body = req.body as { status?: { registration?: { state?: string } } };
        const state = body.status?.registration?.state;
        if (req.path.includes("/status?") && state !== undefined && states.at(-1) !== state)
          states.push(state);
        return Promise.resolve({});
      },
    },
    source: reportSourceOf(runtime),
    namespace: "dpo-system",
    config: { name: CONFIG },
    nodeName: "node-a",
    resourceName: RESOURCE,
    revision: "r2",
    pluginVersion: "test",
    logger,
    metrics: runtime.metrics,
    minIntervalMs: 0,
  });
  writer.start();
  cleanups.push(() => writer.stop({ budgetMs: 100 }));
  return states;
}

describe("a plugin started ahead during a Replace", () => {
  it.each(["kubelet", "watcher"] as const)(
    "registration %s: stands by while the older instance serves, and registers within 500 ms of its stop",
    async (registration) => {
      const n = await node(registration);
      const old = await n.instance("r1");
      await waitFor("the old instance serving the resource", () => servedBy(n, old), { intervalMs: 5 });

      let reads = 0;
      const fresh = await n.instance("r2", () => (reads++, Promise.resolve(STANDBY_RECORD)));
      const states = reportStates(fresh);
      await waitFor(
        "the new instance standing by, its report saying so",
        (observe) => {
          observe({ status: fresh.status(), states });
          return fresh.status().standingBy === old.status().socketPath && states.at(-1) === "StandingBy";
        },
        { timeoutMs: 5_000, intervalMs: 5 },
      );
      expect(fresh.status()).toMatchObject({ serving: true, registered: false });
      // Stays so across polls: the kubelet keeps one registration, the old one's.
      await new Promise((r) => setTimeout(r, 1_200));
      expect(fresh.status().registered).toBe(false);
      expect(n.attached).toEqual([endpointOf(n, old)]);
      expect(servedBy(n, old)).toBe(true);
      expect(reads, "the Node is read once per older instance").toBe(1);

      const t0 = performance.now();
      await old.stop();
      await waitFor("the new instance serving the resource", () => servedBy(n, fresh), {
        timeoutMs: 500,
        intervalMs: 2,
      });
      console.log(`registered ${(performance.now() - t0).toFixed(1)} ms after the old instance's stop began`);
      expect(fresh.status().standingBy).toBeUndefined();
      await waitFor(
        "the report Registered",
        (observe) => {
          observe(states);
          return states.at(-1) === "Registered";
        },
        { timeoutMs: 5_000, intervalMs: 5 },
      );
      // Nothing in between: the operator reads StandingBy, then Registered.
      expect(states).toEqual(["StandingBy", "Registered"]);
      // Never cut off: the old stream's end reached the kubelet before the new registration.
      await new Promise((r) => setTimeout(r, 600));
      expect(servedBy(n, fresh)).toBe(true);
      expect(n.attached).toEqual([endpointOf(n, old), endpointOf(n, fresh)]);
    },
  );

  it("registers within 500 ms when the older instance dies, its socket file left behind", async () => {
    const n = await node();
    // The older instance: a process serving a socket named as a plugin started a minute ago names it.
    const older = join(n.dir, `${socketPrefix(RESOURCE)}${(Date.now() - 60_000).toString(36)}-1-1.sock`);
    const child = spawn(
      process.execPath,
      [
        "-e",
        `require("node:net").createServer().listen(process.argv[1], () => console.log("serving"))`,
        older,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    cleanups.push(() => void child.kill("SIGKILL"));
    await new Promise((resolve) => child.stdout.once("data", resolve));
    const fresh = await n.instance("r2", () => Promise.resolve(STANDBY_RECORD));
    await waitFor("the new instance standing by", () => fresh.status().standingBy === older, {
      timeoutMs: 5_000,
      intervalMs: 5,
    });
    expect(n.attached).toEqual([]);

    const t0 = performance.now();
    child.kill("SIGKILL");
    await waitFor("the new instance serving the resource", () => servedBy(n, fresh), {
      timeoutMs: 500,
      intervalMs: 2,
    });
    console.log(`registered ${(performance.now() - t0).toFixed(1)} ms after the older process was killed`);
    expect(existsSync(older), "the dead instance's socket file is still there").toBe(true);
  });

  it.each([
    {
      case: "a record of another revision",
      annotations: {
        [nodeKeys(CONFIG).upgrade]: serializeNodeRecord({ from: "r1", to: "r3", standby: true }),
      },
    },
    { case: "no record", annotations: {} },
  ])("registers beside the older instance with $case", async ({ annotations }) => {
    const n = await node();
    const old = await n.instance("r1");
    await waitFor("the old instance serving the resource", () => servedBy(n, old), { intervalMs: 5 });
    const fresh = await n.instance("r2", () => Promise.resolve(annotations));
    await waitFor("the new instance serving the resource", () => servedBy(n, fresh), { intervalMs: 5 });
    expect(fresh.status().standingBy).toBeUndefined();
  });
});
