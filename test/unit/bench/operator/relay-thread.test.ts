// The relay thread (bench/operator/relay-thread.ts) relays and counts connections, and keeps relaying
// while the benchmark's main thread is busy: at 5000 nodes the main thread stood still for 5.6 s and the
// operator's requests, its Lease renewals among them, stood still with a relay on it. The echo server and
// the client here run in a helper thread of their own, so only the relay's thread is under test.
import { connect, type AddressInfo, createServer, type Server } from "node:net";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { startRelayThread, type RelayThread } from "../../../../bench/operator/relay-thread.js";

/** A thread serving an echo server and, once told the relay's port, pinging through it as fast as answered. */
const HELPER = `
const { parentPort } = require("node:worker_threads");
const { createServer, connect } = require("node:net");
const answered = [];
// The relay closing resets both ends: not an error of this thread's.
const echo = createServer((s) => s.on("error", () => undefined).pipe(s));
echo.listen(0, "127.0.0.1", () => parentPort.postMessage({ type: "echo", port: echo.address().port }));
parentPort.on("message", (m) => {
  if (m.type === "ping-through") {
    const s = connect(m.port, "127.0.0.1").on("error", () => undefined);
    s.on("data", () => {
      answered.push(Date.now());
      if (answered.length === 1) parentPort.postMessage({ type: "first" });
      s.write("x");
    });
    s.write("x");
  } else if (m.type === "answered") {
    parentPort.postMessage({ type: "answered", at: answered });
  } else if (m.type === "stop") {
    process.exit(0);
  }
});
`;

function nextMessage<T>(worker: Worker, type: string): Promise<T> {
  return new Promise((resolve) => {
    const on = (m: { type: string }): void => {
      if (m.type !== type) return;
      worker.off("message", on);
      resolve(m as T);
    };
    worker.on("message", on);
  });
}

/** Connects to `port`, sends a byte, waits for it back, and ends the connection from this side. */
function roundTrip(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => s.write("x"));
    s.once("data", () => s.end());
    s.once("close", () => resolve());
    s.once("error", reject);
  });
}

let relay: RelayThread | undefined;
let helper: Worker | undefined;
let server: Server | undefined;
afterEach(async () => {
  await helper?.terminate();
  await relay?.close();
  server?.close();
  relay = helper = server = undefined;
});

describe("startRelayThread", () => {
  it("relays, and counts each connection with when it opened and which side closed it", async () => {
    server = createServer((s) => s.on("error", () => undefined).pipe(s));
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    relay = await startRelayThread({ host: "127.0.0.1", port: (server.address() as AddressInfo).port });
    const before = Date.now();
    await roundTrip(relay.port);
    await roundTrip(relay.port);
    const counts = await relay.counts();
    expect(counts.connections).toBe(2);
    expect(counts.history).toHaveLength(2);
    for (const c of counts.history) {
      expect(c.openedAt).toBeGreaterThanOrEqual(before);
      expect(c.closedBy).toBe("client");
    }
    expect(await relay.loopDelayMs()).toBeGreaterThanOrEqual(0);
  });

  it("keeps relaying while the main thread is blocked", async () => {
    helper = new Worker(HELPER, { eval: true });
    const { port: echoPort } = await nextMessage<{ port: number }>(helper, "echo");
    relay = await startRelayThread({ host: "127.0.0.1", port: echoPort });
    const first = nextMessage(helper, "first");
    helper.postMessage({ type: "ping-through", port: relay.port });
    await first;
    // The main thread busy for 1.5 s, as a 5000-node list's parse or the report writers hold it.
    const blockedFrom = Date.now();
    while (Date.now() - blockedFrom < 1_500);
    const blockedTo = Date.now();
    const answeredMsg = nextMessage<{ at: number[] }>(helper, "answered");
    helper.postMessage({ type: "answered" });
    const { at } = await answeredMsg;
    // Round trips through the relay went on while this thread could run nothing.
    const during = at.filter((t) => t > blockedFrom + 100 && t < blockedTo);
    expect(during.length, `round trips answered during the block (${at.length} in all)`).toBeGreaterThan(0);
    expect((await relay.counts()).connections).toBe(1);
  });

  it("closes: no longer listening, and questions after it fail", async () => {
    server = createServer((s) => s.on("error", () => undefined).pipe(s));
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    relay = await startRelayThread({ host: "127.0.0.1", port: (server.address() as AddressInfo).port });
    const { port } = relay;
    await relay.close();
    await expect(roundTrip(port)).rejects.toThrow(/ECONNREFUSED/);
    await expect(relay.counts()).rejects.toThrow(/the relay thread exited/);
  });
});
