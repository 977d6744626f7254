// Undecodable request bodies become INVALID_ARGUMENT answers instead of grpc-js's INTERNAL.
import * as grpc from "@grpc/grpc-js";

/**
 * A request body the codec could not decode. grpc-js answers a throwing deserializer with INTERNAL,
 * which tells the kubelet the plugin broke; the request was malformed, so handlers answer INVALID_ARGUMENT.
 */
export class MalformedRequest {
  constructor(readonly reason: string) {}
}

/** The service definition with deserializers that hand a MalformedRequest to the handler instead of throwing. */
export function tolerantDefinition(definition: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const out: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const [name, method] of Object.entries(definition)) {
    out[name] = {
      ...method,
      requestDeserialize: (buf: Buffer): unknown => {
        try {
          return method.requestDeserialize(buf);
        } catch (err) {
          return new MalformedRequest((err as Error)?.message ?? String(err));
        }
      },
    };
  }
  return out;
}

/** Handlers that refuse a MalformedRequest with INVALID_ARGUMENT before the real handler sees it. */
export function refuseMalformed(
  definition: grpc.ServiceDefinition,
  implementation: grpc.UntypedServiceImplementation,
): grpc.UntypedServiceImplementation {
  const out: grpc.UntypedServiceImplementation = {};
  for (const [name, handler] of Object.entries(implementation)) {
    const method = definition[name];
    out[name] = ((
      call: { request: unknown; emit(e: "error", s: Partial<grpc.StatusObject>): void },
      callback?: grpc.sendUnaryData<unknown>,
    ) => {
      if (call.request instanceof MalformedRequest) {
        const status = {
          code: grpc.status.INVALID_ARGUMENT,
          details: `malformed request: ${call.request.reason}`,
        };
        if (method?.responseStream) call.emit("error", status);
        else callback?.(status, null);
        return;
      }
      (handler as (call: unknown, callback?: unknown) => void)(call, callback);
    }) as grpc.UntypedHandleCall;
  }
  return out;
}
