// The HTTPS listener of the conversion webhook: POST /convert answers ConversionReviews; every replica
// serves it, leader or not, because the API server calls whichever pod its Service picks. The serving
// certificate can be swapped while serving (rotation): new connections get the new one, established
// connections keep the one they were opened with, which stays valid until it expires.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { reviewConversion, type ConversionOutcome } from "./conversion.js";

export const CONVERT_PATH = "/convert";

/** A PEM certificate chain and its private key. */
export interface ServingCertificate {
  certPem: string;
  keyPem: string;
}

export interface ConversionWebhookOptions {
  host: string;
  port: number;
  logger: Logger;
  /** Called after every review, for metrics. */
  onReview?: (outcome: ConversionOutcome, seconds: number) => void;
  /** Larger bodies are refused (413) without being read further. */
  maxBodyBytes?: number;
}

/**
 * How long an idle connection stays open: longer than the API server keeps an idle webhook connection
 * for reuse (client-go's transport, IdleConnTimeout 90 s). With Node's default of 5 s the webhook closed
 * connections the API server was about to reuse, and a conversion POST sent on one failed with
 * "connection reset by peer" (config fuzzing hit it under load: a create or read failing at random).
 */
export const KEEP_ALIVE_TIMEOUT_MS = 120_000;

/** A list of 1000 DevicePluginConfigs is about 2 MiB; the API server's own request limit is 3 MiB per object. */
const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

export class ConversionWebhookServer {
  private server: Server | undefined;
  private served: ServingCertificate | undefined;

  constructor(private readonly opts: ConversionWebhookOptions) {}

  /** The certificate new connections get, once one was set. */
  get certificate(): ServingCertificate | undefined {
    return this.served;
  }

  /**
   * Listens, with the given certificate or none yet (handshakes fail until `setCertificate`, and the
   * replica reports not ready meanwhile); resolves with the bound port.
   */
  async start(cert?: ServingCertificate): Promise<number> {
    this.served = cert;
    const server = createServer(
      {
        ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
        minVersion: "TLSv1.2",
        // The API server's webhook client times out at 30 s by default; a stuck peer must not hold a socket.
        requestTimeout: 30_000,
        headersTimeout: 10_000,
        keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      },
      (req, res) => void this.handle(req, res),
    );
    server.on("tlsClientError", (err) =>
      this.opts.logger.debug({ err: err.message }, "webhook TLS handshake failed"),
    );
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    return (server.address() as AddressInfo).port;
  }

  /** Serves a new certificate to new connections. */
  setCertificate(cert: ServingCertificate): void {
    if (this.served?.certPem === cert.certPem && this.served.keyPem === cert.keyPem) return;
    this.server?.setSecureContext({ cert: cert.certPem, key: cert.keyPem });
    this.served = cert;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "").split("?")[0];
    if (path !== CONVERT_PATH)
      return send(res, 404, { message: `no handler for ${path}; POST ${CONVERT_PATH}` });
    if (req.method !== "POST") {
      res.setHeader("Allow", "POST");
      return send(res, 405, { message: `${req.method} ${CONVERT_PATH}: only POST is served` });
    }
    const started = performance.now();
    const limit = this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > limit) {
          res.setHeader("Connection", "close");
          send(res, 413, { message: `request body over ${limit} bytes` });
          req.destroy();
          return;
        }
        chunks.push(chunk);
      }
    } catch (err) {
      this.opts.logger.debug({ err: (err as Error).message }, "webhook request aborted");
      return;
    }
    const outcome = reviewConversion(Buffer.concat(chunks).toString("utf8"));
    const result = outcome.review.response.result;
    if (result.status === "Failure") {
      this.opts.logger.warn(
        {
          uid: outcome.review.response.uid,
          to: outcome.desiredAPIVersion,
          objects: outcome.objects,
          message: result.message,
        },
        "conversion refused",
      );
    }
    for (const warning of outcome.warnings)
      this.opts.logger.warn({ uid: outcome.review.response.uid }, warning);
    // A Failure is still a well-formed review: the API server reads the result and shows its message.
    send(res, 200, outcome.review);
    this.opts.onReview?.(outcome, (performance.now() - started) / 1000);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
