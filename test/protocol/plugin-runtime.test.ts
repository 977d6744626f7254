// The plugin runtime driven over real unix sockets the way the kubelet drives it: registration, options,
// ListAndWatch, Allocate, GetPreferredAllocation, PreStartContainer, health changes and kubelet restarts.
import * as grpc from "@grpc/grpc-js";
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { Writable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import type { DeviceBackend, DeviceListener } from "../../src/plugin-runtime/devices/backend.js";
import { DevFSDeviceBackend } from "../../src/plugin-runtime/backends/devfs.js";
import { MockDeviceBackend } from "../../src/plugin-runtime/backends/mock.js";
import { resourceEnvName } from "../../src/plugin-runtime/devices/env.js";
import { createLogger } from "../../src/observability/log.js";
import {
  DevicePluginClient,
  PluginRegistrationClient,
  type AllocateResponse,
  type PreferredAllocationResponse,
} from "../../src/plugin-runtime/proto/index.js";
import { makeConfig, RESOURCE, startHarness, tempDir, waitFor, type Harness } from "./support.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

type UnaryFn<Req, Res> = (
  req: Req,
  md: grpc.Metadata,
  opts: Partial<grpc.CallOptions>,
  cb: (e: grpc.ServiceError | null, r: Res) => void,
) => unknown;

function call<Req, Res>(fn: UnaryFn<Req, Res>, req: Req): Promise<Res> {
  return new Promise((resolve, reject) =>
    fn(req, new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );
}

function callError<Req, Res>(fn: UnaryFn<Req, Res>, req: Req): Promise<grpc.ServiceError> {
  return call(fn, req).then(
    (res) => {
      throw new Error(`expected an error, got ${JSON.stringify(res)}`);
    },
    (err: grpc.ServiceError) => err,
  );
}

/**
 * Both sides agree the plugin is registered: the simulated kubelet streams its devices, and the plugin has
 * the Register response. The kubelet dials ListAndWatch from inside its Register handler, so the stream
 * can be up a moment before the plugin hears back.
 */
async function registered(h: Harness) {
  return waitFor(
    "the simulated kubelet to see the plugin's devices and the plugin to see its registration",
    (observe) => {
      const r = h.kubelet.resources.get(RESOURCE);
      const plugin = h.runtime.status();
      observe({
        registered: !!r,
        connected: r?.connected,
        devices: r?.devices.length,
        refused: h.kubelet.refused,
        plugin,
      });
      return r?.connected && r.updates > 0 && plugin.registered ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}

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

describe("ListAndWatch", () => {
  it("sends the whole list at once with NUMA topology, and serves several streams", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    expect(r.devices).toEqual([
      { ID: "foo-0", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
      { ID: "foo-1", health: "Healthy", topology: { nodes: [{ ID: 1 }] } },
      { ID: "foo-2", health: "Healthy", topology: { nodes: [{ ID: 0 }] } },
      { ID: "foo-3", health: "Healthy", topology: { nodes: [{ ID: 1 }] } },
    ]);
    const second = new DevicePluginClient(
      `unix://${join(harness.dir, r.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    const got = await new Promise<number>((resolve, reject) => {
      const s = second.listAndWatch({});
      s.once("data", (res: { devices: unknown[] }) => {
        resolve(res.devices.length);
        s.cancel();
      });
      s.once("error", (e: grpc.ServiceError) => (e.code === grpc.status.CANCELLED ? undefined : reject(e)));
    });
    second.close();
    expect(got).toBe(4);
  });

  it("advertises replicas with time-slicing", async () => {
    harness = await startHarness(
      makeConfig({ sharing: { strategy: "TimeSlicing", replicas: 3, failRequestsGreaterThanOne: false } }),
    );
    const r = await registered(harness);
    expect(r.devices.map((d) => d.ID).slice(0, 4)).toEqual(["foo-0::0", "foo-0::1", "foo-0::2", "foo-1::0"]);
    expect(r.devices).toHaveLength(12);
  });

  it("reports a health change and the recovery, with the reason", async () => {
    const tmp = tempDir("health");
    try {
      const healthFile = join(tmp.dir, "health.json");
      harness = await startHarness(
        makeConfig({
          backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2, healthFile } },
          sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false },
        }),
      );
      const r = await registered(harness);
      const before = r.updates;
      // Atomic replace, as a tool writing the file would do it.
      await writeFile(
        `${healthFile}.tmp`,
        JSON.stringify({ "foo-1": { health: "Unhealthy", reason: "XidError" } }),
      );
      await rename(`${healthFile}.tmp`, healthFile);
      await waitFor(
        "foo-1 replicas to turn Unhealthy",
        (observe) => {
          observe(r.devices);
          const bad = r.devices.filter((d) => d.health === "Unhealthy").map((d) => d.ID);
          return bad.join(",") === "foo-1::0,foo-1::1";
        },
        { timeoutMs: 2_000, intervalMs: 5 },
      );
      expect(r.updates).toBeGreaterThan(before);
      expect(harness.kubelet.capacity(RESOURCE)).toEqual({ capacity: 8, allocatable: 6 });
      const snap = harness.runtime.devices.snapshot();
      expect(snap.physical.find((d) => d.id === "foo-1")).toMatchObject({
        health: "Unhealthy",
        reason: "XidError",
      });

      await writeFile(healthFile, JSON.stringify({ "foo-1": "Healthy" }));
      await waitFor(
        "foo-1 to recover",
        (observe) => {
          observe(r.devices);
          return r.devices.every((d) => d.health === "Healthy");
        },
        { timeoutMs: 2_000, intervalMs: 5 },
      );
      expect(harness.kubelet.capacity(RESOURCE)).toEqual({ capacity: 8, allocatable: 8 });
    } finally {
      tmp.cleanup();
    }
  });
});

describe("Allocate", () => {
  it("answers each container request in order with the resource env var and backend details", async () => {
    harness = await startHarness(makeConfig({ cdi: { enabled: true, kind: "vendor.example/foo" } }));
    const r = await registered(harness);
    const res: AllocateResponse = await call(r.client.allocate.bind(r.client), {
      containerRequests: [
        { devicesIds: ["foo-2"] },
        { devicesIds: ["foo-0", "foo-3"] },
        { devicesIds: ["foo-1"] },
      ],
    });
    expect(res.containerResponses).toHaveLength(3);
    const env = resourceEnvName(RESOURCE);
    expect(res.containerResponses.map((c) => c.envs[env])).toEqual(["foo-2", "foo-0,foo-3", "foo-1"]);
    expect(res.containerResponses[1]!.envs["MOCK_DEVICE_IDS"]).toBe("foo-0,foo-3");
    expect(res.containerResponses[1]!.cdiDevices).toEqual([
      { name: "vendor.example/foo=foo-0" },
      { name: "vendor.example/foo=foo-3" },
    ]);
  });

  it("refuses unknown ids with INVALID_ARGUMENT naming them", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    const err = await callError(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0"] }, { devicesIds: ["foo-1", "bar-9", "baz"] }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("container_requests[1]");
    expect(err.details).toContain("bar-9");
    expect(err.details).toContain("baz");
  });

  it("refuses unhealthy devices with FAILED_PRECONDITION", async () => {
    const tmp = tempDir("unhealthy");
    try {
      const healthFile = join(tmp.dir, "health.json");
      await writeFile(healthFile, JSON.stringify({ "foo-2": "Unhealthy" }));
      harness = await startHarness(
        makeConfig({
          backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2, healthFile } },
        }),
      );
      const r = await registered(harness);
      const err = await callError(r.client.allocate.bind(r.client), {
        containerRequests: [{ devicesIds: ["foo-2"] }],
      });
      expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(err.details).toContain("foo-2");
    } finally {
      tmp.cleanup();
    }
  });

  it("refuses more than one replica when failRequestsGreaterThanOne is set", async () => {
    harness = await startHarness(
      makeConfig({ sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true } }),
    );
    const r = await registered(harness);
    await call(r.client.allocate.bind(r.client), { containerRequests: [{ devicesIds: ["foo-0::1"] }] });
    const err = await callError(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0::1", "foo-1::1"] }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it("refuses an empty request, and survives malformed bytes", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    const empty = await callError(r.client.allocate.bind(r.client), { containerRequests: [] });
    expect(empty.code).toBe(grpc.status.INVALID_ARGUMENT);

    // A client that sends bytes that are no AllocateRequest at all.
    const Raw = grpc.makeGenericClientConstructor(
      {
        allocate: {
          path: "/v1beta1.DevicePlugin/Allocate",
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      "v1beta1.DevicePlugin",
    );
    const raw = new Raw(`unix://${join(harness.dir, r.endpoint)}`, grpc.credentials.createInsecure());
    const garbage = await new Promise<grpc.ServiceError | null>((resolve) =>
      raw.makeUnaryRequest(
        "/v1beta1.DevicePlugin/Allocate",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01]),
        (err) => resolve(err),
      ),
    );
    raw.close();
    expect(garbage?.code).toBeDefined();
    expect(garbage?.code).not.toBe(grpc.status.OK);
    // Still serving.
    const ok = await call(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0"] }],
    });
    expect(ok.containerResponses).toHaveLength(1);
  });

  it("allocates through the kubelet's path: preferred allocation, then Allocate", async () => {
    harness = await startHarness(
      makeConfig({
        sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: false },
        topology: { allocationPolicy: "Packed" },
      }),
    );
    await registered(harness);
    const first = await harness.kubelet.allocate(RESOURCE, 2);
    expect(first.deviceIds).toHaveLength(2);
    expect(new Set(first.deviceIds.map((id) => id.split("::")[0])).size).toBe(1);
  });
});

/** A CDI spec file as a container runtime reads it: the fields this project writes, nothing assumed. */
interface WrittenCdiSpec {
  cdiVersion: string;
  kind: string;
  devices: {
    name: string;
    containerEdits: { env?: string[]; deviceNodes?: { path: string; hostPath?: string }[] };
  }[];
}

/** Resolves `<kind>=<name>` against the spec files in a CDI directory, the way a runtime does. */
function resolveCdiName(dir: string, qualified: string): WrittenCdiSpec["devices"][number] | undefined {
  const [kind, name] = qualified.split("=");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
    const spec = JSON.parse(readFileSync(join(dir, file), "utf8")) as WrittenCdiSpec;
    if (spec.kind !== kind) continue;
    const device = spec.devices.find((d) => d.name === name);
    if (device) return device;
  }
  return undefined;
}

