// Registration with the kubelet's device manager over kubelet.sock (Registration.Register, v1beta1).
import { connect } from "node:net";
import { unaryCall } from "../grpc/client.js";
import { RegistrationService, type DevicePluginOptions, type RegisterRequest } from "../proto/wire.js";

export interface RegisterParams {
  kubeletSocketPath: string;
  request: RegisterRequest;
  /** The kubelet dials back before it answers (up to 10 s), so the deadline must exceed that. */
  timeoutMs?: number;
}

/**
 * Whether something accepts connections on the socket now: a kubelet restarting has the socket file
 * before it listens, and that is told apart from a kubelet that refused the registration.
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
  // One attempt per call, on a connection of its own closed with it: the caller owns retries and backoff.
  await unaryCall(kubeletSocketPath, RegistrationService.register, request, { timeoutMs });
}

export function registerRequest(
  version: string,
  endpoint: string,
  resourceName: string,
  options: DevicePluginOptions,
): RegisterRequest {
  return { version, endpoint, resourceName, options };
}
