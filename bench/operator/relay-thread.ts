// Starts the relay thread (relay-worker.ts) and asks it for its counts: a TCP relay on an event loop the
// benchmark's own work cannot hold up.
import { Worker } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import {
  requester,
  workerExecArgv,
  type RelayCounts,
  type RelayMessage,
  type RelayRequest,
  type RelayWorkerData,
} from "./relay-protocol.js";

export interface RelayThread {
  /** The port the relay listens on, 127.0.0.1. */
  port: number;
  /** Connections relayed so far and each one's open and close, as of when the thread reads the question. */
  counts(): Promise<RelayCounts>;
  /** The relay thread's longest event-loop delay since the previous call, ms. */
  loopDelayMs(): Promise<number>;
  /** Closes the relay and its connections; resolves once the thread has ended. */
  close(): Promise<void>;
}

/** How long a closing relay thread may take before it is terminated. */
const CLOSE_TIMEOUT_MS = 5_000;

/** A TCP relay to `backend` in a worker thread of its own; resolves once it listens. */
export async function startRelayThread(backend: { host: string; port: number }): Promise<RelayThread> {
  const file = fileURLToPath(new URL("./relay-worker.ts", import.meta.url));
  const execArgv = workerExecArgv(process.execArgv, file);
  const worker = new Worker(file, {
    workerData: { host: backend.host, port: backend.port } satisfies RelayWorkerData,
    ...(execArgv === undefined ? {} : { execArgv }),
  });
  const asks = requester((request: RelayRequest) => worker.postMessage(request));
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    worker.once("exit", (code) => {
      exited = true;
      asks.failAll(new Error(`the relay thread exited (code ${code})`));
      resolve();
    }),
  );
  const port = await new Promise<number>((resolve, reject) => {
    worker.on("message", (message: RelayMessage) => {
      if (message.type === "ready") resolve(message.port);
      else asks.settle(message);
    });
    worker.once("error", (err: Error) => {
      asks.failAll(err);
      reject(err);
    });
    void exit.then(() => reject(new Error("the relay thread exited before it listened")));
  });
  return {
    port,
    counts: () => asks.counts(),
    loopDelayMs: () => asks.loopDelayMs(),
    close: async () => {
      if (exited) return;
      worker.postMessage({ type: "close" } satisfies RelayRequest);
      const timer = setTimeout(() => void worker.terminate(), CLOSE_TIMEOUT_MS);
      await exit;
      clearTimeout(timer);
    },
  };
}