describe("CDI specs", () => {
  const kind = "vendor.example/foo";

  it("writes a spec whose devices resolve every CDI name Allocate returns, and keeps it on stop", async () => {
    harness = await startHarness(
      makeConfig({
        cdi: { enabled: true, kind },
        sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false },
      }),
    );
    const r = await registered(harness);
    const specPath = join(harness.cdiDir, "vendor.example-foo.json");
    expect(existsSync(specPath), `${specPath} after registration`).toBe(true);
    const spec = JSON.parse(readFileSync(specPath, "utf8")) as WrittenCdiSpec;
    // Env-only edits and names starting with a letter need nothing newer than the earliest version.
    expect(spec).toMatchObject({ cdiVersion: "0.3.0", kind });
    expect(spec.devices.map((d) => d.name)).toEqual(["foo-0", "foo-1", "foo-2", "foo-3"]);

    const res: AllocateResponse = await call(r.client.allocate.bind(r.client), {
      containerRequests: [{ devicesIds: ["foo-0::1", "foo-3::0"] }, { devicesIds: ["foo-2::1"] }],
    });
    const names = res.containerResponses.flatMap((c) => c.cdiDevices.map((d) => d.name));
    expect(names).toHaveLength(3);
    for (const name of names) {
      const device = resolveCdiName(harness.cdiDir, name);
      expect(device, `${name} in ${harness.cdiDir}`).toBeDefined();
      expect(device!.containerEdits.env?.length ?? 0).toBeGreaterThan(0);
    }

    // No leftover temp files: a runtime reading the directory sees only whole specs.
    expect(readdirSync(harness.cdiDir)).toEqual(["vendor.example-foo.json"]);
    await harness.runtime.stop();
    // A pod admitted through Allocate names these devices for as long as it lives (containerd resolves
    // them again at every container start), even once this plugin is gone, e.g. switched to DRA.
    for (const name of names) expect(resolveCdiName(harness.cdiDir, name), name).toBeDefined();
  });

  it("writes the CDI spec once its directory can be written, without waiting for a device change", async () => {
    // The CDI directory cannot be made at first: a file stands where its parent should be.
    const tmp = tempDir("cdi-blocked");
    const blocker = join(tmp.dir, "blocked");
    writeFileSync(blocker, "not a directory");
    const cdiDir = join(blocker, "cdi");
    harness = await startHarness(makeConfig({ cdi: { enabled: true, kind: "vendor.example/foo" } }), {
      cdiDir,
    });
    await registered(harness);
    expect(existsSync(cdiDir)).toBe(false);
    unlinkSync(blocker);
    // The runtime retries with backoff (1 s first); no device changed meanwhile.
    await waitFor("the CDI spec to be written", () => existsSync(join(cdiDir, "vendor.example-foo.json")), {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    await harness.close();
    harness = undefined;
    tmp.cleanup();
  });

  it("answers an undecodable request with INVALID_ARGUMENT, not grpc-js's INTERNAL", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    // A raw client, so the bytes are ours: 0x0a 0xff… is a length-delimited field longer than the body.
    const raw = new grpc.Client(`unix://${join(harness.dir, r.endpoint)}`, grpc.credentials.createInsecure());
    const err = await new Promise<grpc.ServiceError>((resolve, reject) =>
      raw.makeUnaryRequest(
        "/v1beta1.DevicePlugin/Allocate",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0x01, 0x41]),
        (e: grpc.ServiceError | null) => (e ? resolve(e) : reject(new Error("expected an error"))),
      ),
    );
    raw.close();
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toMatch(/^malformed request: /);
  });

  it("names at most ten of 5000 unknown ids, and the kubelet's connection keeps serving", async () => {
    harness = await startHarness(makeConfig({}));
    const r = await registered(harness);
    const dp = new DevicePluginClient(
      `unix://${join(harness.dir, r.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    const ids = Array.from({ length: 5000 }, (_, i) => `nope-${i}`);
    const err = await callError(dp.allocate.bind(dp), { containerRequests: [{ devicesIds: ids }] });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain('"nope-9" and 4990 more');
    expect(err.details.length).toBeLessThan(500);
    // A megabyte of details used to reset the whole HTTP/2 connection; the next call on it must work.
    const options = await call(dp.getDevicePluginOptions.bind(dp), {});
    expect(options).toBeDefined();
    dp.close();
  });

  it("writes nothing when CDI is disabled", async () => {
    harness = await startHarness(makeConfig({}));
    await registered(harness);
    expect(existsSync(harness.cdiDir) ? readdirSync(harness.cdiDir) : []).toEqual([]);
  });

  it("keeps the spec in step with the DevFS backend's devices, with device nodes, and removes it when none is left", async () => {
    const tmp = tempDir("cdi-devfs");
    try {
      const devDir = join(tmp.dir, "dev");
      mkdirSync(devDir);
      for (const n of [0, 1]) writeFileSync(join(devDir, `ttyX${n}`), "");
      const devFS = {
        root: tmp.dir,
        paths: [{ glob: "/dev/ttyX*", type: "File" as const, permissions: "rw", maxContainersPerDevice: 1 }],
      };
      const backend = new DevFSDeviceBackend(devFS, {
        logger: pino({ level: "silent" }),
        rescanIntervalMs: 50,
        removedGracePeriodMs: 0,
      });
      harness = await startHarness(
        makeConfig({
          backend: { type: "DevFS", devFS },
          cdi: { enabled: true, kind: "vendor.example/serial" },
        }),
        { backend },
      );
      const h = harness;
      await registered(h);
      const specPath = join(h.cdiDir, "vendor.example-serial.json");
      const specNow = (): WrittenCdiSpec | undefined =>
        existsSync(specPath) ? (JSON.parse(readFileSync(specPath, "utf8")) as WrittenCdiSpec) : undefined;
      const first = specNow();
      // deviceNodes[].hostPath is a 0.5.0 feature.
      expect(first?.cdiVersion).toBe("0.5.0");
      expect(first?.devices).toEqual([
        {
          name: "ttyX0",
          containerEdits: {
            deviceNodes: [{ path: "/dev/ttyX0", hostPath: join(tmp.dir, "dev/ttyX0"), permissions: "rw" }],
          },
        },
        {
          name: "ttyX1",
          containerEdits: {
            deviceNodes: [{ path: "/dev/ttyX1", hostPath: join(tmp.dir, "dev/ttyX1"), permissions: "rw" }],
          },
        },
      ]);

      unlinkSync(join(devDir, "ttyX1"));
      await waitFor(
        "ttyX1 to leave the CDI spec",
        (observe) => {
          const names = specNow()?.devices.map((d) => d.name);
          observe(names);
          return names?.length === 1 && names[0] === "ttyX0";
        },
        { timeoutMs: 5_000, intervalMs: 20 },
      );
      unlinkSync(join(devDir, "ttyX0"));
      await waitFor(
        "the CDI spec to go with the last device",
        (observe) => {
          observe(specNow());
          return !existsSync(specPath);
        },
        { timeoutMs: 5_000, intervalMs: 20 },
      );
    } finally {
      await harness?.close();
      harness = undefined;
      tmp.cleanup();
    }
  });
});

describe("GetPreferredAllocation", () => {
  const layout = {
    backend: { type: "Mock" as const, mock: { devices: 4, idPrefix: "foo", numaNodes: 2 } },
    sharing: { strategy: "TimeSlicing" as const, replicas: 2, failRequestsGreaterThanOne: false },
  };
  const all = [
    "foo-0::0",
    "foo-0::1",
    "foo-1::0",
    "foo-1::1",
    "foo-2::0",
    "foo-2::1",
    "foo-3::0",
    "foo-3::1",
  ];

  async function prefer(
    policy: "Packed" | "Spread" | "NUMAAligned",
    available: string[],
    must: string[],
    size: number,
  ) {
    harness = await startHarness(makeConfig({ ...layout, topology: { allocationPolicy: policy } }));
    const r = await registered(harness);
    const res: PreferredAllocationResponse = await call(r.client.getPreferredAllocation.bind(r.client), {
      containerRequests: [
        { availableDeviceIDs: available, mustIncludeDeviceIDs: must, allocationSize: size },
      ],
    });
    return res.containerResponses[0]!.deviceIDs;
  }

  it("Packed fills one physical device before the next", async () => {
    const ids = await prefer("Packed", all, [], 2);
    expect(new Set(ids.map((id) => id.split("::")[0])).size).toBe(1);
  });

  it("Spread uses distinct physical devices and NUMA nodes first", async () => {
    const ids = await prefer("Spread", all, [], 2);
    const physical = ids.map((id) => Number(id.split("::")[0]!.split("-")[1]));
    expect(new Set(physical).size).toBe(2);
    expect(new Set(physical.map((p) => p % 2)).size).toBe(2);
  });

  it("NUMAAligned keeps the request on one NUMA node and honours must_include", async () => {
    const ids = await prefer("NUMAAligned", all, ["foo-1::0"], 4);
    expect(ids).toHaveLength(4);
    expect(ids).toContain("foo-1::0");
    // NUMA node 1 holds foo-1 and foo-3.
    expect(ids.every((id) => id.startsWith("foo-1::") || id.startsWith("foo-3::"))).toBe(true);
  });

  it("refuses a negative allocation size", async () => {
    harness = await startHarness(makeConfig({ ...layout, topology: { allocationPolicy: "Packed" } }));
    const r = await registered(harness);
    const err = await callError(r.client.getPreferredAllocation.bind(r.client), {
      containerRequests: [{ availableDeviceIDs: all, mustIncludeDeviceIDs: [], allocationSize: -1 }],
    });
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toContain("allocation_size");
  });
});

describe("PreStartContainer", () => {
  /** The mock backend with a pre-start hook whose outcome the test chooses. */
  class PreStartBackend implements DeviceBackend {
    readonly type = "Mock";
    readonly preStartRequired = true;
    readonly calls: string[][] = [];
    mode: "ok" | "fail" | "hang" = "ok";
    constructor(private readonly inner: MockDeviceBackend) {}
    start() {
      return this.inner.start();
    }
    devices() {
      return this.inner.devices();
    }
    subscribe(listener: DeviceListener) {
      return this.inner.subscribe(listener);
    }
    allocate(ids: readonly string[]) {
      return this.inner.allocate(ids);
    }
    cdiContainerEdits(id: string) {
      return this.inner.cdiContainerEdits(id);
    }
    stop() {
      return this.inner.stop();
    }
    preStart(ids: readonly string[], signal: AbortSignal): Promise<void> {
      this.calls.push([...ids]);
      if (this.mode === "fail") return Promise.reject(new Error("firmware not loaded"));
      if (this.mode === "hang") {
        return new Promise((_, reject) =>
          signal.addEventListener("abort", () => reject(new Error("aborted"))),
        );
      }
      return Promise.resolve();
    }
  }

  it("advertises pre_start_required, runs the hook, and answers in time when it fails or hangs", async () => {
    const backend = new PreStartBackend(
      new MockDeviceBackend(
        { devices: 2, idPrefix: "foo", numaNodes: 1, attributes: {} },
        { logger: pino({ level: "silent" }) },
      ),
    );
    harness = await startHarness(makeConfig({}), { backend, preStartTimeoutMs: 300 });
    const r = await registered(harness);
    expect(r.options.preStartRequired).toBe(true);

    await call(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-1"] });
    expect(backend.calls).toEqual([["foo-1"]]);

    backend.mode = "fail";
    const failed = await callError(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-0"] });
    expect(failed.code).toBe(grpc.status.INTERNAL);
    expect(failed.details).toContain("firmware not loaded");

    backend.mode = "hang";
    // The runtime answers by itself after its 300 ms budget; 5 s is a deadline for that, not a measure.
    const answered = callError(r.client.preStartContainer.bind(r.client), { devicesIds: ["foo-0"] });
    const hung = await waitFor("PreStartContainer to answer", () => answered, { timeoutMs: 5_000 });
    expect(hung.code).toBe(grpc.status.DEADLINE_EXCEEDED);
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
