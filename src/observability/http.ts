// HTTP endpoints for probes and scraping: /healthz, /readyz and /metrics, on one or two listeners.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { listenOn } from "./listen.js";

export interface ProbeHandlers {
  /** Liveness: the process is able to make progress. */
  healthy(): { ok: boolean; detail: string };
  /** Readiness: the component is doing its job (for the plugin: serving and registered). */
  ready(): { ok: boolean; detail: string };
  /** Prometheus text; absent on a listener that serves only probes. */
  metrics?: () => Promise<string>;
}

export interface ListeningEndpoint {
  readonly server: Server;
  readonly port: number;
  close(): Promise<void>;
}

/** Where an endpoint listens: `host` undefined is every address of both families (cli/flags.ts, parseListenAddress). */
export interface ListenAddress {
  host: string | undefined;
  port: number;
}

/** Starts an HTTP listener serving the given handlers; resolves once it is listening. */
export async function listenProbes(
  address: ListenAddress,
  handlers: ProbeHandlers,
): Promise<ListeningEndpoint> {
  const server = createServer((req, res) => void respond(req.url, res));
  async function respond(url: string | undefined, res: ServerResponse): Promise<void> {
    const path = (url ?? "/").split("?")[0];
    const send = (status: number, body: string, type = "text/plain; charset=utf-8"): void => {
      res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
      res.end(body);
    };
    try {
      if (path === "/healthz" || path === "/livez") {
        const r = handlers.healthy();
        send(r.ok ? 200 : 503, `${r.detail}\n`);
      } else if (path === "/readyz") {
        const r = handlers.ready();
        send(r.ok ? 200 : 503, `${r.detail}\n`);
      } else if (path === "/metrics" && handlers.metrics) {
        send(200, await handlers.metrics(), "text/plain; version=0.0.4; charset=utf-8");
      } else {
        send(404, "not found\n");
      }
    } catch (err) {
      send(500, `${(err as Error).message}\n`);
    }
  }
  // Keep-alive sockets from scrapers must not hold shutdown up.
  server.keepAliveTimeout = 5_000;
  await listenOn(server, address);
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Serves metrics and probes on `metricsAddr` and the probes alone on `healthAddr`; one listener when the
 * two are the same address, none for an address that is undefined (disabled).
 */
export async function listenEndpoints(
  metricsAddr: ListenAddress | undefined,
  healthAddr: ListenAddress | undefined,
  handlers: ProbeHandlers,
): Promise<ListeningEndpoint[]> {
  const listeners: ListeningEndpoint[] = [];
  try {
    if (metricsAddr) listeners.push(await listenProbes(metricsAddr, handlers));
    const same =
      metricsAddr &&
      healthAddr &&
      metricsAddr.host === healthAddr.host &&
      metricsAddr.port === healthAddr.port;
    if (healthAddr && !same)
      listeners.push(await listenProbes(healthAddr, { ...handlers, metrics: undefined }));
  } catch (err) {
    await Promise.all(listeners.map((l) => l.close()));
    throw err;
  }
  return listeners;
}
