// A plain-HTTP front of the test cluster's API server that answers 404 for the API group versions a test
// hides, as an API server that does not serve them would (resource.k8s.io/v1 turned off with
// --runtime-config), and passes everything else through, watches included. A process whose kubeconfig
// points here (startOperator's apiServer) sees a cluster without those groups; everyone else sees the
// real one. Requests keep their own credentials: the proxy adds none.
import type { KubeConfig } from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";

export interface ApiGroupProxy {
  /** http://127.0.0.1:<port>, to use as the API server's address. */
  url: string;
  /** Group versions as paths, e.g. /apis/resource.k8s.io/v1: answered 404 from now on (replaces the list). */
  hide(paths: readonly string[]): void;
  /** Requests answered 404 so far, by path. */
  hiddenRequests: string[];
  close(): Promise<void>;
}

/** The body kube-apiserver sends for a path nothing serves. */
const NOT_FOUND = JSON.stringify({
  kind: "Status",
  apiVersion: "v1",
  metadata: {},
  status: "Failure",
  message: "the server could not find the requested resource",
  reason: "NotFound",
  details: {},
  code: 404,
});

function hides(paths: readonly string[], requestPath: string): boolean {
  const path = requestPath.split("?")[0] ?? "";
  return paths.some((p) => path === p || path.startsWith(`${p}/`));
}

/** Starts the proxy in front of `kc`'s current cluster, hiding `paths` from the start. */
export async function startApiGroupProxy(kc: KubeConfig, paths: readonly string[]): Promise<ApiGroupProxy> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("kubeconfig has no current cluster");
  const target = new URL(cluster.server);
  const ca = cluster.caData
    ? Buffer.from(cluster.caData, "base64")
    : cluster.caFile
      ? readFileSync(cluster.caFile)
      : undefined;
  const agent = new https.Agent({ keepAlive: true, ...(ca ? { ca } : {}) });
  let hidden = [...paths];
  const hiddenRequests: string[] = [];
  const sockets = new Set<Socket>();

  const server = http.createServer((req, res) => {
    const url = req.url ?? "/";
    if (hides(hidden, url)) {
      hiddenRequests.push(url);
      req.resume();
      res.writeHead(404, { "Content-Type": "application/json" }).end(NOT_FOUND);
      return;
    }
    const upstream = https.request(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: url,
        headers: { ...req.headers, host: target.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // Node holds headers back until the first body byte; a watch with no events yet would leave its
        // client waiting for them, and a client cannot abort a watch it has no answer for.
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    upstream.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(`api-group-proxy: ${err.message}`);
    });
    // A client that goes away (a watch it stops) ends the upstream request too.
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hide(next) {
      hidden = [...next];
    },
    hiddenRequests,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
      agent.destroy();
    },
  };
}
