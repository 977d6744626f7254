// A gRPC server on node:http2 for the plugin's services (ADR 0008): unary and server-streaming methods,
// uncompressed messages, grpc-timeout, cancellation, and the status answers grpc-js gave before it.
import { EventEmitter } from "node:events";
import * as http2 from "node:http2";
import { listenOn } from "../../observability/listen.js";
import { DEFAULT_MAX_RECEIVE_BYTES, FrameError, FrameReader, frame } from "./frames.js";
import { Status, encodeGrpcMessage, parseGrpcTimeout, type StatusObject } from "./status.js";

/** One method as ts-proto's service definitions describe it (the `XService` objects in proto/gen). */
export interface MethodDefinition<Req, Res> {
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  requestDeserialize(bytes: Buffer): Req;
  responseSerialize(value: Res): Buffer;
}

/** A failure a handler answers with: a status code and its message. */
export type ServiceError = Partial<StatusObject>;

/** A unary handler's answer: an error, or the response. */
export type SendUnaryData<Res> = (error: ServiceError | null, value?: Res | null) => void;

/** A unary call as its handler sees it. */
export interface ServerUnaryCall<Req> {
  readonly request: Req;
  /** Whether the client went away, or the deadline passed, before an answer. */
  readonly cancelled: boolean;
}

/**
 * A server-streaming call. It emits `cancelled` when the client goes away (or its deadline passes) before
 * the call ends, `finish` when end() has sent the status, and `close` when the stream is gone, whichever
 * way it went; `error` never comes from a client (a stream error ends as `cancelled`).
 */
export class ServerWritableStream<Req, Res> extends EventEmitter {
  cancelled = false;
  writableEnded = false;

  constructor(
    readonly request: Req,
    private readonly call: Call,
    private readonly serialize: (value: Res) => Buffer,
  ) {
    super();
  }

  /** Sends one message; false when the stream has ended or its buffer is full. */
  write(value: Res): boolean {
    if (this.writableEnded || this.cancelled) return false;
    return this.call.sendMessage(this.serialize(value));
  }

  /** Ends the stream with OK. */
  end(): void {
    if (this.writableEnded) return;
    this.writableEnded = true;
    this.call.sendStatus({ code: Status.OK, details: "OK" }, () => this.emit("finish"));
  }

  /** Ends the stream with an error status (as grpc-js's `emit("error", status)` did). */
  fail(status: ServiceError): void {
    if (this.writableEnded) return;
    this.writableEnded = true;
    this.call.sendStatus(completeStatus(status));
  }
}

type Handler<M> =
  M extends MethodDefinition<infer Req, infer Res>
    ? M["responseStream"] extends true
      ? (call: ServerWritableStream<Req, Res>) => void
      : (call: ServerUnaryCall<Req>, callback: SendUnaryData<Res>) => void
    : never;

/** The handlers of a service definition, one per method, typed from it. */
export type ServiceImplementation<S> = { [K in keyof S]: Handler<S[K]> };

interface Route {
  method: MethodDefinition<unknown, unknown>;
  handler: (...args: never[]) => void;
}

const RESPONSE_HEADERS = {
  ":status": 200,
  "content-type": "application/grpc+proto",
  "grpc-accept-encoding": "identity",
  "grpc-encoding": "identity",
} as const;

function completeStatus(status: ServiceError): StatusObject {
  return { code: status.code ?? Status.UNKNOWN, details: status.details ?? "" };
}

/** One HTTP/2 stream carrying one call: what goes back on it, sent once. */
class Call {
  private headersSent = false;
  private statusSent = false;
  private timer: NodeJS.Timeout | undefined;
  cancelled = false;
  onCancel: (() => void) | undefined;

  constructor(readonly stream: http2.ServerHttp2Stream) {
    stream.once("close", () => {
      clearTimeout(this.timer);
      if (!this.statusSent) this.cancel();
    });
  }

  /** The client's deadline: when it passes, the call answers DEADLINE_EXCEEDED and counts as cancelled. */
  deadline(ms: number): void {
    this.timer = setTimeout(() => {
      this.sendStatus({ code: Status.DEADLINE_EXCEEDED, details: "Deadline exceeded" });
      this.cancel();
    }, ms);
  }

