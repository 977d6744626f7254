// The fault proxy of the API-fault tests, over loopback: it must keep the byte stream intact while it
// delays, and its resets, drops and refusals must reach the client as such, or the fault tests prove
// nothing.
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startFaultProxy, type FaultProxy } from "../cluster/fault-proxy.js";
import { waitFor } from "../../tools/cluster/wait.js";

let echo: Server;
let proxy: FaultProxy | undefined;
const clients: Socket[] = [];

beforeEach(async () => {
  echo = createServer((s) => {
    s.on("error", () => undefined);
    s.pipe(s);
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  await proxy?.close();
  proxy = undefined;
  await new Promise<void>((resolve) => echo.close(() => resolve()));
});

async function start(seed = 1): Promise<FaultProxy> {
  proxy = await startFaultProxy({ host: "127.0.0.1", port: (echo.address() as AddressInfo).port }, seed);
  return proxy;
}

interface Client {
  socket: Socket;
  received(): string;
  closed(): { error?: string } | undefined;
}

async function client(p: FaultProxy): Promise<Client> {
  const socket = connect(p.port, "127.0.0.1");
  clients.push(socket);
  let data = "";
  let closed: { error?: string } | undefined;
  let error: string | undefined;
  socket.setEncoding("utf8").on("data", (d: string) => (data += d));
  socket.on("error", (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
  socket.on("close", () => (closed = { error }));
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  return { socket, received: () => data, closed: () => closed };
}

describe("fault proxy", () => {
  it("passes bytes through untouched without a plan", async () => {
    const p = await start();
    const c = await client(p);
    c.socket.write("hello");
    await waitFor("the echo", () => c.received() === "hello");
    expect(p.counts()).toMatchObject({ connections: 1, resets: 0, drops: 0, delayedChunks: 0 });
  });

  it("delays chunks but keeps them in order", async () => {
    const p = await start(7);
    p.setFaults({ resetPerChunk: 0, delayPerChunk: 0.5, maxDelayMs: 20, dropAfterMs: [60_000, 60_000] });
    const c = await client(p);
    const sent: string[] = [];
    for (let i = 0; i < 200; i++) {
      const piece = `<${i}>`;
      sent.push(piece);
      c.socket.write(piece);
      // Separate chunks on the wire, so each meets the dice.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const want = sent.join("");
    await waitFor("every byte echoed", (observe) => {
      observe(c.received().length);
      return c.received().length >= want.length;
    });
    expect(c.received()).toBe(want);
    expect(p.counts().delayedChunks).toBeGreaterThan(0);
    expect(p.counts().resets).toBe(0);
  });

  it("resets a connection mid-transfer: the client sees ECONNRESET", async () => {
    const p = await start();
    p.setFaults({ resetPerChunk: 1, delayPerChunk: 0, maxDelayMs: 0, dropAfterMs: [60_000, 60_000] });
    const c = await client(p);
    c.socket.write("doomed");
    const closed = await waitFor("the reset", () => c.closed());
    expect(closed.error).toBe("ECONNRESET");
    expect(p.counts().resets).toBe(1);
  });

  it("drops open connections within the plan's window, including those opened before the plan", async () => {
    const p = await start();
    const before = await client(p);
    p.setFaults({ resetPerChunk: 0, delayPerChunk: 0, maxDelayMs: 0, dropAfterMs: [50, 100] });
    const after = await client(p);
    await waitFor("both dropped", () => before.closed() && after.closed());
    expect(p.counts().drops).toBe(2);
  });

  it("refuses new connections and closes open ones while refusing, then serves again", async () => {
    const p = await start();
    const open = await client(p);
    p.setRefusing(true);
    await waitFor("the open one closed", () => open.closed());
    const refused = await client(p);
    await waitFor("the new one closed", () => refused.closed());
    expect(p.counts().refused).toBe(1);
    p.setRefusing(false);
    const again = await client(p);
    again.socket.write("back");
    await waitFor("the echo", () => again.received() === "back");
  });

  it("holds new connections during a hold and delivers what they sent once it ends", async () => {
    const p = await start();
    const open = await client(p);
    p.setHolding(true);
    await waitFor("the open one closed", () => open.closed());
    const held = await client(p);
    held.socket.write("waited");
    p.setHolding(false);
    await waitFor("the echo", () => held.received() === "waited");
    expect(p.counts()).toMatchObject({ held: 1, drops: 1 });
  });
});
