// A watch is given up after the silence its kind of stream allows: its own deadline plus a grace while the
// server sends it no bookmarks, the bookmark interval once it has. Against a local HTTP server that holds
// watch streams open and writes what each test tells it to.
import { KubeConfig } from "@kubernetes/client-node";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heartbeatAwareWatch } from "../../src/kube/watch.js";

const LIMITS = { heartbeatMs: 400, graceMs: 600 };

describe("heartbeatAwareWatch", () => {
  let server: Server;
  let kc: KubeConfig;
  const streams: ServerResponse[] = [];
  let opening: (res: ServerResponse) => void = () => undefined;

  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" });
      res.flushHeaders();
      streams.push(res);
      opening(res);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: "c",
          server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
  });

  afterAll(async () => {
    for (const res of streams) res.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Runs one watch; resolves with how long it lasted and how it ended. */
  const watchOnce = async (
    timeoutSeconds: number,
  ): Promise<{ ms: number; err: unknown; types: string[] }> => {
    const watch = heartbeatAwareWatch(kc, LIMITS);
    const started = performance.now();
    const types: string[] = [];
    return new Promise((resolve) => {
      void watch(
        "/api/v1/nodes",
        { timeoutSeconds, allowWatchBookmarks: true },
        (type) => types.push(type),
        (err) => resolve({ ms: performance.now() - started, err, types }),
      );
    });
  };

  it("a silent watch is left open until its deadline plus the grace, not cut at the heartbeat limit", async () => {
    opening = () => undefined; // never a byte
    const { ms, err } = await watchOnce(1);
    expect(String(err)).toMatch(/timeout/i);
    expect(ms).toBeGreaterThanOrEqual(1_000 + LIMITS.graceMs - 50);
  });

  it("once a bookmark came, silence longer than the heartbeat limit ends the watch", async () => {
    opening = (res) =>
      res.write(
        `${JSON.stringify({ type: "BOOKMARK", object: { kind: "Node", apiVersion: "v1", metadata: { resourceVersion: "7" } } })}\n`,
      );
    const { ms, err, types } = await watchOnce(30);
    expect(types).toEqual(["BOOKMARK"]);
    expect(String(err)).toMatch(/timeout/i);
    expect(ms).toBeGreaterThanOrEqual(LIMITS.heartbeatMs - 50);
    expect(ms).toBeLessThan(30_000);
  });

  it("a watch the server ends at its deadline ends cleanly, before any limit", async () => {
    opening = (res) => setTimeout(() => res.end(), 200);
    const { ms, err } = await watchOnce(30);
    expect(err).toBeNull();
    expect(ms).toBeLessThan(LIMITS.heartbeatMs);
  });
});
