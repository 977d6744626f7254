// What the benchmark's main thread and its relay thread (relay-worker.ts) say to each other, and the
// bookkeeping of each side that does not need a thread to be tested: the main thread asks, the relay
// thread answers from where it stands when the question arrives, so a main thread that was busy gets
// figures as of its question, not as of its last look.
import type { RelayedConnection } from "../../tools/cluster/tcp-relay.js";

/** What the relay thread needs to start: the API server it relays to. */
export interface RelayWorkerData {
  host: string;
  port: number;
}

/** The main thread's questions. */
export type RelayRequest =
  | { type: "counts"; id: number }
  /** The relay thread's longest event-loop delay since the previous such question (or its start). */
  | { type: "loop-delay"; id: number }
  /** Closes the relay, every relayed connection with it, and ends the thread. */
  | { type: "close" };

/** What the relay thread has relayed: connections made, and each one's open and close. */
export interface RelayCounts {
  connections: number;
  history: RelayedConnection[];
}

/** The relay thread's messages: ready once listening, then one answer per question. */
export type RelayMessage =
  | { type: "ready"; port: number }
  | { type: "counts"; id: number; counts: RelayCounts }
  | { type: "loop-delay"; id: number; maxMs: number };

/** The answer the relay thread gives to `request`, from its relay and its own loop monitor. */
export function answer(
  request: Exclude<RelayRequest, { type: "close" }>,
  relay: { connections(): number[]; history(): readonly RelayedConnection[] },
  loopDelayMaxMs: () => number,
): RelayMessage {
  switch (request.type) {
    case "counts":
      return {
        type: "counts",
        id: request.id,
        counts: { connections: relay.connections()[0] ?? 0, history: relay.history().map((c) => ({ ...c })) },
      };
    case "loop-delay":
      return { type: "loop-delay", id: request.id, maxMs: loopDelayMaxMs() };
  }
}

/** The main thread's side: questions sent with an id, each settled by the answer carrying it. */
export interface Requester {
  counts(): Promise<RelayCounts>;
  loopDelayMs(): Promise<number>;
  /** Settles the question an answer belongs to; false for a message that answers nothing asked. */
  settle(message: RelayMessage): boolean;
  /** Fails every question still open (the thread exited or failed); later questions fail at once. */
  failAll(err: Error): void;
}

export function requester(post: (request: RelayRequest) => void): Requester {
  let nextId = 1;
  let failed: Error | undefined;
  const open = new Map<number, { resolve: (m: RelayMessage) => void; reject: (e: Error) => void }>();
  const ask = (type: "counts" | "loop-delay"): Promise<RelayMessage> => {
    if (failed !== undefined) return Promise.reject(failed);
    const id = nextId++;
    return new Promise<RelayMessage>((resolve, reject) => {
      open.set(id, { resolve, reject });
      post({ type, id });
    });
  };
  return {
    counts: async () => {
      const m = await ask("counts");
      if (m.type !== "counts") throw new Error(`relay thread answered counts with ${m.type}`);
      return m.counts;
    },
    loopDelayMs: async () => {
      const m = await ask("loop-delay");
      if (m.type !== "loop-delay") throw new Error(`relay thread answered loop-delay with ${m.type}`);
      return m.maxMs;
    },
    settle(message) {
      if (message.type === "ready") return false;
      const waiting = open.get(message.id);
      if (waiting === undefined) return false;
      open.delete(message.id);
      waiting.resolve(message);
      return true;
    },
    failAll(err) {
      failed ??= err;
      for (const waiting of open.values()) waiting.reject(err);
      open.clear();
    },
  };
}

/**
 * The Node flags a worker running `file` is to be given, or undefined to inherit the parent's (Node's
 * default, and the only way to keep V8 flags such as the benchmark's --expose-gc, which a worker's own
 * execArgv may not name): tsx's loader when the file is TypeScript and the parent was not started with it
 * (a test runner transforms its own files only).
 */
export function workerExecArgv(parent: readonly string[], file: string): string[] | undefined {
  const hasTsx = parent.some(
    (arg, i) =>
      arg === "--import=tsx" ||
      arg === "--loader=tsx" ||
      ((arg === "--import" || arg === "--loader") && parent[i + 1] === "tsx"),
  );
  return file.endsWith(".ts") && !hasTsx ? ["--import", "tsx"] : undefined;
}
