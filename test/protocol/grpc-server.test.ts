// The plugin's own gRPC layer (src/plugin-runtime/grpc, ADR 0008) against grpc-js, the client the protocol
// tier drives the plugin with and the library the plugin used before, and against raw HTTP/2 for what no
// well-behaved client sends: every status, trailer and limit the layer promises.
import * as grpc from "@grpc/grpc-js";
import * as http2 from "node:http2";
import { connect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GrpcError, unaryCall } from "../../src/plugin-runtime/grpc/client.js";
import { GrpcServer, type ServerWritableStream } from "../../src/plugin-runtime/grpc/server.js";
import {
  AllocateRequest,
  DevicePluginClient,
  DevicePluginService,
  RegistrationService,
  type Empty,
  type ListAndWatchResponse,
} from "../../src/plugin-runtime/proto/index.js";
import { call, callError } from "./grpc-calls.js";
import { tempDir, waitFor } from "./support.js";

const { dir, cleanup } = tempDir("dpo-grpc-");
const socket = join(dir, "s.sock");
const server = new GrpcServer();
const streams = new Set<ServerWritableStream<Empty, ListAndWatchResponse>>();
/** What the streaming handler saw end: `cancelled` and `close` in order, per stream. */
const ended: string[] = [];
/** Allocate's unanswered calls, by the first id of the request: tests answer or watch them. */
const pending = new Map<string, { cancelled: () => boolean; answer: (details: string) => void }>();
let client: DevicePluginClient;

beforeAll(async () => {
  server.addService(DevicePluginService, {
    getDevicePluginOptions: (_call, cb) =>
      cb(null, { preStartRequired: true, getPreferredAllocationAvailable: false }),
    listAndWatch: (stream) => {
      streams.add(stream);
      stream.on("cancelled", () => ended.push("cancelled"));
      stream.on("close", () => {
        ended.push("close");
        streams.delete(stream);
      });
      stream.write({ devices: [{ ID: "a", health: "Healthy" }] });
    },
    getPreferredAllocation: (_call, cb) =>
      cb({ code: grpc.status.FAILED_PRECONDITION, details: "nope: 100% ☃\n" }),
    allocate: (c, cb) => {
      const id = c.request.containerRequests[0]?.devicesIds[0] ?? "";
      if (id === "now")
        return cb(null, {
          containerResponses: [
            { envs: { A: "1" }, mounts: [], devices: [], annotations: {}, cdiDevices: [] },
          ],
        });
      if (id === "throw") throw new Error("handler bug");
      pending.set(id, {
        cancelled: () => c.cancelled,
        answer: (details) => cb({ code: grpc.status.ABORTED, details }),
      });
    },
    preStartContainer: (_call, cb) => cb(null, {}),
  });
  await server.listen(socket);
  client = new DevicePluginClient(`unix://${socket}`, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client.close();
  await new Promise<void>((resolve) => server.tryShutdown(resolve));
  cleanup();
});

/** A raw HTTP/2 request to the server: the response's headers, trailers and body. */
async function raw(
  headers: http2.OutgoingHttpHeaders,
  body: Buffer,
): Promise<{
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders | undefined;
  body: Buffer;
}> {
  const session = http2.connect("http://localhost", {
    createConnection: () => connect(socket),
  });
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({
        ":method": "POST",
        "content-type": "application/grpc",
        te: "trailers",
        ...headers,
      });
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      req.on("response", (h) => (head = h));
      req.on("trailers", (t: http2.IncomingHttpHeaders) => {
        trailers = t;
      });
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("error", reject);
      // A server that never answers fails the test here instead of holding the session open.
      const timer = setTimeout(() => {
        reject(new Error(`no answer on ${String(headers[":path"])} within 5 s`));
        session.destroy();
      }, 5_000);
      req.on("close", () => clearTimeout(timer));
      req.on("close", () => resolve({ headers: head, trailers, body: Buffer.concat(chunks) }));
      req.end(body);
    });
  } finally {
    session.close();
  }
}

const framed = (message: Uint8Array, flag = 0): Buffer => {
  const head = Buffer.alloc(5);
  head.writeUInt8(flag, 0);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
};
const allocateBytes = (id: string): Uint8Array =>
  AllocateRequest.encode({ containerRequests: [{ devicesIds: [id] }] }).finish();

