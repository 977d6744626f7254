// Two instances of one plugin on a node (an overlapping upgrade) and one CDI spec of their kind: the
// newer instance's device list stays in it while the newer one serves, whatever the older one's devices
// do, and the older one writes its own again once the newer one is gone (a rollback).
import { readFileSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";
import { makeConfig, tempDir, waitFor } from "./support.js";

const KIND = "vendor.example/foo";

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

describe("the CDI spec of two instances of one plugin", () => {
  it("keeps the newer instance's devices while it serves, and the older one's once it is gone", async () => {
    const tmp = tempDir("cdi-handover");
    cleanups.push(() => tmp.cleanup());
    const dir = join(tmp.dir, "dp");
    const cdiDir = join(tmp.dir, "cdi");
    const kubelet = new SimulatedDeviceManager({
      dir,
      pluginsRegistryDir: join(tmp.dir, "reg"),
      gracePeriodMs: 60_000,
    });
    await kubelet.start();
    cleanups.push(() => kubelet.stop());
    const olderLogs: string[] = [];
    const start = async (devices: number, revision: string, logs?: string[]): Promise<PluginRuntime> => {
      const healthFile = join(tmp.dir, `${revision}-health.json`);
      const runtime = new PluginRuntime({
        config: makeConfig({
          backend: { type: "Mock", mock: { devices, idPrefix: "foo", numaNodes: 1, healthFile } },
          cdi: { enabled: true, kind: KIND },
        }),
        devicePluginDir: dir,
        pluginsRegistryDir: join(tmp.dir, "reg"),
        registration: "kubelet",
        nodeName: "node-a",
        logger: logs
          ? pino({ level: "debug" }, { write: (line: string) => void logs.push(line) })
          : pino({ level: "silent" }),
        pollIntervalMs: 500,
        retryBaseMs: 20,
        retryMaxMs: 200,
        cdiDir,
        revision,
      });
      await runtime.start();
      cleanups.push(() => runtime.stop());
      return runtime;
    };
    const inSpec = (): string => {
      try {
        const spec = JSON.parse(readFileSync(join(cdiDir, "vendor.example-foo.json"), "utf8")) as {
          devices: { name: string }[];
        };
        return spec.devices.map((d) => d.name).join(",");
      } catch (err) {
        return String(err);
      }
    };

    const older = await start(2, "r1", olderLogs);
    expect(inSpec()).toBe("foo-0,foo-1");
    const newer = await start(3, "r2");
    await waitFor(
      "the newer instance's devices in the spec",
      (observe) => (observe(inSpec()), inSpec() === "foo-0,foo-1,foo-2" || undefined),
      {
        timeoutMs: 5_000,
        intervalMs: 5,
      },
    );

    // A device change on the older instance while the newer one serves: it leaves the spec alone.
    const olderHealth = join(tmp.dir, "r1-health.json");
    await writeFile(`${olderHealth}.tmp`, JSON.stringify({ "foo-1": "Unhealthy" }));
    await rename(`${olderHealth}.tmp`, olderHealth);
    await waitFor(
      "the older instance to leave the spec to the newer one",
      (observe) => {
        observe({ spec: inSpec(), olderLastLog: olderLogs.at(-1) });
        return (
          olderLogs.some((l) => l.includes("a newer instance of the plugin writes the CDI spec")) || undefined
        );
      },
      { timeoutMs: 5_000, intervalMs: 5 },
    );
    expect(inSpec()).toBe("foo-0,foo-1,foo-2");

    // The newer one goes (a rollback): the older one's devices come back.
    await newer.stop();
    await waitFor(
      "the older instance's devices in the spec again",
      (observe) => (observe(inSpec()), inSpec() === "foo-0,foo-1" || undefined),
      {
        timeoutMs: 5_000,
        intervalMs: 20,
      },
    );
    expect(older.status().socketPath).toBeDefined();
  });
});
