// The DRA plugin's device health stream (KEP-4680) over its real unix socket: a grpc-js client streams
// NodeWatchResources through v1 and v1alpha1 as the kubelet does, the bytes are read with the kubelet's own
// .proto (field numbers and names), a device flipped unhealthy and back arrives on the open stream, the list
// repeats as a heartbeat, and bad requests and dropped clients never stop the plugin.
import * as grpc from "@grpc/grpc-js";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import protobuf from "protobufjs";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { DraNodeDevice } from "../../src/plugin-runtime/dra/devices.js";
import { DraPlugin } from "../../src/plugin-runtime/dra/dra-plugin.js";
import {
  draHealthV1,
  draHealthV1alpha1,
  PluginRegistrationClient,
  type PluginInfo,
} from "../../src/plugin-runtime/proto/index.js";
import { locateUpstreamProtoFiles } from "../../tools/proto/upstream.js";
import { tempDir, waitFor } from "./support.js";

const DRIVER = "health.example.com";
const NODE = "node-h";

const device = (name: string, health: "Healthy" | "Unhealthy" = "Healthy", reason = ""): DraNodeDevice => ({
  name,
  physicalId: name,
  health,
  reason,
  containerEdits: { env: [`DEV=${name}`] },
});

/** The kubelet's own message type, from k8s.io/kubelet's .proto, with its field names kept. */
let upstreamResponse: Record<"v1" | "v1alpha1", protobuf.Type>;

beforeAll(() => {
  const files = locateUpstreamProtoFiles();
  const load = (file: string, pkg: string): protobuf.Type => {
    const root = new protobuf.Root();
    // The files import nothing; keepCase shows the kubelet's own field names.
    protobuf.parse(readFileSync(file, "utf8"), root, { keepCase: true });
    return root.lookupType(`${pkg}.NodeWatchResourcesResponse`);
  };
  upstreamResponse = {
    v1: load(files.draHealthV1, "v1"),
    v1alpha1: load(files.draHealthV1alpha1, "v1alpha1"),
  };
});

let root: { dir: string; cleanup: () => void };
let plugin: DraPlugin;
let devices: DraNodeDevice[];
let registryDir: string;
const closers: (() => void)[] = [];

function startPlugin(heartbeatMs = 60_000): Promise<void> {
  plugin = new DraPlugin({
    driverName: DRIVER,
    nodeName: NODE,
    devices: () => devices,
    claims: { getResourceClaim: () => Promise.resolve(undefined) },
    logger: pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" }),
    pluginDir: join(root.dir, "plugins", DRIVER),
    registryDir,
    cdiDir: join(root.dir, "cdi"),
    healthHeartbeatMs: heartbeatMs,
  });
  return plugin.start();
}

beforeEach(() => {
  root = tempDir("dra-health");
  registryDir = join(root.dir, "reg");
  devices = [device("gpu-0"), device("gpu-1")];
});

afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await plugin?.stop();
  root.cleanup();
});

/**
 * A kubelet-side stream read as raw bytes and decoded with the kubelet's schema: what arrived so far, and
 * the status the stream ended with.
 */
function rawStream(version: "v1" | "v1alpha1", request = Buffer.alloc(0)) {
  const client = new grpc.Client(`unix://${plugin.endpoint!}`, grpc.credentials.createInsecure());
  closers.push(() => client.close());
  const path =
    version === "v1"
      ? draHealthV1.DRAResourceHealthService.nodeWatchResources.path
      : draHealthV1alpha1.DRAResourceHealthService.nodeWatchResources.path;
  const call = client.makeServerStreamRequest(
    path,
    (b: Buffer) => b,
    (b: Buffer) => b,
    request,
    new grpc.Metadata(),
    {},
  );
  const received: Record<string, unknown>[] = [];
  let ended: grpc.StatusObject | undefined;
  call.on("data", (bytes: Buffer) => {
    const type = upstreamResponse[version];
    received.push(type.toObject(type.decode(bytes), { longs: Number, enums: String, defaults: true }));
  });
  call.on("error", () => undefined);
  call.on("status", (status: grpc.StatusObject) => (ended = status));
  closers.push(() => call.cancel());
  return { call, received, ended: () => ended };
}

const entry = (name: string, health: "HEALTHY" | "UNHEALTHY", message = "") => ({
  device: { pool_name: NODE, device_name: name },
  health,
  last_updated_time: expect.any(Number),
  health_check_timeout_seconds: 0,
  message,
});

