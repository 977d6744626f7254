// Listening without node:cluster. Node's `server.listen()` first loads the cluster module to ask whether this
// process is a cluster worker (whose sockets the primary would own), and with it `child_process` and `dgram`:
// about 0.6 MiB of a device plugin's idle RSS, in a process that is never a cluster worker. What `listen()`
// calls for a primary is `setupListenHandle`, under the alias `_listen2` that Node keeps "to avoid breaking
// code that wraps this method" (lib/net.js); calling it is listening as a primary does. Where the alias is
// missing (another runtime), or for a host that is a name to look up, this is `server.listen()`.
import { isIP, type Server } from "node:net";

/** A unix socket's path, or a TCP port on a host (an IP literal or a name; none: every address). */
export type ListenTarget = { path: string } | { host?: string | undefined; port: number };

type SetupListenHandle = (
  address: string | null,
  port: number,
  addressType: number,
  backlog?: number,
) => void;

/** Starts `server` listening on `target`; resolves once it accepts connections, rejects with its bind error. */
export function listenOn(server: Server, target: ListenTarget): Promise<void> {
  return new Promise((resolve, reject) => {
    // As listen(): setupListenHandle would take the handle it already has and listen on it again.
    if (server.listening) {
      reject(new Error("the server is already listening; close it before listening again"));
      return;
    }
    const onError = (err: Error): void => {
      server.off("listening", onListening);
      reject(err);
    };
    const onListening = (): void => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    const primary = (server as unknown as { _listen2?: unknown })._listen2;
    const asPrimary = typeof primary === "function" ? (primary as SetupListenHandle) : undefined;
    if ("path" in target) {
      if (asPrimary === undefined) {
        server.listen(target.path);
        return;
      }
      // listen(path) names the server's pipe before it binds: server.address() reads it.
      (server as unknown as { _pipeName: string })._pipeName = target.path;
      asPrimary.call(server, target.path, -1, -1);
      return;
    }
    const host = target.host === undefined || target.host === "" ? undefined : target.host;
    const family = host === undefined ? 4 : isIP(host);
    if (asPrimary === undefined || family === 0) {
      // A name is looked up first, as listen() does it.
      server.listen(target.port, host);
      return;
    }
    // No host: listen() binds `::` (both families), `0.0.0.0` where IPv6 is off; so does a null address here.
    asPrimary.call(server, host ?? null, target.port, family);
  });
}
