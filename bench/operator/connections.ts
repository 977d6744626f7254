// The operator's connections to the API server, counted by a relay in front of it: each new one is a TLS
// handshake.
import { startTcpRelay, type RelayedConnection, type TcpRelay } from "../../tools/cluster/tcp-relay.js";

export interface ConnectionCountingRelay {
  /** Where the operator reaches the API server instead. */
  url: string;
  connections: () => number;
  history: TcpRelay["history"];
  close(): void;
}

/**
 * A TCP relay in front of the API server that counts the connections made through it: every new
 * connection is a TLS handshake, so with keep-alive an idle operator should open none.
 */
export async function connectionCountingRelay(server: URL): Promise<ConnectionCountingRelay> {
  const relay = await startTcpRelay([{ host: server.hostname, port: Number(server.port) }]);
  return {
    url: `https://127.0.0.1:${relay.port}`,
    connections: () => relay.connections()[0] ?? 0,
    history: () => relay.history(),
    close: () => relay.close(),
  };
}

/**
 * What happened to the relay's connections between `from` and `to` (Date.now()): those opened, and
 * those that ended with the side that ended them, e.g. "opened +12.3 s; closed by server +12.2 s (open 301 s)".
 */
export function connectionEvents(history: readonly RelayedConnection[], from: number, to: number): string {
  const events: { at: number; text: string }[] = [];
  for (const c of history) {
    if (c.openedAt >= from && c.openedAt <= to) events.push({ at: c.openedAt, text: "opened" });
    if (c.closedAt !== undefined && c.closedAt >= from && c.closedAt <= to) {
      const open = ((c.closedAt - c.openedAt) / 1000).toFixed(1);
      events.push({ at: c.closedAt, text: `closed by ${c.closedBy} (open ${open} s)` });
    }
  }
  return events
    .sort((a, b) => a.at - b.at)
    .map((e) => `${e.text} +${((e.at - from) / 1000).toFixed(1)} s`)
    .join("; ");
}