describe.each(["v1", "v1alpha1"] as const)("DRAResourceHealth %s over the plugin's socket", (version) => {
  beforeEach(() => startPlugin());

  it("sends every device's health at once, named as in the slice, with the kubelet's field names and numbers", async () => {
    devices = [device("gpu-1"), device("gpu-0", "Unhealthy", "ECC errors")];
    const before = Math.floor(Date.now() / 1000);
    const stream = rawStream(version);
    const [first] = await waitFor("the first response", (observe) => {
      observe(stream.received);
      return stream.received.length > 0 ? stream.received : undefined;
    });
    expect(first).toEqual({
      devices: [entry("gpu-0", "UNHEALTHY", "ECC errors"), entry("gpu-1", "HEALTHY")],
    });
    const times = (first!.devices as { last_updated_time: number }[]).map((d) => d.last_updated_time);
    // Unix seconds, not milliseconds.
    for (const t of times) expect(t).toBeGreaterThanOrEqual(before);
    for (const t of times) expect(t).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
  });

  it("sends a device's flip to unhealthy and back on the open stream; a device gone leaves the list", async () => {
    const stream = rawStream(version);
    await waitFor("the first response", () => stream.received.length === 1);
    devices = [device("gpu-0"), device("gpu-1", "Unhealthy", "Overheated")];
    plugin.healthChanged();
    const flipped = await waitFor("gpu-1 unhealthy on the stream", (observe) => {
      observe(stream.received.at(-1));
      return stream.received.length >= 2 ? stream.received[1] : undefined;
    });
    expect(flipped).toEqual({
      devices: [entry("gpu-0", "HEALTHY"), entry("gpu-1", "UNHEALTHY", "Overheated")],
    });

    devices = [device("gpu-1")];
    plugin.healthChanged();
    const back = await waitFor("gpu-1 healthy again, gpu-0 gone", (observe) => {
      observe(stream.received.at(-1));
      return stream.received.length >= 3 ? stream.received[2] : undefined;
    });
    expect(back).toEqual({ devices: [entry("gpu-1", "HEALTHY")] });
    expect(stream.ended()).toBeUndefined();
  });

  it("refuses bytes that are no request with INVALID_ARGUMENT and keeps serving other streams", async () => {
    const bad = rawStream(version, Buffer.from([0x0a, 0xff, 0xff]));
    const status = await waitFor("the bad stream to end", (observe) => {
      observe(bad.received);
      return bad.ended();
    });
    expect(status.code).toBe(grpc.status.INVALID_ARGUMENT);
    // Unknown fields are skipped as proto3 does: a request from a newer kubelet still streams.
    const newer = rawStream(version, Buffer.from([0x08, 0x01]));
    await waitFor("a stream for a request with an unknown field", () => newer.received.length === 1);
    const good = rawStream(version);
    await waitFor("a stream after the bad request", () => good.received.length === 1);
  });

  it("forgets a stream the kubelet cancels, and streams to the next one", async () => {
    const first = rawStream(version);
    await waitFor("the first response", () => first.received.length === 1);
    expect(plugin.health.openStreams).toBe(1);
    first.call.cancel();
    await waitFor("the cancelled stream forgotten", () => plugin.health.openStreams === 0);
    devices = [device("gpu-0", "Unhealthy", "gone bad")];
    plugin.healthChanged();
    const second = rawStream(version);
    const got = await waitFor("the next stream's first response", () => second.received[0]);
    expect(got).toEqual({ devices: [entry("gpu-0", "UNHEALTHY", "gone bad")] });
  });
});

describe("the health stream over time", () => {
  it("repeats the complete list as a heartbeat, keeping each device's time until it changes", async () => {
    await startPlugin(100);
    devices = [device("gpu-0", "Unhealthy", "ECC")];
    const stream = rawStream("v1");
    await waitFor("three responses without a change", (observe) => {
      observe(stream.received.length);
      return stream.received.length >= 3;
    });
    const times = stream.received.map(
      (r) => (r.devices as { last_updated_time: number }[])[0]!.last_updated_time,
    );
    expect(new Set(times).size).toBe(1);
  });

  it("ends open streams when the plugin stops", async () => {
    await startPlugin();
    const stream = rawStream("v1");
    await waitFor("the first response", () => stream.received.length === 1);
    await plugin.stop();
    const status = await waitFor("the stream to end", () => stream.ended());
    expect(status.code).toBe(grpc.status.OK);
  });
});

describe("registration", () => {
  it("lists the health services after the DRAPlugin services in supported_versions", async () => {
    await startPlugin();
    const socket = await waitFor("a registration socket", (observe) => {
      const names = existsSync(registryDir) ? readdirSync(registryDir) : [];
      observe(names);
      return names.find((name) => name.endsWith("-reg.sock"));
    });
    const watcher = new PluginRegistrationClient(
      `unix://${join(registryDir, socket)}`,
      grpc.credentials.createInsecure(),
    );
    closers.push(() => watcher.close());
    const info = await new Promise<PluginInfo>((resolve, reject) =>
      watcher.getInfo({}, (e, r) => (e ? reject(e) : resolve(r))),
    );
    expect(info.supportedVersions).toEqual([
      "v1.DRAPlugin",
      "v1beta1.DRAPlugin",
      "v1.DRAResourceHealth",
      "v1alpha1.DRAResourceHealth",
    ]);
  });
});
