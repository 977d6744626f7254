// Registration with the kubelet's device manager over kubelet.sock (Registration.Register, v1beta1).
import * as grpc from "@grpc/grpc-js";
import { RegistrationClient, type DevicePluginOptions, type RegisterRequest } from "../proto/index.js";

export interface RegisterParams {
  kubeletSocketPath: string;
  request: RegisterRequest;
  /** The kubelet dials back before it answers (up to 10 s), so the deadline must exceed that. */
  timeoutMs?: number;
}

/** Calls Register once; rejects with the kubelet's gRPC error (or a connection error). */
export function registerWithKubelet({
  kubeletSocketPath,
  request,
  timeoutMs = 15_000,
}: RegisterParams): Promise<void> {
  const client = new RegistrationClient(`unix://${kubeletSocketPath}`, grpc.credentials.createInsecure(), {
    // One attempt per call: the caller owns retries and backoff.
    "grpc.enable_retries": 0,
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
