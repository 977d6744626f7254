// The DRA plugin over real unix sockets: a kubelet-side client dials it through v1 and v1beta1, prepares
// and unprepares claims (checking the CDI files written), and registers it through the plugin watcher.
import * as grpc from "@grpc/grpc-js";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type {
  ClaimReference,
  DraResourceClaim,
  ResourceClaimGetter,
} from "../../src/plugin-runtime/dra/claim.js";
import type { DraNodeDevice } from "../../src/plugin-runtime/dra/devices.js";
import { DraPlugin, MAX_CLAIMS_PER_REQUEST, type DraCall } from "../../src/plugin-runtime/dra/dra-plugin.js";
import {
  draV1,
  draV1beta1,
  PluginRegistrationClient,
  type PluginInfo,
} from "../../src/plugin-runtime/proto/index.js";
import { tempDir, waitFor } from "./support.js";

const DRIVER = "foo.example.com";
const KIND = `${DRIVER}/device`;
const NODE = "node-1";

/** The claims the fake API server holds, by namespace/name; tests edit it directly. */
class FakeClaims implements ResourceClaimGetter {
  readonly objects = new Map<string, DraResourceClaim>();
  reads = 0;
  failWith: Error | undefined;
  /** While set, reads answer only once it resolves (a slow API server). */
  gate: Promise<void> | undefined;

  async getResourceClaim(ref: ClaimReference): Promise<DraResourceClaim | undefined> {
    this.reads++;
    await this.gate;
    if (this.failWith) throw this.failWith;
    return this.objects.get(`${ref.namespace}/${ref.name}`);
  }

  add(
    namespace: string,
    name: string,
    uid: string,
    results: { request: string; driver?: string; pool?: string; device: string }[],
  ): ClaimReference {
    this.objects.set(`${namespace}/${name}`, {
      metadata: { namespace, name, uid },
      status: {
        allocation: {
          devices: {
            results: results.map((r) => ({
              request: r.request,
              driver: r.driver ?? DRIVER,
              pool: r.pool ?? NODE,
              device: r.device,
            })),
          },
        },
      },
    });
    return { namespace, name, uid };
  }
}

const device = (name: string, health: "Healthy" | "Unhealthy" = "Healthy", reason = ""): DraNodeDevice => ({
  name,
  physicalId: name,
  health,
  reason,
  containerEdits:
    name === "foo-1"
      ? { deviceNodes: [{ path: "/dev/foo1", permissions: "rw" }], env: ["FOO_1=foo-1"] }
      : { env: [`${name.toUpperCase().replace(/-/g, "_")}=${name}`] },
});

type Unary<Req, Res> = (
  req: Req,
  md: grpc.Metadata,
  opts: Partial<grpc.CallOptions>,
  cb: (e: grpc.ServiceError | null, r: Res) => void,
) => unknown;

