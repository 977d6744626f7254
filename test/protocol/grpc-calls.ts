// Calls into the plugin runtime the way the kubelet makes them: a unary gRPC call with a deadline, its error, and
// the wait until both sides agree the plugin is registered.
import * as grpc from "@grpc/grpc-js";
import { RESOURCE, waitFor, type Harness } from "./support.js";

export type UnaryFn<Req, Res> = (
  req: Req,
  md: grpc.Metadata,
  opts: Partial<grpc.CallOptions>,
  cb: (e: grpc.ServiceError | null, r: Res) => void,
) => unknown;

export function call<Req, Res>(fn: UnaryFn<Req, Res>, req: Req): Promise<Res> {
  return new Promise((resolve, reject) =>
    fn(req, new grpc.Metadata(), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
  );
}

export function callError<Req, Res>(fn: UnaryFn<Req, Res>, req: Req): Promise<grpc.ServiceError> {
  return call(fn, req).then(
    (res) => {
      throw new Error(`expected an error, got ${JSON.stringify(res)}`);
    },
    (err: grpc.ServiceError) => err,
  );
}

/**
 * Both sides agree the plugin is registered: the simulated kubelet streams its devices, and the plugin has
 * the Register response. The kubelet dials ListAndWatch from inside its Register handler, so the stream
 * can be up a moment before the plugin hears back.
 */
export async function registered(h: Harness) {
  return waitFor(
    "the simulated kubelet to see the plugin's devices and the plugin to see its registration",
    (observe) => {
      const r = h.kubelet.resources.get(RESOURCE);
      const plugin = h.runtime.status();
      observe({
        registered: !!r,
        connected: r?.connected,
        devices: r?.devices.length,
        refused: h.kubelet.refused,
        plugin,
      });
      return r?.connected && r.updates > 0 && plugin.registered ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}