  sendMessage(message: Buffer): boolean {
    if (this.statusSent || this.stream.destroyed) return false;
    if (!this.headersSent) {
      this.headersSent = true;
      this.stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
    }
    return this.stream.write(frame(message));
  }

  /** Trailers after the messages, or a Trailers-Only response when none went out. */
  sendStatus(status: StatusObject, sent?: () => void): void {
    if (this.statusSent) return;
    this.statusSent = true;
    clearTimeout(this.timer);
    const { stream } = this;
    if (stream.destroyed || stream.closed) return;
    const trailers = {
      "grpc-status": String(status.code),
      "grpc-message": encodeGrpcMessage(status.details),
    };
    try {
      if (this.headersSent) {
        stream.once("wantTrailers", () => {
          stream.sendTrailers(trailers);
          sent?.();
        });
        stream.end();
      } else {
        this.headersSent = true;
        stream.respond({ ...RESPONSE_HEADERS, ...trailers }, { endStream: true });
        sent?.();
      }
    } catch {
      // The stream went away between the check and the write: the client has gone.
    }
  }

  private cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.onCancel?.();
  }
}

export interface GrpcServerOptions {
  /** Largest request message accepted; a larger one is answered RESOURCE_EXHAUSTED. 4 MiB by default. */
  maxReceiveBytes?: number;
}

/**
 * The plugin's gRPC server. Its HTTP/2 settings are Node's defaults (no limit on concurrent streams, PINGs
 * answered by nghttp2), with the session memory and header block limits grpc-js set, so clients see what
 * they saw from grpc-js.
 */
export class GrpcServer {
  private readonly routes = new Map<string, Route>();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly maxReceiveBytes: number;
  private server: http2.Http2Server | undefined;

  constructor(options: GrpcServerOptions = {}) {
    this.maxReceiveBytes = options.maxReceiveBytes ?? DEFAULT_MAX_RECEIVE_BYTES;
  }

  addService<S extends Record<string, MethodDefinition<unknown, never>>>(
    definition: S,
    implementation: ServiceImplementation<S>,
  ): void {
    for (const [name, method] of Object.entries(definition)) {
      const handler = (implementation as Record<string, Route["handler"]>)[name];
      if (handler === undefined) continue;
      this.routes.set(method.path, { method, handler });
    }
  }

