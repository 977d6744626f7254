// The plugin's API client's watch against a local TLS server: events as they arrive however the stream is cut,
// the end of a stream, errors, and silence.
import type { Server } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  ApiClient,
  ApiError,
  type ApiCredentials,
} from "../../../../src/plugin-runtime/report/api-client.js";
import { waitFor } from "../../../../tools/cluster/wait.js";
import {
  type Pki,
  makePki,
  type Seen,
  type Handler,
  json,
  serveTls,
  status,
  stopTls,
} from "./api-client-support.js";

let pki: Pki;
let server: Server;
let serverUrl: string;
let handler: Handler;
const seen: Seen[] = [];

beforeAll(async () => {
  pki = makePki();
  server = await serveTls(pki, seen, (req, res, body) => handler(req, res, body));
  serverUrl = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  seen.length = 0;
});

afterAll(() => stopTls(server, pki));

describe("ApiClient.watch", () => {
  const trusted = (): ApiCredentials => ({ server: serverUrl, ca: pki.ca, token: "watch-token" });
  const slice = (name: string, resourceVersion: string) => ({
    kind: "ResourceSlice",
    metadata: { name, resourceVersion },
  });
  const line = (type: string, object: unknown): string => `${JSON.stringify({ type, object })}\n`;

  it("delivers each event as it arrives, however the stream is cut, and resolves when the server ends it", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      const text =
        line("ADDED", slice("a", "1")) + line("BOOKMARK", slice("", "2")) + line("DELETED", slice("a", "3"));
      // Cut inside the first event and right after a newline: the client must join and split by lines.
      res.write(text.slice(0, 17));
      setTimeout(() => res.write(text.slice(17, text.indexOf("\n") + 1)), 10);
      setTimeout(() => res.end(text.slice(text.indexOf("\n") + 1)), 20);
    };
    const client = new ApiClient(trusted());
    const events: { type: string; name: string; rv: string }[] = [];
    await client.watch<{ metadata: { name: string; resourceVersion: string } }>(
      { path: "/apis/resource.k8s.io/v1/resourceslices?watch=true", silenceTimeoutMs: 5_000 },
      (e) =>
        events.push({ type: e.type, name: e.object.metadata.name, rv: e.object.metadata.resourceVersion }),
    );
    client.close();
    expect(events).toEqual([
      { type: "ADDED", name: "a", rv: "1" },
      { type: "BOOKMARK", name: "", rv: "2" },
      { type: "DELETED", name: "a", rv: "3" },
    ]);
    expect(seen[0]).toMatchObject({
      method: "GET",
      url: "/apis/resource.k8s.io/v1/resourceslices?watch=true",
    });
    expect(seen[0]?.headers["authorization"]).toBe("Bearer watch-token");
  });

  it("runs watches side by side, each on a connection of its own, beside ordinary requests", async () => {
    handler = (req, res) => {
      if (req.url === "/x") {
        json(res, 200, { ok: true });
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice(req.url ?? "", "1")));
    };
    const client = new ApiClient(trusted());
    const abort = new AbortController();
    const heard = new Set<string>();
    const watches = ["/w1", "/w2", "/w3"].map((path) =>
      client
        .watch<{ metadata: { name: string } }>(
          { path, silenceTimeoutMs: 30_000, signal: abort.signal },
          (e) => heard.add(e.object.metadata.name),
        )
        .catch((e: unknown) => e),
    );
    await waitFor("an event on every watch", () => heard.size === 3, { timeoutMs: 5_000, intervalMs: 5 });
    expect(await client.request({ method: "GET", path: "/x" })).toEqual({ ok: true });
    abort.abort();
    for (const ended of await Promise.all(watches)) expect(ended).toMatchObject({ reason: "Aborted" });
    client.close();
    server.closeAllConnections();
  });

  it("ends with the Status of an ERROR event, so a 410 Gone is told apart", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice("a", "1")));
      res.write(line("ERROR", status(410, "Expired", "too old resource version: 1 (99)")));
    };
    const client = new ApiClient(trusted());
    const types: string[] = [];
    const error = await client
      .watch({ path: "/w", silenceTimeoutMs: 5_000 }, (e) => types.push(e.type))
      .catch((e: unknown) => e);
    client.close();
    server.closeAllConnections();
    expect(types).toEqual(["ADDED"]);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      code: 410,
      reason: "Expired",
      message: "too old resource version: 1 (99)",
    });
  });

  it("rejects a refused watch with the API server's Status", async () => {
    handler = (_req, res) => json(res, 410, status(410, "Gone", "resourceVersion 5 is too old"));
    const client = new ApiClient(trusted());
    const error = await client
      .watch({ path: "/w", silenceTimeoutMs: 5_000 }, () => undefined)
      .catch((e: unknown) => e);
    client.close();
    expect(error).toMatchObject({ code: 410, reason: "Gone", message: "resourceVersion 5 is too old" });
  });

  it("gives a stream up after the silence it allows, and stops at once when aborted", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write(line("ADDED", slice("a", "1")));
    };
    const client = new ApiClient(trusted());
    const started = performance.now();
    const silent = await client
      .watch({ path: "/w", silenceTimeoutMs: 200 }, () => undefined)
      .catch((e: unknown) => e);
    expect(silent).toMatchObject({ code: 0, reason: "Timeout" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);

    const abort = new AbortController();
    const events: string[] = [];
    const aborted = client
      .watch({ path: "/w", silenceTimeoutMs: 30_000, signal: abort.signal }, (e) => {
        events.push(e.type);
        abort.abort();
      })
      .catch((e: unknown) => e);
    expect(await aborted).toMatchObject({ code: 0, reason: "Aborted" });
    expect(events).toEqual(["ADDED"]);
    client.close();
    server.closeAllConnections();
  });
});