function call<Req, Res>(fn: Unary<Req, Res>, req: Req): Promise<Res> {
  return new Promise((resolve, reject) =>
    fn(req, new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );
}

/** The kubelet's side: one client per API version, both on the plugin's one socket. */
interface KubeletClient {
  prepare(claims: ClaimReference[]): Promise<draV1.NodePrepareResourcesResponse>;
  unprepare(claims: ClaimReference[]): Promise<draV1.NodeUnprepareResourcesResponse>;
  close(): void;
}

function kubeletClient(version: "v1" | "v1beta1", endpoint: string): KubeletClient {
  const address = `unix://${endpoint}`;
  if (version === "v1") {
    const client = new draV1.DRAPluginClient(address, grpc.credentials.createInsecure());
    return {
      prepare: (claims) => call(client.nodePrepareResources.bind(client), { claims }),
      unprepare: (claims) => call(client.nodeUnprepareResources.bind(client), { claims }),
      close: () => client.close(),
    };
  }
  const client = new draV1beta1.DRAPluginClient(address, grpc.credentials.createInsecure());
  return {
    prepare: (claims) => call(client.nodePrepareResources.bind(client), { claims }),
    unprepare: (claims) => call(client.nodeUnprepareResources.bind(client), { claims }),
    close: () => client.close(),
  };
}

let root: { dir: string; cleanup: () => void };
let plugin: DraPlugin;
let claims: FakeClaims;
let devices: DraNodeDevice[];
let cdiDir: string;
let registryDir: string;
/** What the plugin said of each call it answered (onAnswered), in order. */
let answered: { method: DraCall; seconds: number }[];
/** Clients to close after each test. */
const closers: (() => void)[] = [];

beforeEach(async () => {
  root = tempDir("dra");
  cdiDir = join(root.dir, "cdi");
  registryDir = join(root.dir, "reg");
  claims = new FakeClaims();
  answered = [];
  devices = [device("foo-0"), device("foo-1"), device("foo-2", "Unhealthy", "ECC errors")];
  plugin = new DraPlugin({
    driverName: DRIVER,
    nodeName: NODE,
    devices: () => devices,
    claims,
    logger: pino({ level: "silent" }),
    pluginDir: join(root.dir, "plugins", DRIVER),
    registryDir,
    cdiDir,
    onAnswered: (method, seconds) => answered.push({ method, seconds }),
  });
  await plugin.start();
});

afterEach(async () => {
  for (const close of closers.splice(0)) close();
  await plugin.stop();
  root.cleanup();
});

const cdiFiles = (): string[] => (existsSync(cdiDir) ? readdirSync(cdiDir).sort() : []);
const readSpec = (file: string): unknown => JSON.parse(readFileSync(join(cdiDir, file), "utf8"));

describe.each(["v1", "v1beta1"] as const)("DRAPlugin %s over the plugin's unix socket", (version) => {
  let kubelet: KubeletClient;
  beforeEach(() => {
    kubelet = kubeletClient(version, plugin.endpoint!);
    closers.push(() => kubelet.close());
  });

  it("prepares a claim: CDI spec file per claim, CDI ids per device; unprepare removes the file", async () => {
    const uid = "4f1b7c2e-0d3a-4b5c-8e9f-a1b2c3d4e5f6";
    const ref = claims.add("ml", "gpus", uid, [
      { request: "gpu", device: "foo-0" },
      { request: "accel/large", device: "foo-1" },
    ]);

    const prepared = await kubelet.prepare([ref]);

    const file = `${DRIVER}-device_${uid}.json`;
    expect(prepared).toEqual({
      claims: {
        [uid]: {
          error: "",
          devices: [
            {
              requestNames: ["gpu"],
              poolName: NODE,
              deviceName: "foo-0",
              cdiDeviceIds: [`${KIND}=${uid}-foo-0`],
            },
            // A subrequest's result answers for its parent request, as upstream drivers report it.
            {
              requestNames: ["accel"],
              poolName: NODE,
              deviceName: "foo-1",
              cdiDeviceIds: [`${KIND}=${uid}-foo-1`],
            },
          ],
        },
      },
    });
    expect(cdiFiles()).toEqual([file]);
    expect(readSpec(file)).toEqual({
      // A claim uid starting with a digit makes the device names need CDI 0.5.0.
      cdiVersion: "0.5.0",
      kind: KIND,
      devices: [
        { name: `${uid}-foo-0`, containerEdits: { env: ["FOO_0=foo-0"] } },
        {
          name: `${uid}-foo-1`,
          containerEdits: { deviceNodes: [{ path: "/dev/foo1", permissions: "rw" }], env: ["FOO_1=foo-1"] },
        },
      ],
    });

    const unprepared = await kubelet.unprepare([ref]);
    expect(unprepared).toEqual({ claims: { [uid]: { error: "" } } });
    expect(cdiFiles()).toEqual([]);
  });

  it("answers a retry the same and rewrites the same file; unprepare is idempotent", async () => {
    const ref = claims.add("default", "one", "uid-a", [{ request: "r", device: "foo-0" }]);
    const first = await kubelet.prepare([ref]);
    const content = readFileSync(join(cdiDir, `${DRIVER}-device_uid-a.json`), "utf8");
    const second = await kubelet.prepare([ref]);

    expect(second).toEqual(first);
    expect(first.claims["uid-a"]?.error).toBe("");
    expect(cdiFiles()).toEqual([`${DRIVER}-device_uid-a.json`]);
    expect(readFileSync(join(cdiDir, `${DRIVER}-device_uid-a.json`), "utf8")).toBe(content);
    expect(readSpec(`${DRIVER}-device_uid-a.json`)).toMatchObject({ cdiVersion: "0.3.0", kind: KIND });

    expect(await kubelet.unprepare([ref])).toEqual({ claims: { "uid-a": { error: "" } } });
    expect(await kubelet.unprepare([ref])).toEqual({ claims: { "uid-a": { error: "" } } });
    expect(cdiFiles()).toEqual([]);
  });

  it("refuses a claim naming an unknown device, an unhealthy one, or one of another node's pool, naming the device", async () => {
    const unknown = claims.add("default", "unknown", "uid-unknown", [
      { request: "r", device: "foo-0" },
      { request: "r", device: "foo-9" },
    ]);
    const unhealthy = claims.add("default", "sick", "uid-sick", [{ request: "r", device: "foo-2" }]);
    const elsewhere = claims.add("default", "far", "uid-far", [
      { request: "r", device: "foo-0", pool: "node-2" },
    ]);
    const good = claims.add("default", "good", "uid-good", [{ request: "r", device: "foo-1" }]);

    const answer = await kubelet.prepare([unknown, unhealthy, elsewhere, good]);

    expect(Object.keys(answer.claims).sort()).toEqual(["uid-far", "uid-good", "uid-sick", "uid-unknown"]);
    expect(answer.claims["uid-unknown"]).toEqual({
      devices: [],
      error: `ResourceClaim default/unknown: device "foo-9" is not a device of ${DRIVER} on ${NODE}`,
    });
    expect(answer.claims["uid-sick"]).toEqual({
      devices: [],
      error: 'ResourceClaim default/sick: device "foo-2" is unhealthy: ECC errors',
    });
    expect(answer.claims["uid-far"]).toEqual({
      devices: [],
      error: `ResourceClaim default/far: device "foo-0" is in pool "node-2", not this node's pool ${NODE}`,
    });
    expect(answer.claims["uid-good"]?.error).toBe("");
    // Only the good claim got a file.
    expect(cdiFiles()).toEqual([`${DRIVER}-device_uid-good.json`]);
  });

  it("skips other drivers' results, as upstream drivers do; a claim with none of ours gets no devices and no file", async () => {
    const mixed = claims.add("default", "mixed", "uid-mixed", [
      { request: "a", device: "foo-0" },
      { request: "b", device: "gpu-0", driver: "gpu.other.example" },
    ]);
    const foreign = claims.add("default", "foreign", "uid-foreign", [
      { request: "b", device: "gpu-0", driver: "gpu.other.example" },
    ]);

    const answer = await kubelet.prepare([mixed, foreign]);

    expect(answer.claims["uid-mixed"]).toEqual({
      devices: [
        {
          requestNames: ["a"],
          poolName: NODE,
          deviceName: "foo-0",
          cdiDeviceIds: [`${KIND}=uid-mixed-foo-0`],
        },
      ],
      error: "",
    });
    expect(answer.claims["uid-foreign"]).toEqual({ devices: [], error: "" });
    expect(cdiFiles()).toEqual([`${DRIVER}-device_uid-mixed.json`]);
    expect(readSpec(`${DRIVER}-device_uid-mixed.json`)).toMatchObject({
      devices: [{ name: "uid-mixed-foo-0" }],
    });
  });

  it("refuses a claim that was replaced (uid differs), one not found, not allocated, or unreadable", async () => {
    claims.add("default", "replaced", "uid-new", [{ request: "r", device: "foo-0" }]);
    claims.objects.set("default/pending", {
      metadata: { namespace: "default", name: "pending", uid: "uid-pending" },
    });
    const answer = await kubelet.prepare([
      { namespace: "default", name: "replaced", uid: "uid-old" },
      { namespace: "default", name: "missing", uid: "uid-missing" },
      { namespace: "default", name: "pending", uid: "uid-pending" },
    ]);
    expect(answer.claims["uid-old"]?.error).toBe(
      'ResourceClaim default/replaced has uid "uid-new", not uid-old: it was replaced',
    );
    expect(answer.claims["uid-missing"]?.error).toBe(
      "ResourceClaim default/missing (uid uid-missing) not found",
    );
    expect(answer.claims["uid-pending"]?.error).toBe("ResourceClaim default/pending is not allocated");

    claims.failWith = new Error("connection refused");
    const unreadable = await kubelet.prepare([{ namespace: "default", name: "replaced", uid: "uid-new" }]);
    expect(unreadable.claims["uid-new"]?.error).toBe(
      "cannot read ResourceClaim default/replaced (uid uid-new): connection refused",
    );
    expect(cdiFiles()).toEqual([]);
  });

  it("answers empty and malformed requests without failing the call or the plugin", async () => {
    expect(await kubelet.prepare([])).toEqual({ claims: {} });
    expect(await kubelet.unprepare([])).toEqual({ claims: {} });

    const answer = await kubelet.prepare([
      { namespace: "", name: "", uid: "" },
      { namespace: "default", name: "x", uid: "../../etc/passwd" },
    ]);
    expect(answer.claims[""]?.error).toBe("claim reference has no namespace, name, uid");
    expect(answer.claims["../../etc/passwd"]?.error).toBe('claim uid "../../etc/passwd" is not a uid');
    const unprepared = await kubelet.unprepare([{ namespace: "", name: "", uid: "../x" }]);
    expect(unprepared.claims["../x"]?.error).toBe('claim uid "../x" is not a uid');
    // Nothing was read for references that name no claim.
    expect(claims.reads).toBe(0);

    // Bytes that are not a request at all: INVALID_ARGUMENT, and the plugin keeps serving.
    const raw = new grpc.Client(`unix://${plugin.endpoint!}`, grpc.credentials.createInsecure());
    const path =
      version === "v1"
        ? draV1.DRAPluginService.nodePrepareResources.path
        : draV1beta1.DRAPluginService.nodePrepareResources.path;
    const error = await new Promise<grpc.ServiceError>((resolve, reject) =>
      raw.makeUnaryRequest(
        path,
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff]),
        new grpc.Metadata(),
        { deadline: Date.now() + 10_000 },
        (e) => (e ? resolve(e) : reject(new Error("expected an error"))),
      ),
    );
    raw.close();
    expect(error.code).toBe(grpc.status.INVALID_ARGUMENT);

    const ref = claims.add("default", "after", "uid-after", [{ request: "r", device: "foo-0" }]);
    expect((await kubelet.prepare([ref])).claims["uid-after"]?.error).toBe("");
  });

  it("tells how long each call took once it is answered, a slow claim read included; refused calls not", async () => {
    const ref = claims.add("default", "timed", "uid-timed", [{ request: "r", device: "foo-0" }]);
    let release = (): void => undefined;
    claims.gate = new Promise<void>((resolve) => (release = resolve));
    const started = performance.now();
    const preparing = kubelet.prepare([ref]);
    await waitFor("the claim read to start", () => claims.reads === 1, { intervalMs: 5 });
    expect(answered).toEqual([]);
    release();
    expect((await preparing).claims["uid-timed"]?.error).toBe("");
    const waited = (performance.now() - started) / 1000;
    await kubelet.unprepare([ref]);
    expect(answered.map((a) => a.method)).toEqual(["NodePrepareResources", "NodeUnprepareResources"]);
    expect(answered[0]!.seconds).toBeGreaterThan(0);
    expect(answered[0]!.seconds).toBeLessThanOrEqual(waited);
    expect(answered[1]!.seconds).toBeGreaterThan(0);

    const tooMany = Array.from({ length: MAX_CLAIMS_PER_REQUEST + 1 }, (_, i) => ({
      namespace: "default",
      name: `c${i}`,
      uid: `uid-${i}`,
    }));
    await expect(kubelet.prepare(tooMany)).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(answered).toHaveLength(2);
  });

  it("unprepare removes only the files of the claims it names", async () => {
    const a = claims.add("default", "a", "uid-a", [{ request: "r", device: "foo-0" }]);
    const b = claims.add("default", "b", "uid-b", [{ request: "r", device: "foo-1" }]);
    await kubelet.prepare([a, b]);
    // Files that are not ours for these claims: another driver's, another kind's, a static spec.
    const others = ["gpu.other.example-device_uid-a.json", "foo.example.com-other_uid-a.json", "vendor.json"];
    for (const name of others) writeFileSync(join(cdiDir, name), "{}\n");

    expect(await kubelet.unprepare([a])).toEqual({ claims: { "uid-a": { error: "" } } });

    expect(cdiFiles()).toEqual([...others, `${DRIVER}-device_uid-b.json`].sort());
  });
});

