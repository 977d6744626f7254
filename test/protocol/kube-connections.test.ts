// The operator's API traffic reuses its TLS connections: no handshake per request, typed clients included.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEEP_ALIVE_MS, shareConnections } from "../../src/kube/connections.js";
import { defaultInterval } from "../../src/webhook/cert-controller.js";
import { kubeRequest } from "../../src/kube/request.js";
import { generatePki } from "../../tools/cluster/pki.js";
import { startFaultProxy, type FaultProxy } from "../cluster/fault-proxy.js";

const REQUESTS = 6;

describe("API connections", () => {
  let dir: string;
  let server: Server;
  let handshakes = 0;
  let kubeconfigText: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dpo-connections-"));
    const pki = await generatePki(dir);
    server = createServer(
      { cert: await readFile(pki.apiServerCert), key: await readFile(pki.apiServerKey) },
      (_req, res) => {
        res.setHeader("Content-Type", "application/json");
        res.end(JSON.stringify({ kind: "NamespaceList", apiVersion: "v1", metadata: {}, items: [] }));
      },
    );
    server.on("secureConnection", () => handshakes++);
    // As the API server: idle HTTP/1.1 connections close after 90 s (Node's default would be 5 s).
    server.keepAliveTimeout = 90_000;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const b64 = async (path: string): Promise<string> => (await readFile(path)).toString("base64");
    kubeconfigText = JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "c",
          cluster: {
            server: `https://127.0.0.1:${port}`,
            "certificate-authority-data": await b64(pki.caCert),
          },
        },
      ],
      users: [
        {
          name: "u",
          user: {
            "client-certificate-data": await b64(pki.adminCert),
            "client-key-data": await b64(pki.adminKey),
          },
        },
      ],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    });
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  const burst = async (kc: KubeConfig): Promise<void> => {
    for (let i = 0; i < REQUESTS / 2; i++) {
      await kubeRequest(kc, { method: "GET", path: "/api/v1/namespaces" });
      await kc.makeApiClient(CoreV1Api).listNamespace();
    }
  };
  /** Connections opened by a burst of requests sent after a first burst has filled the pool. */
  const newConnectionsOnceWarm = async (kc: KubeConfig): Promise<number> => {
    await burst(kc);
    const before = handshakes;
    await burst(kc);
    return handshakes - before;
  };

  it("with shareConnections, requests reuse the pool's connections: no handshake once it is warm", async () => {
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText);
    expect(await newConnectionsOnceWarm(shareConnections(kc))).toBe(0);
  });

  /** Connections opened by a request sent after the pool's connections rested for `idleMs`. */
  const newConnectionsAfterIdle = async (kc: KubeConfig, idleMs: number): Promise<number> => {
    await burst(kc);
    await new Promise((resolve) => setTimeout(resolve, idleMs)); // the idle time under test, not a wait
    const before = handshakes;
    await kubeRequest(kc, { method: "GET", path: "/api/v1/namespaces" });
    return handshakes - before;
  };

  it("a connection that rested longer than undici's default keep-alive (4 s) is reused, not reopened", async () => {
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText);
    const [kept, closed] = await Promise.all([
      newConnectionsAfterIdle(shareConnections(kc), 5_000),
      (async () => {
        const withDefault = new KubeConfig();
        withDefault.loadFromString(kubeconfigText);
        // undici's default, what client-node's own Agent keeps: the same rest costs a handshake.
        return newConnectionsAfterIdle(shareConnections(withDefault, 4_000), 5_000);
      })(),
    ]);
    expect({ kept, closed }).toEqual({ kept: 0, closed: 1 });
  });

  it("keeps idle connections past the operator's slowest periodic check and closes them before the API server does", () => {
    const year = 365 * 86_400_000;
    const slowestCheckMs = defaultInterval({
      hosts: [],
      caValidityMs: 10 * year,
      certValidityMs: year,
      settleMs: 0,
    });
    expect(API_KEEP_ALIVE_MS).toBeGreaterThan(slowestCheckMs + 10_000);
    expect(API_KEEP_ALIVE_MS).toBeLessThanOrEqual(90_000 - 10_000); // k8s.io/apiserver: IdleTimeout 90 s
  });

  it("without it, client-node 2 opens a connection per request (why shareConnections exists)", async () => {
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText);
    expect(await newConnectionsOnceWarm(kc)).toBe(REQUESTS);
  });
});

