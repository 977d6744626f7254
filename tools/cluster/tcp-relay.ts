// A TCP relay that spreads new connections over its backends in turn and counts them per backend: what a
// Service does for the API server in a cluster, for processes that run on this machine. Benchmarks use
// it with one backend to count TLS handshakes.
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

export interface Backend {
  host: string;
  port: number;
}

export interface TcpRelay {
  port: number;
  /** Connections relayed so far, per backend in the order given. */
  connections(): number[];
  /** Replaces the backends; connections already relayed stay where they are. */
  setBackends(backends: readonly Backend[]): void;
  close(): void;
}

export async function startTcpRelay(initial: readonly Backend[] = []): Promise<TcpRelay> {
  let backends = [...initial];
  let counts = backends.map(() => 0);
  let turn = 0;
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    if (backends.length === 0) {
      client.destroy();
      return;
    }
    const index = turn++ % backends.length;
    counts[index] = (counts[index] ?? 0) + 1;
    const backend = backends[index]!;
    const upstream = connect(backend.port, backend.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  return {
    port: (relay.address() as AddressInfo).port,
    connections: () => [...counts],
    setBackends(next) {
      backends = [...next];
      counts = backends.map(() => 0);
      turn = 0;
    },
    close() {
      relay.close();
      for (const s of sockets) s.destroy();
    },
  };
}

/** A port nothing listens on right now (for a process that must be told its port before it starts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
