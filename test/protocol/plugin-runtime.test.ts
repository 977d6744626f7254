// The plugin runtime driven over real unix sockets the way the kubelet drives it: registration on kubelet.sock
// and through the plugin watcher, options, health changes and kubelet restarts.
import * as grpc from "@grpc/grpc-js";
import { existsSync, readdirSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { createLogger } from "../../src/observability/log.js";
import { DevicePluginClient, PluginRegistrationClient } from "../../src/plugin-runtime/proto/index.js";
import { makeConfig, RESOURCE, startHarness, tempDir, waitFor, type Harness } from "./support.js";
import { call, registered } from "./grpc-calls.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("registration on kubelet.sock", () => {
  it("serves first, then registers v1beta1 with a per-start socket name and the options", async () => {
    harness = await startHarness(makeConfig({ topology: { allocationPolicy: "Packed" } }));
    const r = await registered(harness);
    expect(r.endpoint).toMatch(/^dpo-hardware-vendor\.example_foo-[0-9a-z]+-[0-9a-z]+-\d+\.sock$/);
    expect(existsSync(join(harness.dir, r.endpoint))).toBe(true);
    expect(r.options).toEqual({ preStartRequired: false, getPreferredAllocationAvailable: true });
    expect(harness.runtime.status()).toMatchObject({ serving: true, registered: true });
    // Events about its own new socket must not make the runtime register a second time.
    for (let i = 0; i < 20; i++) {
      await call(r.client.getDevicePluginOptions.bind(r.client), {});
    }
    expect(harness.kubelet.registrations.map((q) => q.endpoint)).toEqual([r.endpoint]);
  });

  it("does not offer GetPreferredAllocation with policy None", async () => {
    harness = await startHarness(makeConfig({ topology: { allocationPolicy: "None" } }));
    const r = await registered(harness);
    expect(r.options.getPreferredAllocationAvailable).toBe(false);
  });

  it("keeps retrying while the kubelet is absent and registers once it appears", async () => {
    harness = await startHarness(makeConfig({}), { startKubelet: false });
    expect(harness.runtime.status()).toMatchObject({ serving: true, registered: false });
    await harness.kubelet.start();
    await registered(harness);
  });

  it("says at info that kubelet.sock is absent, once per absence", async () => {
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    const absentLines = () =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as { level: string; msg: string; kubeletSocket?: string })
        .filter((l) => l.msg === "kubelet.sock absent; waiting for the kubelet");
    harness = await startHarness(makeConfig({}), {
      startKubelet: false,
      logger: createLogger("info", { component: "plugin" }, sink),
    });
    const h = harness;
    const [first] = await waitFor("the absence of kubelet.sock logged", (observe) => {
      const lines = absentLines();
      observe(lines);
      return lines.length > 0 ? lines : undefined;
    });
    expect(first).toMatchObject({ level: "info", kubeletSocket: join(h.dir, "kubelet.sock") });
    // The window in which the line must not repeat: five polls of the runtime (pollIntervalMs 200).
    await delay(1_000);
    expect(absentLines()).toHaveLength(1);
    await h.kubelet.start();
    await registered(h);
    await h.kubelet.stop();
    await waitFor("the second absence logged", (observe) => {
      const lines = absentLines();
      observe(lines.length);
      return lines.length === 2 ? lines : undefined;
    });
  });

  it("reports no kubelet API version until the kubelet accepts one, then the version it registered with", async () => {
    harness = await startHarness(makeConfig({}), { startKubelet: false });
    expect(harness.runtime.status()).toMatchObject({ registered: false, kubeletAPIVersion: "" });
    await harness.kubelet.start();
    await registered(harness);
    const accepted = harness.kubelet.registrations.map((q) => q.version);
    expect(accepted).toHaveLength(1);
    expect(harness.runtime.status()).toMatchObject({ registered: true, kubeletAPIVersion: accepted[0] });

    // A kubelet restart ends the registration: nothing is negotiated until the new kubelet accepts again.
    const h = harness;
    const versions: string[] = [];
    h.runtime.on("unregistered", (s) => versions.push(s.kubeletAPIVersion));
    await h.kubelet.restart();
    await waitFor(
      "re-registration after the kubelet restart",
      (observe) => {
        observe({ registrations: h.kubelet.registrations.length, status: h.runtime.status() });
        return h.kubelet.registrations.length === 2 && h.runtime.status().registered;
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    expect(versions).toEqual([""]);
    expect(h.runtime.status().kubeletAPIVersion).toBe(h.kubelet.registrations[1]!.version);
  });

  it("removes stale sockets of its own prefix but keeps live ones and other plugins' sockets", async () => {
    const tmp = tempDir("stale");
    try {
      const dir = join(tmp.dir, "dp");
      harness = await startHarness(makeConfig({}));
      const first = await registered(harness);
      // A stale socket: bound once, its server gone (what a crashed instance leaves behind).
      const staleName = "dpo-hardware-vendor.example_foo-1-1-1.sock";
      const stale = new grpc.Server();
      await new Promise<void>((res, rej) =>
        stale.bindAsync(
          `unix://${join(harness!.dir, staleName)}`,
          grpc.ServerCredentials.createInsecure(),
          (e) => (e ? rej(e) : res()),
        ),
      );
      stale.forceShutdown();
      await writeFile(join(harness.dir, "other-plugin.sock.txt"), "not ours");
      // A second instance of the same resource starts (an overlapping upgrade).
      const { PluginRuntime } = await import("../../src/plugin-runtime/runtime.js");
      const second = new PluginRuntime({
        config: makeConfig({}),
        devicePluginDir: harness.dir,
        pluginsRegistryDir: join(dir, "reg"),
        registration: "kubelet",
        nodeName: "node-a",
        logger: pino({ level: "silent" }),
      });
      await second.start();
      try {
        const names = readdirSync(harness.dir);
        expect(names).not.toContain(staleName);
        expect(names).toContain(first.endpoint);
        expect(names).toContain("other-plugin.sock.txt");
      } finally {
        await second.stop();
      }
    } finally {
      tmp.cleanup();
    }
  });
});

