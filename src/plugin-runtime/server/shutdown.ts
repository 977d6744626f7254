// Stopping a gRPC server the same way everywhere in the plugin: let in-flight calls finish, and cut them
// off after a grace period so a stuck client never holds a shutdown (or a kubelet restart) hostage.
import type { GrpcServer } from "../grpc/server.js";

/** tryShutdown, then forceShutdown once `graceMs` has passed; resolves when the server is down. */
export function shutdownServer(server: GrpcServer, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
