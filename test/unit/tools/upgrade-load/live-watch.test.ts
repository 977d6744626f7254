// LiveWatch against a scripted API server on loopback: a watch that ends is opened again from the last
// resourceVersion it was shown, an error it resumes from is kept but is no gap, an expired version (410)
// is a gap and starts again from the current state, and a watch still failing when stopped is a gap.
import { KubeConfig } from "@kubernetes/client-node";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../../../tools/cluster/wait.js";
import { LiveWatch } from "../../../../tools/upgrade-load/live-watch.js";

type Answer = (res: ServerResponse) => void;

let server: Server | undefined;

/** A server that answers the n-th watch request with answers[n] (the last one again after that). */
async function scripted(answers: Answer[]): Promise<{ kc: KubeConfig; versions: (string | null)[] }> {
  const versions: (string | null)[] = [];
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    versions.push(url.searchParams.get("resourceVersion"));
    answers[Math.min(versions.length - 1, answers.length - 1)]!(res);
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return { kc, versions };
}

const event = (type: string, rv: string): string =>
  `${JSON.stringify({ type, object: { metadata: { name: "n", resourceVersion: rv } } })}\n`;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

describe("LiveWatch", () => {
  it("resumes from the last version after an end and after a 429, and counts a 410 as a gap", async () => {
    const { kc, versions } = await scripted([
      // Two events, then the server ends the watch (as the API server does at its timeout).
      (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(event("ADDED", "1") + event("MODIFIED", "2"));
      },
      // Busy: resumed from, not a gap.
      (res) => {
        res.writeHead(429);
        res.end();
      },
      // The version expired: a gap, and the next watch starts from the current state.
      (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(`${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410 } })}\n`);
      },
      // The current state, and the watch stays open.
      (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(event("ADDED", "5"));
      },
    ]);
    const seen: string[] = [];
    const watch = new LiveWatch(
      kc,
      "/api/v1/nodes",
      {},
      (type, obj: { metadata: { resourceVersion: string } }) =>
        seen.push(`${type} ${obj.metadata.resourceVersion}`),
    );
    await watch.start();
    await waitFor("the fourth watch's event", () => seen.length === 3, { timeoutMs: 5_000, intervalMs: 10 });
    watch.stop();
    expect(seen).toEqual(["ADDED 1", "MODIFIED 2", "ADDED 5"]);
    expect(versions.slice(0, 4)).toEqual([null, "2", "2", null]);
    const health = watch.health();
    expect(health.events).toBe(3);
    expect(health.restarts).toBe(3);
    expect(health.errors).toEqual([
      "/api/v1/nodes: Too Many Requests",
      expect.stringContaining("ERROR event"),
    ]);
    expect(health.gaps).toEqual(["/api/v1/nodes: resourceVersion 2 expired (410)"]);
  });

  it("counts a watch still failing when it is stopped as a gap", async () => {
    const { kc, versions } = await scripted([
      (res) => {
        res.writeHead(500);
        res.end();
      },
    ]);
    const watch = new LiveWatch(kc, "/api/v1/nodes", {}, () => undefined);
    await watch.start();
    await waitFor("a second attempt", () => versions.length >= 2, { timeoutMs: 5_000, intervalMs: 10 });
    watch.stop();
    expect(watch.events).toBe(0);
    expect(watch.gaps).toEqual([expect.stringContaining("still failing when stopped")]);
  });
});
