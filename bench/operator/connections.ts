// The operator's connections to the API server, counted by a relay in front of it: each new one is a TLS
// handshake. The relay runs in a thread of its own (relay-thread.ts), so that the benchmark's own work
// (the report writers of every node, lists of thousands of objects) cannot hold up the operator's requests.
import type { RelayedConnection } from "../../tools/cluster/tcp-relay.js";
import type { RelayCounts } from "./relay-protocol.js";
import { startRelayThread } from "./relay-thread.js";

export interface ConnectionCountingRelay {
  /** Where the operator reaches the API server instead. */
  url: string;
  /** Connections made so far and each one's open and close, as of when the relay thread answers. */
  counts(): Promise<RelayCounts>;
  /** The relay thread's longest event-loop delay since the previous call, ms. */
  loopDelayMs(): Promise<number>;
  close(): Promise<void>;
}

/**
 * A TCP relay in front of the API server that counts the connections made through it: every new
 * connection is a TLS handshake, so with keep-alive an idle operator should open none.
 */
export async function connectionCountingRelay(server: URL): Promise<ConnectionCountingRelay> {
  const relay = await startRelayThread({ host: server.hostname, port: Number(server.port) });
  return {
    url: `https://127.0.0.1:${relay.port}`,
    counts: () => relay.counts(),
    loopDelayMs: () => relay.loopDelayMs(),
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