describe("the plugin's gRPC server, called by grpc-js", () => {
  it("answers a unary call with its message and OK", async () => {
    expect(await call(client.getDevicePluginOptions.bind(client), {})).toEqual({
      preStartRequired: true,
      getPreferredAllocationAvailable: false,
    });
    const res = await call(client.allocate.bind(client), { containerRequests: [{ devicesIds: ["now"] }] });
    expect(res.containerResponses[0]?.envs).toEqual({ A: "1" });
  });

  it("gives a handler's error its code and its message, percent-encoded on the wire and read back whole", async () => {
    const err = await callError(client.getPreferredAllocation.bind(client), { containerRequests: [] });
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err.details).toBe("nope: 100% ☃\n");
    const r = await raw(
      { ":path": "/v1beta1.DevicePlugin/GetPreferredAllocation" },
      framed(new Uint8Array()),
    );
    // Trailers-Only: the status in the only HEADERS frame, no DATA, no trailers.
    expect(r.headers).toMatchObject({
      ":status": 200,
      "content-type": "application/grpc+proto",
      "grpc-status": "9",
    });
    expect(r.headers["grpc-message"]).toBe("nope: 100%25 %E2%98%83%0A");
    expect(r.trailers).toBeUndefined();
    expect(r.body.length).toBe(0);
  });

  it("answers a handler that throws with UNKNOWN and keeps serving", async () => {
    const err = await callError(client.allocate.bind(client), {
      containerRequests: [{ devicesIds: ["throw"] }],
    });
    expect(err.code).toBe(grpc.status.UNKNOWN);
    expect(err.details).toContain("handler bug");
    await call(client.preStartContainer.bind(client), { devicesIds: [] });
  });

  it("answers an unknown method UNIMPLEMENTED, and a body that is no message INVALID_ARGUMENT", async () => {
    const r = await raw({ ":path": "/v1beta1.DevicePlugin/Nope" }, framed(new Uint8Array()));
    expect(r.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    const bad = await raw(
      { ":path": "/v1beta1.DevicePlugin/Allocate" },
      framed(Buffer.from([0x0a, 0xff, 0xff])),
    );
    expect(bad.headers["grpc-status"]).toBe(String(grpc.status.INVALID_ARGUMENT));
    expect(decodeURIComponent(String(bad.headers["grpc-message"]))).toMatch(/^malformed request: /);
  });

  it("refuses a compressed message, a second request message and none at all, as grpc-js did", async () => {
    const path = { ":path": "/v1beta1.DevicePlugin/Allocate" };
    const gzip = await raw({ ...path, "grpc-encoding": "gzip" }, framed(allocateBytes("now"), 1));
    expect(gzip.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    const flagOnly = await raw(path, framed(allocateBytes("now"), 1));
    expect(flagOnly.headers["grpc-status"]).toBe(String(grpc.status.INTERNAL));
    const two = await raw(path, Buffer.concat([framed(allocateBytes("now")), framed(allocateBytes("now"))]));
    expect(two.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
    const none = await raw(path, Buffer.alloc(0));
    expect(none.headers["grpc-status"]).toBe(String(grpc.status.UNIMPLEMENTED));
  });

  it("answers a request over 4 MiB RESOURCE_EXHAUSTED, read from its length prefix alone", async () => {
    const head = Buffer.alloc(5);
    head.writeUInt32BE(4 * 1024 * 1024 + 1, 1);
    const r = await raw({ ":path": "/v1beta1.DevicePlugin/Allocate" }, head);
    expect(r.headers["grpc-status"]).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
    const big = await callError(client.allocate.bind(client), {
      containerRequests: [{ devicesIds: ["x".repeat(4 * 1024 * 1024)] }],
    });
    expect(big.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it("honours grpc-timeout: DEADLINE_EXCEEDED, and the handler sees its call cancelled", async () => {
    const err = await new Promise<grpc.ServiceError>((resolve) =>
      client.allocate(
        { containerRequests: [{ devicesIds: ["slow"] }] },
        new grpc.Metadata(),
        { deadline: Date.now() + 200 },
        (e) => resolve(e!),
      ),
    );
    expect(err.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const slow = pending.get("slow")!;
    await waitFor("the handler to see the deadline", () => slow.cancelled() || undefined, {
      timeoutMs: 5_000,
    });
    slow.answer("too late"); // Ignored: the call has its status.
    // The server's own timer, not the client's: a raw client that never gives up gets the status from it.
    const raw100 = await raw(
      { ":path": "/v1beta1.DevicePlugin/Allocate", "grpc-timeout": "100m" },
      framed(allocateBytes("raw-slow")),
    );
    expect(raw100.headers["grpc-status"]).toBe(String(grpc.status.DEADLINE_EXCEEDED));
    expect(pending.get("raw-slow")?.cancelled()).toBe(true);
    const bad = await raw(
      { ":path": "/v1beta1.DevicePlugin/Allocate", "grpc-timeout": "soon" },
      framed(allocateBytes("now")),
    );
    expect(bad.headers["grpc-status"]).toBe(String(grpc.status.INTERNAL));
  });

  it("ends a unary handler's call when the client cancels it", async () => {
    const c = client.allocate({ containerRequests: [{ devicesIds: ["cancel-me"] }] }, () => undefined);
    await waitFor("the call to reach its handler", () => pending.get("cancel-me"), { timeoutMs: 5_000 });
    c.cancel();
    await waitFor(
      "the handler to see the cancellation",
      () => pending.get("cancel-me")!.cancelled() || undefined,
      {
        timeoutMs: 5_000,
      },
    );
  });

  it("streams to a client until it cancels, then emits cancelled and close; end() sends OK in trailers", async () => {
    const first = client.listAndWatch({});
    const got: ListAndWatchResponse[] = [];
    first.on("data", (m: ListAndWatchResponse) => got.push(m));
    first.on("error", () => undefined);
    await waitFor("the first list", () => got[0], { timeoutMs: 5_000 });
    expect(got[0]?.devices).toEqual([{ ID: "a", health: "Healthy" }]);
    for (const s of streams) s.write({ devices: [] });
    await waitFor("the second list", () => got[1], { timeoutMs: 5_000 });
    first.cancel();
    await waitFor("the stream to close", () => (ended.length >= 2 ? ended : undefined), { timeoutMs: 5_000 });
    expect(ended).toEqual(["cancelled", "close"]);

    const second = client.listAndWatch({});
    second.on("data", () => undefined);
    const status = new Promise<grpc.StatusObject>((resolve) => second.on("status", resolve));
    await waitFor("the second stream", () => (streams.size === 1 ? true : undefined), { timeoutMs: 5_000 });
    for (const s of streams) s.end();
    expect(await status).toMatchObject({ code: grpc.status.OK });
    await waitFor("its close", () => (streams.size === 0 ? true : undefined), { timeoutMs: 5_000 });
    expect(ended).toEqual(["cancelled", "close", "close"]);
  });

  it("answers HTTP/2 PINGs (grpc-go's keepalive) and allows 100 concurrent streams on one connection", async () => {
    const session = http2.connect("http://localhost", {
      createConnection: () => connect(socket),
    });
    try {
      await new Promise((resolve) => session.once("remoteSettings", resolve));
      await new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve())));
      await waitFor(
        "the server's settings",
        () => (session.remoteSettings.maxConcurrentStreams ? true : undefined),
        {
          timeoutMs: 5_000,
        },
      );
      expect(session.remoteSettings.maxConcurrentStreams).toBeGreaterThanOrEqual(100);
    } finally {
      session.close();
    }
  });
});

describe("the plugin's gRPC client, calling grpc-js's server", () => {
  const kubeletSocket = join(dir, "k.sock");
  const kubelet = new grpc.Server();
  let answer: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<Empty>) => void = (
    _c,
    cb,
  ) => cb(null, {});

  beforeAll(async () => {
    kubelet.addService(RegistrationService, {
      register: (c: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<Empty>) => answer(c, cb),
    });
    await new Promise<void>((resolve, reject) =>
      kubelet.bindAsync(`unix://${kubeletSocket}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
  });
  afterAll(() => kubelet.forceShutdown());

  const register = () =>
    unaryCall(
      kubeletSocket,
      RegistrationService.register,
      { version: "v1beta1", endpoint: "e.sock", resourceName: "r/x" },
      { timeoutMs: 1_000 },
    );

  it("gets the answer, and the server's error with its code and message", async () => {
    answer = (_c, cb) => cb(null, {});
    expect(await register()).toEqual({});
    answer = (_c, cb) => cb({ code: grpc.status.INVALID_ARGUMENT, details: "bad version: 100% ☃" });
    const err = await register().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrpcError);
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: "bad version: 100% ☃" });
    expect((err as Error).message).toBe("3 INVALID_ARGUMENT: bad version: 100% ☃");
  });

  it("sends its deadline and fails DEADLINE_EXCEEDED when the server does not answer in time", async () => {
    let deadline: grpc.Deadline | undefined;
    answer = (c) => (deadline = c.getDeadline());
    const err = await register().catch((e: unknown) => e);
    expect(err).toMatchObject({ code: grpc.status.DEADLINE_EXCEEDED });
    expect(deadline).not.toBe(Infinity);
  });

  it("fails UNAVAILABLE when nothing listens on the socket", async () => {
    const err = await unaryCall(
      join(dir, "absent.sock"),
      RegistrationService.register,
      { version: "", endpoint: "", resourceName: "" },
      { timeoutMs: 1_000 },
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: grpc.status.UNAVAILABLE });
  });
});
