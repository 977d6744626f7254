// How the simulated kubelet's device manager and plugin watcher call plugins: every connection its own,
// every unary call with a deadline.
import * as grpc from "@grpc/grpc-js";

/**
 * Channel options of every connection the simulated kubelet makes. grpc-js shares one HTTP/2 connection
 * between all clients in a process that dial the same target with the same options (its global
 * subchannel pool), so without this the "kubelet" would ride on the connection of any test client that
 * dials the plugin too, and whatever the plugin does to that client's connection (nghttp2 closes one
 * that resets too many streams) would happen to the kubelet's ListAndWatch as well. The real kubelet is
 * its own process with connections of its own; a local pool per client gives the simulation the same.
 */
export const KUBELET_CHANNEL_OPTIONS: grpc.ChannelOptions = { "grpc.use_local_subchannel_pool": 1 };

/** One unary call of a grpc-js client method, answered within `timeoutMs` or failed. */
export function callWithDeadline<Req, Res>(
  fn: (
    req: Req,
    md: grpc.Metadata,
    opts: Partial<grpc.CallOptions>,
    cb: (e: grpc.ServiceError | null, r: Res) => void,
  ) => unknown,
  req: Req,
  timeoutMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
}