describe("kubelet restarts", () => {
  it("re-serves on a fresh socket and re-registers after each of three restarts in a row", async () => {
    harness = await startHarness(makeConfig({}));
    let r = await registered(harness);
    const endpoints = [r.endpoint];
    for (let i = 1; i <= 3; i++) {
      await harness.kubelet.restart();
      r = await waitFor(
        `re-registration after restart ${i}`,
        (observe) => {
          const cur = harness!.kubelet.resources.get(RESOURCE);
          observe({ endpoint: cur?.endpoint, connected: cur?.connected, refused: harness!.kubelet.refused });
          return cur?.connected && cur.updates > 0 && !endpoints.includes(cur.endpoint) ? cur : undefined;
        },
        // The runtime promises about 1 s (a kernel watch on kubelet.sock); the deadline is generous so a
        // busy machine does not fail it, and the time itself is not asserted.
        { timeoutMs: 5_000, intervalMs: 5 },
      );
      endpoints.push(r.endpoint);
      // The kubelet removed the old socket; only the new one of ours is left.
      const ours = readdirSync(harness.dir).filter((n) => n.startsWith("dpo-"));
      expect(ours).toEqual([r.endpoint]);
    }
    expect(new Set(endpoints).size).toBe(4);
    expect(harness.kubelet.registrations.map((q) => q.endpoint)).toEqual(endpoints);
    expect(harness.runtime.status().kubeletRestarts).toBe(3);
    expect(harness.kubelet.capacity(RESOURCE)).toEqual({ capacity: 4, allocatable: 4 });
  });
});

describe("registration through the plugin watcher", () => {
  it("serves GetInfo in plugins_registry, registers on NotifyRegistrationStatus, re-creates the socket on failure", async () => {
    harness = await startHarness(makeConfig({}), { registration: "watcher", startKubelet: false });
    const regDir = join(harness.dir, "..", "reg");
    const sock = await waitFor(
      "a registration socket in plugins_registry",
      (observe) => {
        const names = existsSync(regDir) ? readdirSync(regDir) : [];
        observe(names);
        return names.find((n) => n.endsWith("-reg.sock"));
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    const client = new PluginRegistrationClient(
      `unix://${join(regDir, sock)}`,
      grpc.credentials.createInsecure(),
    );
    const info = await call(client.getInfo.bind(client), {});
    expect(info).toEqual({
      type: "DevicePlugin",
      name: RESOURCE,
      endpoint: harness.runtime.status().socketPath,
      supportedVersions: ["v1beta1"],
    });
    // The endpoint serves the DevicePlugin service.
    const dp = new DevicePluginClient(`unix://${info.endpoint}`, grpc.credentials.createInsecure());
    const opts = await call(dp.getDevicePluginOptions.bind(dp), {});
    expect(opts.getPreferredAllocationAvailable).toBe(false);
    dp.close();

    expect(harness.runtime.status()).toMatchObject({ registered: false, kubeletAPIVersion: "" });
    await call(client.notifyRegistrationStatus.bind(client), { pluginRegistered: true, error: "" });
    // The kubelet accepted the GetInfo answer, whose only supported version is therefore the one in use.
    expect(harness.runtime.status()).toMatchObject({
      registered: true,
      kubeletAPIVersion: info.supportedVersions[0],
    });

    await call(client.notifyRegistrationStatus.bind(client), {
      pluginRegistered: false,
      error: "resource name taken",
    });
    client.close();
    expect(harness.runtime.status()).toMatchObject({
      registered: false,
      kubeletAPIVersion: "",
      lastRegistrationError: "resource name taken",
    });
    await waitFor(
      "a fresh registration socket",
      (observe) => {
        const names = readdirSync(regDir);
        observe(names);
        return names.length === 1 && names[0] !== sock && names[0]!.endsWith("-reg.sock");
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
  });
});
