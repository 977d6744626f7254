// The HTTPS listener of the conversion webhook: POST /convert answers ConversionReviews; every replica
// serves it, leader or not, because the API server calls whichever pod its Service picks. The serving
// certificate can be swapped while serving (rotation): new connections get the new one, established
// connections keep the one they were opened with, which stays valid until it expires.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { systemClock, type Clock } from "../kube/clock.js";
import { LogRateLimiter } from "../observability/log-rate.js";
import { reviewConversion, type ConversionOutcome } from "./conversion.js";
import { ReviewBudget } from "./review-budget.js";

export const CONVERT_PATH = "/convert";

/** A PEM certificate chain and its private key. */
export interface ServingCertificate {
  certPem: string;
  keyPem: string;
}

export interface ConversionWebhookOptions {
  /** Undefined: every address of both families (see parseListenAddress). */
  host: string | undefined;
  port: number;
  logger: Logger;
  /** Called after every review, for metrics. */
  onReview?: (outcome: ConversionOutcome, seconds: number) => void;
  /** Larger bodies are refused (413) without being read further. */
  maxBodyBytes?: number;
  /** Bytes of reviews read and converted at once (default: the body limit, so one review of that size). */
  maxBytesInFlight?: number;
  /** Reviews waiting for room at most; more are refused with 429 at once. */
  maxReviewsWaiting?: number;
  /** How long a review waits for room before it is refused with 429 (the API server retries it). */
  maxWaitMs?: number;
  /** Log lines of refused reviews and conversion warnings per 10 s at most (default 20). */
  warningLinesPer10s?: number;
  clock?: Pick<Clock, "setTimer">;
}

/**
 * How long an idle connection stays open: longer than the API server keeps an idle webhook connection
 * for reuse (client-go's transport, IdleConnTimeout 90 s). With Node's default of 5 s the webhook closed
 * connections the API server was about to reuse, and a conversion POST sent on one failed with
 * "connection reset by peer" (config fuzzing hit it under load: a create or read failing at random).
 */
export const KEEP_ALIVE_TIMEOUT_MS = 120_000;

/**
 * The largest review the webhook reads. The API server sends one review per object it reads or writes, and one
 * per list for all of the list's items that need conversion (apiextensions-apiserver
 * pkg/apiserver/conversion/webhook_converter.go, `Convert`). One object is at most 3 MiB: the API server refuses
 * a write body over that (apiserver's `MaxRequestBodyBytes`), and etcd's default request limit is 1.5 MiB. So
 * 4 MiB holds any single object with the review around it, and a list of about 6,000 configs of the samples'
 * size (0.68 MiB per 1,000 with managedFields). A larger list is refused with a message naming the limit; lists
 * in the storage version need no conversion at all.
 *
 * The heap is why not more: converting a review takes about 6.5 bytes of heap per byte of body (measured with
 * lists of the samples under the Deployment's flags), and the operator runs in a 160 MiB old space whose live
 * heap reaches 72 MiB at 5,000 nodes (config/manager/deployment.yaml). 4 MiB in flight is about 26 MiB.
 */
export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** The API server's webhook client waits 30 s; a review queued this long still has time to be answered. */
const DEFAULT_MAX_WAIT_MS = 10_000;
const DEFAULT_MAX_REVIEWS_WAITING = 64;

export class ConversionWebhookServer {
  private server: Server | undefined;
  private served: ServingCertificate | undefined;
  private readonly budget: ReviewBudget;
  private readonly warnings: LogRateLimiter;
  private readonly limit: number;

  constructor(private readonly opts: ConversionWebhookOptions) {
    this.limit = opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.budget = new ReviewBudget({
      maxBytes: Math.max(opts.maxBytesInFlight ?? this.limit, this.limit),
      maxWaiting: opts.maxReviewsWaiting ?? DEFAULT_MAX_REVIEWS_WAITING,
      maxWaitMs: opts.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
      clock: opts.clock ?? systemClock,
    });
    this.warnings = new LogRateLimiter({ linesPerWindow: opts.warningLinesPer10s ?? 20, windowMs: 10_000 });
  }

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
    const limit = this.limit;
    const declared = declaredLength(req.headers["content-length"]);
    if (declared !== undefined && declared > limit) return refuseUnread(req, res, 413, tooLarge(limit));
    // A body of unknown length may be as long as the limit allows.
    const release = await this.budget.acquire(declared ?? limit);
    if (!release) {
      res.setHeader("Retry-After", "1");
      return refuseUnread(req, res, 429, {
        message: `too many conversion reviews in flight (${this.budget.bytesInFlight} bytes); retry`,
      });
    }
    try {
      const body = await readBody(req, limit, declared);
      if (body === "too large") return refuseUnread(req, res, 413, tooLarge(limit));
      if (body === undefined) {
        this.opts.logger.debug({ declared }, "webhook request aborted");
        return;
      }
      this.answer(res, reviewConversion(body.toString("utf8")), started);
    } finally {
      release();
    }
  }

  private answer(res: ServerResponse, outcome: ConversionOutcome, started: number): void {
    const result = outcome.review.response.result;
    // Who sends reviews is not up to the cluster (any pod that reaches the port can): their warnings are
    // capped so a flood of refused reviews cannot flood the log.
    const lines = [
      ...(result.status === "Failure" ? [{ refused: result.message }] : []),
      ...outcome.warnings.map((warning) => ({ warning })),
    ];
    for (const line of lines) {
      const decision = this.warnings.take();
      if (!decision.write) continue;
      const fields = {
        uid: outcome.review.response.uid,
        ...(decision.suppressed > 0 ? { suppressed: decision.suppressed } : {}),
      };
      if ("refused" in line)
        this.opts.logger.warn(
          { ...fields, to: outcome.desiredAPIVersion, objects: outcome.objects, message: line.refused },
          "conversion refused",
        );
      else this.opts.logger.warn(fields, line.warning);
    }
    // A Failure is still a well-formed review: the API server reads the result and shows its message.
    send(res, 200, outcome.review);
    this.opts.onReview?.(outcome, (performance.now() - started) / 1000);
  }
}

function tooLarge(limit: number): { message: string } {
  return {
    message: `request body over ${limit} bytes: a ConversionReview of one object or of a list's items fits in ${limit} bytes; read large lists in the storage version`,
  };
}

/** The Content-Length header as a number, or undefined when absent or not a plain count. */
function declaredLength(header: string | undefined): number | undefined {
  if (header === undefined || !/^\d{1,15}$/.test(header)) return undefined;
  return Number(header);
}

/**
 * The body in one buffer, copied once: into a buffer of the declared size when the client said it, otherwise
 * gathered up to the limit. "too large" once it passes the limit (or its declared size); undefined when the
 * client went away.
 */
async function readBody(
  req: IncomingMessage,
  limit: number,
  declared: number | undefined,
): Promise<Buffer | "too large" | undefined> {
  const into = declared !== undefined ? Buffer.allocUnsafe(declared) : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (size + chunk.length > (declared ?? limit)) return "too large";
      if (into) chunk.copy(into, size);
      else chunks.push(chunk);
      size += chunk.length;
    }
  } catch {
    return undefined;
  }
  if (into) return size === declared ? into : undefined;
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

/** Answers without reading the body, and closes the connection: the unread body cannot be skipped on it. */
function refuseUnread(req: IncomingMessage, res: ServerResponse, status: number, body: unknown): void {
  res.setHeader("Connection", "close");
  send(res, status, body);
  res.once("finish", () => req.destroy());
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
