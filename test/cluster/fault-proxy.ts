// A TCP proxy that injects network faults between API clients (the operator, the plugins) and the API
// server, for the fault tests. It works below TLS, on the bytes of each connection, so it needs no
// certificate and every client keeps verifying the real server:
// - drops: a connection is closed (FIN) at a random moment, the way a load balancer or an API server
//   restart ends a watch;
// - resets: a connection is aborted (RST) in the middle of a transfer, so a request fails half sent or
//   half answered;
// - delays: chunks wait before they are passed on, in order, so responses and watch events arrive late.
// Everything random comes from one seed, so a failing run can be replayed; counters say what happened.
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { mulberry32 } from "../fuzz/rng.js";

export interface FaultPlan {
  /** Chance per chunk (either direction) that the connection is reset instead of passing it on. */
  resetPerChunk: number;
  /** Chance per chunk that it is held back, and for how long at most (uniform from 0). */
  delayPerChunk: number;
  maxDelayMs: number;
  /** Every connection is closed after a random time in this range (ms) from when the plan applies. */
  dropAfterMs: readonly [number, number];
}

export interface FaultCounts {
  connections: number;
  resets: number;
  drops: number;
  delayedChunks: number;
  refused: number;
  /** Connections that waited for the end of a hold before they reached the server. */
  held: number;
}

export interface FaultProxy {
  port: number;
  /** `https://127.0.0.1:<port>`: the server to give clients instead of the API server's. */
  url: string;
  counts(): FaultCounts;
  /** Starts injecting `plan` (also into open connections); undefined passes bytes through untouched. */
  setFaults(plan: FaultPlan | undefined): void;
  /** While on, new connections are closed at once and open ones are closed now: the API is unreachable. */
  setRefusing(refusing: boolean): void;
  /**
   * While on, open connections are closed now and new ones are accepted but wait, their bytes unread,
   * until the hold ends; then they reach the server as they were sent. A client that reconnects during
   * a hold (a watch resuming from its resourceVersion) meets whatever server is there afterwards.
   */
  setHolding(holding: boolean): void;
  close(): Promise<void>;
}

interface Relayed {
  client: Socket;
  upstream: Socket;
  dropTimer?: NodeJS.Timeout;
}

export async function startFaultProxy(
  target: { host: string; port: number },
  seed: number,
): Promise<FaultProxy> {
  const random = mulberry32(seed);
  const counts: FaultCounts = { connections: 0, resets: 0, drops: 0, delayedChunks: 0, refused: 0, held: 0 };
  const waiting = new Set<Socket>();
  let holding = false;
  const open = new Set<Relayed>();
  let plan: FaultPlan | undefined;
  let refusing = false;

  const end = (r: Relayed, how: "drop" | "reset"): void => {
    if (!open.delete(r)) return;
    clearTimeout(r.dropTimer);
    if (how === "reset") {
      counts.resets++;
      r.client.resetAndDestroy();
      r.upstream.resetAndDestroy();
    } else {
      counts.drops++;
      r.client.destroy();
      r.upstream.destroy();
    }
  };

  const armDrop = (r: Relayed): void => {
    clearTimeout(r.dropTimer);
    if (plan === undefined) return;
    const [min, max] = plan.dropAfterMs;
    r.dropTimer = setTimeout(() => end(r, "drop"), min + random() * (max - min));
  };

  /** Passes `from`'s bytes to `to`, in order, with the plan's resets and delays. */
  const forward = (r: Relayed, from: Socket, to: Socket): void => {
    // Chunks held back, each with the time it may leave; never earlier than the one before it, so a
    // delay holds back everything behind it and the byte stream stays intact.
    const queue: { chunk: Buffer; at: number }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const flush = (): void => {
      timer = undefined;
      if (!open.has(r)) return;
      const now = Date.now();
      while (queue.length > 0 && queue[0]!.at <= now) to.write(queue.shift()!.chunk);
      if (queue.length > 0) {
        timer = setTimeout(flush, queue[0]!.at - now);
        return;
      }
      if (ended) to.end();
      else from.resume();
    };
    from.on("data", (chunk: Buffer) => {
      if (!open.has(r)) return;
      const p = plan;
      if (p !== undefined && random() < p.resetPerChunk) {
        end(r, "reset");
        return;
      }
      const now = Date.now();
      let at = queue.length > 0 ? queue[queue.length - 1]!.at : now;
      if (p !== undefined && random() < p.delayPerChunk) {
        counts.delayedChunks++;
        at = Math.max(at, now + random() * p.maxDelayMs);
      }
      if (at <= now && queue.length === 0) {
        to.write(chunk);
        return;
      }
      queue.push({ chunk, at });
      from.pause();
      if (timer === undefined) timer = setTimeout(flush, Math.max(0, queue[0]!.at - now));
    });
    from.on("end", () => {
      // Half-close only after what was held back has gone out.
      ended = true;
      if (queue.length === 0) to.end();
    });
  };

  const relay = (client: Socket): void => {
    counts.connections++;
    const upstream = connect(target.port, target.host);
    upstream.on("error", () => undefined);
    const r: Relayed = { client, upstream };
    open.add(r);
    for (const s of [client, upstream]) {
      s.on("close", () => {
        if (!open.delete(r)) return;
        clearTimeout(r.dropTimer);
        client.destroy();
        upstream.destroy();
      });
    }
    forward(r, client, upstream);
    forward(r, upstream, client);
    // A held client was paused; its buffered bytes flow now that a reader is attached.
    client.resume();
    armDrop(r);
  };

  const server = createServer((client) => {
    client.on("error", () => undefined);
    if (refusing) {
      counts.refused++;
      client.destroy();
      return;
    }
    if (holding) {
      counts.held++;
      client.pause();
      waiting.add(client);
      client.once("close", () => waiting.delete(client));
      return;
    }
    relay(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    url: `https://127.0.0.1:${port}`,
    counts: () => ({ ...counts }),
    setFaults(next) {
      plan = next;
      for (const r of open) armDrop(r);
    },
    setRefusing(next) {
      refusing = next;
      if (next) for (const r of [...open]) end(r, "drop");
    },
    setHolding(next) {
      holding = next;
      if (next) {
        for (const r of [...open]) end(r, "drop");
        return;
      }
      for (const client of [...waiting]) {
        waiting.delete(client);
        if (!client.destroyed) relay(client);
      }
    },
    async close() {
      for (const client of waiting) client.destroy();
      waiting.clear();
      for (const r of [...open]) {
        clearTimeout(r.dropTimer);
        open.delete(r);
        r.client.destroy();
        r.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
