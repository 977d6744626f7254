// A TCP relay that spreads new connections over its backends in turn and counts them per backend: what a
// Service does for the API server in a cluster, for processes that run on this machine. Benchmarks use
// it with one backend to count TLS handshakes.
import { readFileSync } from "node:fs";
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
  const range = portsOutsideEphemeral(readEphemeralRange());
  for (let attempt = 0; range !== undefined && attempt < 50; attempt++) {
    const port = range.low + Math.floor(Math.random() * (range.high - range.low + 1));
    if (handedOut.has(port)) continue;
    if ((await listenOnce(port)) !== undefined) {
      handedOut.add(port);
      return port;
    }
  }
  const picked = await listenOnce(0);
  if (picked === undefined) throw new Error("freePort: cannot listen on 127.0.0.1 at all");
  return picked;
}

/**
 * Ports this process handed out: free again once the probe closed, until their user binds them, so
 * never handed out twice.
 */
const handedOut = new Set<number>();

/** Binds 127.0.0.1:`port` (0: the kernel picks) and closes it again; the port, or undefined if taken. */
function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const bound = (server.address() as AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}

/** The kernel's range for ephemeral ports (outgoing connections, binds to port 0), or undefined. */
function readEphemeralRange(): { low: number; high: number } | undefined {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    return { low: Number(low), high: Number(high) };
  } catch {
    return undefined;
  }
}

/**
 * Where freePort looks: below the ephemeral range (or above it, when it starts too low). A port the
 * kernel picked for a probe is free once the probe closes, and every outgoing connection on the machine
 * (hundreds, with a hundred plugin processes talking to the API server) draws from that same range, so
 * one of them could take it before its user binds it (seen: a simulated plugin's health port taken,
 * EADDRINUSE at its start). Outside the range only another explicit bind can take it.
 */
export function portsOutsideEphemeral(
  ephemeral: { low: number; high: number } | undefined,
): { low: number; high: number } | undefined {
  if (ephemeral === undefined || !Number.isInteger(ephemeral.low) || !Number.isInteger(ephemeral.high))
    return undefined;
  // From 20000: clear of the ports Kubernetes components listen on by default (10250-10260).
  if (ephemeral.low - 1 - 20_000 >= 4_096) return { low: 20_000, high: ephemeral.low - 1 };
  if (65_535 - (ephemeral.high + 1) >= 4_096) return { low: ephemeral.high + 1, high: 65_535 };
  return undefined;
}