describe("registration through the plugin watcher", () => {
  it("serves GetInfo as a DRAPlugin with the endpoint and both services, and records the kubelet's verdict", async () => {
    const socket = await waitFor(
      "a registration socket in plugins_registry",
      (observe) => {
        const names = existsSync(registryDir) ? readdirSync(registryDir) : [];
        observe(names);
        return names.find((name) => name.endsWith("-reg.sock"));
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    expect(join(registryDir, socket)).toBe(plugin.registrationSocket);
    const watcher = new PluginRegistrationClient(
      `unix://${join(registryDir, socket)}`,
      grpc.credentials.createInsecure(),
    );
    closers.push(() => watcher.close());

    const info: PluginInfo = await call(watcher.getInfo.bind(watcher), {});
    expect(info).toEqual({
      type: "DRAPlugin",
      name: DRIVER,
      endpoint: plugin.endpoint,
      supportedVersions: [
        "v1.DRAPlugin",
        "v1beta1.DRAPlugin",
        "v1.DRAResourceHealth",
        "v1alpha1.DRAResourceHealth",
      ],
    });
    // The endpoint is an absolute socket path in the driver's plugin directory that serves both versions.
    expect(info.endpoint.startsWith(join(root.dir, "plugins", DRIVER) + "/")).toBe(true);
    for (const version of ["v1", "v1beta1"] as const) {
      const kubelet = kubeletClient(version, info.endpoint);
      closers.push(() => kubelet.close());
      expect(await kubelet.prepare([])).toEqual({ claims: {} });
    }

    expect(plugin.registrationStatus()).toBeUndefined();
    await call(watcher.notifyRegistrationStatus.bind(watcher), {
      pluginRegistered: false,
      error: "version skew",
    });
    expect(plugin.registrationStatus()).toEqual({ registered: false, error: "version skew" });
    await call(watcher.notifyRegistrationStatus.bind(watcher), { pluginRegistered: true, error: "" });
    expect(plugin.registrationStatus()).toEqual({ registered: true, error: "" });
  });

  it("removes both sockets on stop", async () => {
    const endpoint = plugin.endpoint!;
    const registration = plugin.registrationSocket!;
    expect(existsSync(endpoint) && existsSync(registration)).toBe(true);
    await plugin.stop();
    expect(existsSync(endpoint)).toBe(false);
    expect(existsSync(registration)).toBe(false);
  });
});
