// The relay thread: the TCP relay between the operator and the API server, on an event loop of its own.
// The benchmark's main thread runs the report writers of every node, lists thousands of objects and writes
// its reports; on that thread the relay stood still behind it (up to 5.6 s at 5000 nodes), and every
// operator request, its Lease renewals included, stood still with it. Here only relaying runs, and the
// main thread asks for the counts it reports (relay-protocol.ts).
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parentPort, workerData } from "node:worker_threads";
import { startTcpRelay } from "../../tools/cluster/tcp-relay.js";
import { answer, type RelayMessage, type RelayRequest, type RelayWorkerData } from "./relay-protocol.js";

const port = parentPort;
if (port === null) throw new Error("relay-worker.ts runs as a worker thread (relay-thread.ts starts it)");
const { host, port: backendPort } = workerData as RelayWorkerData;
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
const relay = await startTcpRelay([{ host, port: backendPort }]);
const loopDelayMaxMs = (): number => {
  const max = loop.max / 1e6;
  loop.reset();
  return max;
};
port.on("message", (request: RelayRequest) => {
  if (request.type === "close") {
    relay.close();
    loop.disable();
    port.close();
    return;
  }
  port.postMessage(answer(request, relay, loopDelayMaxMs));
});
port.postMessage({ type: "ready", port: relay.port } satisfies RelayMessage);