  /** Listens on the unix socket at `path`; resolves once it accepts connections. */
  listen(path: string): Promise<void> {
    const server = http2.createServer({
      // As grpc-js: nghttp2's per-session memory cap makes Node reset streams under load.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    });
    server.on("session", (session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
      // A broken connection ends its streams (their calls cancelled); nothing else to do.
      session.on("error", () => undefined);
    });
    server.on("stream", (stream, headers) => this.handle(stream, headers));
    this.server = server;
    return listenOn(server, { path });
  }

  /** Stops accepting, lets calls in flight finish, and calls back when every connection is closed. */
  tryShutdown(done: () => void): void {
    const server = this.server;
    if (server === undefined) return done();
    let pending = 1 + this.sessions.size;
    const one = (): void => {
      if (--pending === 0) done();
    };
    server.close(() => one());
    for (const session of this.sessions) {
      if (session.closed || session.destroyed) one();
      else {
        session.once("close", one);
        session.close();
      }
    }
  }

  /** Closes every connection now, cancelling the calls on them. */
  forceShutdown(): void {
    this.server?.close();
    for (const session of this.sessions) session.destroy();
  }

  private handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    // A stream error means the client or its connection went away; the close that follows cancels the call.
    stream.on("error", () => undefined);
    const contentType = headers["content-type"];
    if (typeof contentType !== "string" || !contentType.startsWith("application/grpc")) {
      stream.respond({ ":status": 415 }, { endStream: true });
      stream.resume();
      return;
    }
    const call = new Call(stream);
    const path = headers[":path"] ?? "";
    const route = this.routes.get(path);
    if (route === undefined) {
      call.sendStatus({
        code: Status.UNIMPLEMENTED,
        details: `The server does not implement the method ${path}`,
      });
      stream.resume();
      return;
    }
    const timeout = headers["grpc-timeout"];
    if (typeof timeout === "string") {
      const ms = parseGrpcTimeout(timeout);
      if (ms === undefined) {
        call.sendStatus({ code: Status.INTERNAL, details: `Invalid grpc-timeout value "${timeout}"` });
        stream.resume();
        return;
      }
      call.deadline(ms);
    }
    const encoding = headers["grpc-encoding"];
    this.readRequest(stream, call, route, typeof encoding === "string" ? encoding : "identity");
  }

  /** Reads the one request message these methods take, then runs the handler. */
  private readRequest(stream: http2.ServerHttp2Stream, call: Call, route: Route, encoding: string): void {
    const reader = new FrameReader(this.maxReceiveBytes);
    const { method } = route;
    const kind = method.responseStream ? "server streaming" : "unary";
    let request: Buffer | undefined;
    let failed = false;
    const fail = (code: number, details: string): void => {
      failed = true;
      call.sendStatus({ code, details });
      stream.resume();
    };
    stream.on("data", (chunk: Buffer) => {
      if (failed || call.cancelled) return;
      let messages: Buffer[];
      try {
        messages = reader.push(chunk);
      } catch (err) {
        if (!(err instanceof FrameError)) throw err;
        if (err.kind === "too-large") return fail(Status.RESOURCE_EXHAUSTED, err.message);
        return encoding === "identity"
          ? fail(Status.INTERNAL, "Received a compressed message without grpc-encoding")
          : fail(Status.UNIMPLEMENTED, `Received message compressed with unsupported encoding "${encoding}"`);
      }
      for (const message of messages) {
        if (request !== undefined) {
          return fail(
            Status.UNIMPLEMENTED,
            `Received a second request message for ${kind} method ${method.path}`,
          );
        }
        request = message;
      }
    });
    stream.once("end", () => {
      if (failed || call.cancelled) return;
      if (request === undefined) {
        fail(Status.UNIMPLEMENTED, `Received no request message for ${kind} method ${method.path}`);
        return;
      }
      let decoded: unknown;
      try {
        decoded = method.requestDeserialize(request);
      } catch (err) {
        // The kubelet sent bytes that are no message of this method: its request is malformed, the plugin
        // is not broken. grpc-js answered INTERNAL here; the plugin answered INVALID_ARGUMENT through it.
        fail(Status.INVALID_ARGUMENT, `malformed request: ${(err as Error)?.message ?? String(err)}`);
        return;
      }
      this.run(call, route, decoded);
    });
  }

  private run(call: Call, route: Route, request: unknown): void {
    const { method, handler } = route;
    if (method.responseStream) {
      const stream = new ServerWritableStream(request, call, method.responseSerialize.bind(method));
      call.onCancel = () => {
        stream.cancelled = true;
        stream.emit("cancelled");
      };
      call.stream.once("close", () => stream.emit("close"));
      try {
        (handler as (call: ServerWritableStream<unknown, unknown>) => void)(stream);
      } catch (err) {
        stream.fail({
          code: Status.UNKNOWN,
          details: `handler threw: ${(err as Error)?.message ?? String(err)}`,
        });
      }
      return;
    }
    const unary = {
      request,
      get cancelled() {
        return call.cancelled;
      },
    };
    let answered = false;
    const callback: SendUnaryData<unknown> = (error, value) => {
      if (answered) return;
      answered = true;
      if (error) return call.sendStatus(completeStatus(error));
      let bytes: Buffer;
      try {
        bytes = method.responseSerialize(value);
      } catch {
        return call.sendStatus({ code: Status.INTERNAL, details: "Error serializing response" });
      }
      call.sendMessage(bytes);
      call.sendStatus({ code: Status.OK, details: "OK" });
    };
    try {
      (handler as (call: ServerUnaryCall<unknown>, cb: SendUnaryData<unknown>) => void)(unary, callback);
    } catch (err) {
      callback({ code: Status.UNKNOWN, details: `handler threw: ${(err as Error)?.message ?? String(err)}` });
    }
  }
}
