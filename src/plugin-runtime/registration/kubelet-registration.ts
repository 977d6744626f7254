// Registration with the kubelet's device manager over kubelet.sock (Registration.Register, v1beta1).
import * as grpc from "@grpc/grpc-js";
import { connect } from "node:net";
import { RegistrationClient, type DevicePluginOptions, type RegisterRequest } from "../proto/index.js";

export interface RegisterParams {
  kubeletSocketPath: string;
  request: RegisterRequest;
  /** The kubelet dials back before it answers (up to 10 s), so the deadline must exceed that. */
  timeoutMs?: number;
}

/**
 * Whether something accepts connections on the socket now. A gRPC client that fails to connect keeps
 * trying in the background after it is closed (grpc-js reconnects the subchannel once its backoff
 * ends), so every Register attempted while a restarting kubelet's socket file exists but nobody
 * listens yet would leave a connection to the next kubelet open for good. A plain connection first
 * means a gRPC client is only made when the kubelet answers.
 */
function kubeletAccepts(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
    socket.once("error", (err) => {
      socket.destroy();
      reject(new Error(`kubelet.sock does not accept connections: ${err.message}`));
    });
  });
}

/** Calls Register once; rejects with the kubelet's gRPC error (or a connection error). */
export async function registerWithKubelet({
  kubeletSocketPath,
  request,
  timeoutMs = 15_000,
}: RegisterParams): Promise<void> {
  await kubeletAccepts(kubeletSocketPath);
  const client = new RegistrationClient(`unix://${kubeletSocketPath}`, grpc.credentials.createInsecure(), {
    // One attempt per call: the caller owns retries and backoff.
    "grpc.enable_retries": 0,
    // A connection of its own, closed with the client: from grpc-js's process-wide pool, an idle
    // connection to kubelet.sock would stay open after close() until the pool's periodic sweep, one
    // more per kubelet restart in the meantime.
    "grpc.use_local_subchannel_pool": 1,
  });
  return new Promise<void>((resolve, reject) => {
    client.register(request, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err) => {
      client.close();
      if (err) reject(err);
      else resolve();
    });
  });
}

export function registerRequest(
  version: string,
  endpoint: string,
  resourceName: string,
  options: DevicePluginOptions,
): RegisterRequest {
  return { version, endpoint, resourceName, options };
}
