// The operator's API traffic reuses its TLS connections: no handshake per request, typed clients included.
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { shareConnections } from "../../src/kube/connections.js";
import { kubeRequest } from "../../src/kube/request.js";
import { generatePki } from "../../tools/cluster/pki.js";

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

  it("without it, client-node 2 opens a connection per request (why shareConnections exists)", async () => {
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText);
    expect(await newConnectionsOnceWarm(kc)).toBe(REQUESTS);
  });
});
