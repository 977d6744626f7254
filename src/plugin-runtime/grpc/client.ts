// The plugin's gRPC calls to the kubelet (Register on kubelet.sock, List on the PodResources socket):
// unary, one HTTP/2 connection per call over a unix socket, closed with it (ADR 0008).
import * as http2 from "node:http2";
import { connect } from "node:net";
import { DEFAULT_MAX_RECEIVE_BYTES, FrameError, FrameReader, frame } from "./frames.js";
import { Status, decodeGrpcMessage, statusName } from "./status.js";

/** One unary method as ts-proto's service definitions describe it. */
export interface UnaryMethod<Req, Res> {
  readonly path: string;
  requestSerialize(value: Req): Buffer;
  responseDeserialize(bytes: Buffer): Res;
}

/** A call that ended with a status other than OK; `message` reads `<code> <NAME>: <details>` as grpc-js's did. */
export class GrpcError extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
  ) {
    super(`${code} ${statusName(code)}: ${details}`);
  }
}

export interface UnaryCallOptions {
  /** The call fails with DEADLINE_EXCEEDED after this long; sent as grpc-timeout. */
  timeoutMs: number;
  /** Largest response message accepted (RESOURCE_EXHAUSTED beyond). 4 MiB by default. */
  maxReceiveBytes?: number;
}

/** grpc-timeout for a deadline this far away: at most 8 digits, in milliseconds or seconds. */
function grpcTimeout(ms: number): string {
  const whole = Math.max(1, Math.ceil(ms));
  return whole < 1e8 ? `${whole}m` : `${Math.ceil(whole / 1000)}S`;
}

/** Calls `method` on the server listening on the unix socket at `socketPath`; rejects with a GrpcError. */
export function unaryCall<Req, Res>(
  socketPath: string,
  method: UnaryMethod<Req, Res>,
  request: Req,
  options: UnaryCallOptions,
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    const session = http2.connect("http://localhost", { createConnection: () => connect(socketPath) });
    let settled = false;
    const finish = (err: GrpcError | undefined, value?: Res): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      session.destroy();
      if (err) reject(err);
      else resolve(value as Res);
    };
    const timer = setTimeout(
      () => finish(new GrpcError(Status.DEADLINE_EXCEEDED, "Deadline exceeded")),
      options.timeoutMs,
    );
    // Before the connection is up, any failure is the server's absence: UNAVAILABLE, as grpc-go and
    // grpc-js say it; after, a stream error is the call's own.
    let connected = false;
    session.once("connect", () => (connected = true));
    session.on("error", (err: Error) => finish(new GrpcError(Status.UNAVAILABLE, err.message)));
    session.on("close", () => finish(new GrpcError(Status.UNAVAILABLE, "Connection closed")));

    const stream = session.request({
      ":method": "POST",
      ":path": method.path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": grpcTimeout(options.timeoutMs),
      "grpc-accept-encoding": "identity",
    });
    const reader = new FrameReader(options.maxReceiveBytes ?? DEFAULT_MAX_RECEIVE_BYTES);
    let response: Buffer | undefined;
    let status: { code: number; details: string } | undefined;
    const readStatus = (headers: http2.IncomingHttpHeaders): void => {
      const code = headers["grpc-status"];
      if (code === undefined) return;
      const message = headers["grpc-message"];
      status = { code: Number(code), details: decodeGrpcMessage(typeof message === "string" ? message : "") };
    };
    stream.on("response", (headers) => {
      const httpStatus = headers[":status"];
      if (httpStatus !== 200) {
        finish(new GrpcError(Status.UNKNOWN, `Received HTTP status code ${httpStatus}`));
        return;
      }
      readStatus(headers);
    });
    stream.on("trailers", readStatus);
    stream.on("data", (chunk: Buffer) => {
      try {
        for (const message of reader.push(chunk)) response = message;
      } catch (err) {
        const tooLarge = err instanceof FrameError && err.kind === "too-large";
        finish(new GrpcError(tooLarge ? Status.RESOURCE_EXHAUSTED : Status.INTERNAL, (err as Error).message));
      }
    });
    stream.on("error", (err: Error) =>
      finish(new GrpcError(connected ? Status.INTERNAL : Status.UNAVAILABLE, err.message)),
    );
    stream.on("close", () => {
      if (status === undefined) {
        const dropped = session.closed || session.destroyed || !connected;
        finish(
          dropped
            ? new GrpcError(Status.UNAVAILABLE, "Connection dropped")
            : new GrpcError(Status.INTERNAL, `Stream closed without a status (code ${stream.rstCode})`),
        );
      } else if (status.code !== Status.OK) {
        finish(new GrpcError(status.code, status.details));
      } else if (response === undefined) {
        finish(new GrpcError(Status.UNIMPLEMENTED, "No message received for unary call"));
      } else {
        try {
          finish(undefined, method.responseDeserialize(response));
        } catch (err) {
          finish(
            new GrpcError(Status.INTERNAL, `Failed to parse server response: ${(err as Error).message}`),
          );
        }
      }
    });
    stream.end(frame(method.requestSerialize(request)));
  });
}
