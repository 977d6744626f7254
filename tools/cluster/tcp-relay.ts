// A TCP relay that spreads new connections over its backends in turn and counts them per backend: what a
// Service does for the API server in a cluster, for processes that run on this machine. Benchmarks use
// it with one backend to count TLS handshakes.
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

export interface Backend {
  host: string;
  port: number;
}

/** One relayed connection: when it opened and closed (Date.now()), and which side ended it first. */
export interface RelayedConnection {
  openedAt: number;
  closedAt?: number;
  closedBy?: "client" | "server";
}

export interface TcpRelay {
  port: number;
  /** Connections relayed so far, per backend in the order given. */
  connections(): number[];
  /** Every connection relayed so far, in the order they opened. */
  history(): readonly RelayedConnection[];
  /** Replaces the backends; connections already relayed stay where they are. */
  setBackends(backends: readonly Backend[]): void;
  close(): void;
}

export async function startTcpRelay(initial: readonly Backend[] = []): Promise<TcpRelay> {
  let backends = [...initial];
  let counts = backends.map(() => 0);
  let turn = 0;
  const sockets = new Set<Socket>();
  const history: RelayedConnection[] = [];
  const relay = createServer((client) => {
    if (backends.length === 0) {
      client.destroy();
      return;
    }
    const index = turn++ % backends.length;
    counts[index] = (counts[index] ?? 0) + 1;
    const backend = backends[index]!;
    const upstream = connect(backend.port, backend.host);
    const record: RelayedConnection = { openedAt: Date.now() };
    history.push(record);
    const ended = (by: "client" | "server") => (): void => {
      record.closedBy ??= by;
      record.closedAt ??= Date.now();
    };
    client.on("end", ended("client"));
    upstream.on("end", ended("server"));
    client.on("close", ended("client"));
    upstream.on("close", ended("server"));
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
    history: () => history,
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
