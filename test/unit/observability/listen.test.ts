// listenOn listens as server.listen() does for a process that is no cluster worker (the addresses, the
// errors, the close), without loading node:cluster, child_process or dgram.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection, createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { listenOn } from "../../../src/observability/listen.js";

const repo = join(import.meta.dirname, "..", "..", "..");
const work = mkdtempSync(join(tmpdir(), "dpo-listen-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

function server(): Server {
  const s = createServer((socket) => socket.end("hello"));
  servers.push(s);
  return s;
}

function greeting(target: { path: string } | { host: string; port: number }): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection(target as { path: string });
    let data = "";
    socket.on("data", (chunk: Buffer) => (data += chunk.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
  });
}

describe("listenOn", () => {
  it("a unix socket: accepts there, and address() names it", async () => {
    const s = server();
    const path = join(work, "a.sock");
    await listenOn(s, { path });
    expect(s.listening).toBe(true);
    expect(s.address()).toBe(path);
    expect(await greeting({ path })).toBe("hello");
  });

  it("a unix socket in use: rejects with EADDRINUSE naming it, and leaves the server closed", async () => {
    const path = join(work, "b.sock");
    await listenOn(server(), { path });
    const second = server();
    await expect(listenOn(second, { path })).rejects.toMatchObject({ code: "EADDRINUSE", address: path });
    expect(second.listening).toBe(false);
  });

  it.each([
    { name: "no host: every address", host: undefined, connect: "127.0.0.1" },
    { name: "an empty host: every address", host: "", connect: "127.0.0.1" },
    { name: "an IPv4 literal", host: "127.0.0.1", connect: "127.0.0.1" },
    { name: "a name, looked up", host: "localhost", connect: "localhost" },
  ])("a TCP port on $name", async ({ host, connect }) => {
    const s = server();
    await listenOn(s, { host, port: 0 });
    const { port, address } = s.address() as AddressInfo;
    expect(port).toBeGreaterThan(0);
    if (host === "127.0.0.1") expect(address).toBe("127.0.0.1");
    expect(await greeting({ host: connect, port })).toBe("hello");
  });

  it("a server already listening: rejects, as listen() throws, and keeps listening where it was", async () => {
    const s = server();
    const path = join(work, "e.sock");
    await listenOn(s, { path });
    await expect(listenOn(s, { host: "127.0.0.1", port: 0 })).rejects.toThrow(/already listening/);
    expect(s.address()).toBe(path);
    expect(await greeting({ path })).toBe("hello");
  });

  it("a TCP port in use: rejects with EADDRINUSE", async () => {
    const first = server();
    await listenOn(first, { host: "127.0.0.1", port: 0 });
    const { port } = first.address() as AddressInfo;
    await expect(listenOn(server(), { host: "127.0.0.1", port })).rejects.toMatchObject({
      code: "EADDRINUSE",
    });
  });

  it("loads none of node:cluster, child_process and dgram, where server.listen() loads all three", () => {
    const script = (listen: string): string =>
      [
        `import { createServer } from "node:net";`,
        `import { listenOn } from ${JSON.stringify(join(repo, "src", "observability", "listen.ts"))};`,
        `const s = createServer();`,
        `await ${listen};`,
        `await listenOn(createServer(), { host: "127.0.0.1", port: 0 });`,
        `console.log(JSON.stringify(process.moduleLoadList.filter((m) => /^NativeModule (cluster|child_process|dgram)$/.test(m))));`,
        `process.exit(0);`,
      ].join("\n");
    const run = (listen: string): unknown => {
      const r = spawnSync(process.execPath, ["--input-type=module", "-e", script(listen)], {
        cwd: repo,
        encoding: "utf8",
      });
      expect(r.stderr).toBe("");
      return JSON.parse(r.stdout) as unknown;
    };
    const path = join(work, "c.sock");
    expect(run(`listenOn(s, { path: ${JSON.stringify(path)} })`)).toEqual([]);
    expect(
      run(`new Promise((resolve) => s.listen(${JSON.stringify(join(work, "d.sock"))}, resolve))`),
    ).toEqual(["NativeModule dgram", "NativeModule child_process", "NativeModule cluster"]);
  });
});