describe("API requests through connection resets", () => {
  let dir: string;
  let server: Http2SecureServer;
  let proxy: FaultProxy;
  let kubeconfigText: string;
  const versions = new Set<string>();
  let i = 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "dpo-resets-"));
    const pki = await generatePki(dir);
    // Like kube-apiserver: HTTP/2 offered, HTTP/1.1 accepted.
    server = createSecureServer(
      {
        cert: await readFile(pki.apiServerCert),
        key: await readFile(pki.apiServerKey),
        allowHTTP1: true,
      },
      (req, res) => {
        versions.add(req.httpVersion);
        // A list of some size (tens of kB, several chunks on the wire), answered after a moment, so
        // resets land in the middle of responses too.
        const items = Array.from({ length: 200 }, (_, i) => ({
          metadata: { name: `ns-${i}`, annotations: { note: "x".repeat(100) } },
        }));
        setTimeout(() => {
          res.setHeader("Content-Type", "application/json");
          res.end(JSON.stringify({ kind: "NamespaceList", apiVersion: "v1", metadata: {}, items }));
        }, i++ % 20);
      },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    proxy = await startFaultProxy({ host: "127.0.0.1", port: (server.address() as AddressInfo).port }, 7);
    proxy.setFaults({
      resetPerChunk: 0.05,
      delayPerChunk: 0.2,
      maxDelayMs: 200,
      dropAfterMs: [1_000, 3_000],
    });
    const b64 = async (path: string): Promise<string> => (await readFile(path)).toString("base64");
    kubeconfigText = JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "c", cluster: { server: proxy.url, "certificate-authority-data": await b64(pki.caCert) } },
      ],
      users: [
        {
          name: "u",
          user: {
            "client-certificate-data": await b64(pki.adminCert),
            "client-key-data": await b64(pki.adminKey),
          },
        },
      ],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    });
  });

  afterAll(async () => {
    await proxy.close();
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  it("every request settles, answered or failed, never left hanging", async () => {
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText);
    shareConnections(kc);
    const counts = { ok: 0, failed: 0 };
    const hung: number[] = [];
    const until = Date.now() + 8_000;
    const worker = async (): Promise<void> => {
      while (Date.now() < until) {
        const sent = Date.now();
        let watchdog: NodeJS.Timeout | undefined;
        const outcome = await Promise.race([
          kubeRequest(kc, { method: "GET", path: "/api/v1/namespaces" }).then(
            () => "ok" as const,
            () => "failed" as const,
          ),
          new Promise<"hung">((resolve) => (watchdog = setTimeout(() => resolve("hung"), 5_000))),
        ]);
        clearTimeout(watchdog);
        if (outcome === "hung") {
          // A request with no answer and no error after 5 s: this worker is stuck for good.
          hung.push(sent);
          return;
        }
        counts[outcome]++;
      }
    };
    await Promise.all(Array.from({ length: 6 }, worker));
    const faults = proxy.counts();
    expect(faults.resets, "the proxy reset connections").toBeGreaterThan(0);
    expect(counts.failed, "resets surface as errors").toBeGreaterThan(0);
    expect(counts.ok).toBeGreaterThan(0);
    // The server offers HTTP/2, as kube-apiserver does; dpo's client speaks HTTP/1.1 to it.
    expect([...versions]).toEqual(["1.1"]);
    expect(hung, `requests left unanswered (${JSON.stringify({ ...counts, ...faults })})`).toEqual([]);
  }, 30_000);
});
