// The CDI specs the plugin runtime writes for its devices (kept in step with the DevFS backend's, none when CDI
// is disabled), and how Allocate answers a request it cannot decode or ids it does not know.
import * as grpc from "@grpc/grpc-js";
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pino } from "pino";
import { DevFSDeviceBackend } from "../../src/plugin-runtime/backends/devfs.js";
import { DevicePluginClient, type AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { makeConfig, startHarness, tempDir, waitFor, type Harness } from "./support.js";
import { call, callError, registered } from "./grpc-calls.js";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

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
