// A small Kubernetes API client on node:https for the plugin, which cannot afford @kubernetes/client-node's memory.
// Where its credentials come from is credentials.ts; its error type, ApiError, is api-error.ts.
import { readFile } from "node:fs/promises";
import * as http from "node:http";
import * as https from "node:https";
import { ApiError, networkError, statusError } from "./api-error.js";
import { KubeconfigError, type ApiCredentials } from "./credentials.js";
import { parseJson, record } from "./json.js";

export { ApiError, type ApiErrorDetails } from "./api-error.js";
export {
  inClusterCredentials,
  KubeconfigError,
  loadKubeconfig,
  SERVICE_ACCOUNT_DIR,
  type ApiCredentials,
} from "./credentials.js";

/** Bound ServiceAccount tokens rotate (the kubelet refreshes the file at 80% of their life): re-read often. */
export const TOKEN_REFRESH_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 10_000;
const MAX_RESPONSE_BYTES = 8 * 2 ** 20;

export interface ApiRequest {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Path and query, e.g. `/apis/dpo.dev/v1beta1/namespaces/ns/devicenodestates/x?fieldManager=m`. */
  path: string;
  /** Sent as JSON (which is also YAML, so apply patches can use it). */
  body?: unknown;
  contentType?: string;
  /** Cancels the request (shutdown budgets). */
  signal?: AbortSignal;
}

export interface ApiClientOptions {
  /** Budget for a whole request, connection to last byte. */
  timeoutMs?: number;
  /** Tests shorten the token re-read interval. */
  tokenRefreshMs?: number;
}

/** One event of a watch stream, the object as the API server sent it. */
export interface WatchEvent<T = unknown> {
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK";
  readonly object: T;
}

export interface ApiWatchRequest {
  /** Collection path and query, `watch=true` included. */
  path: string;
  /**
   * A stream silent this long (no event, no bookmark) is given up as dead: a peer that vanished without
   * closing the connection would otherwise hold the watch open for good.
   */
  silenceTimeoutMs: number;
  /** Ends the watch (stop); the promise then rejects with an ApiError of reason Aborted. */
  signal?: AbortSignal;
}

/** One API server, one keep-alive agent, JSON in and out, typed errors. */
export class ApiClient {
  private readonly url: URL;
  private readonly agent: http.Agent;
  /**
   * Watches hold their HTTP/1.1 connection for minutes: on an agent of their own, so they never take one
   * of the two connections requests share, with a connection per watch (a second watch must not queue
   * behind the first). Kept alive, the next watch reuses the connection (no new TLS handshake every few
   * minutes).
   */
  private readonly watchAgent: http.Agent;
  private readonly timeoutMs: number;
  private readonly tokenRefreshMs: number;
  private cachedToken: { token: string; readAtMs: number } | undefined;

  constructor(
    private readonly credentials: ApiCredentials,
    options: ApiClientOptions = {},
  ) {
    this.url = new URL(credentials.server);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.tokenRefreshMs = options.tokenRefreshMs ?? TOKEN_REFRESH_MS;
    if (this.url.protocol === "https:") {
      const tls = {
        keepAlive: true,
        ca: credentials.ca,
        cert: credentials.clientCertificate,
        key: credentials.clientKey,
        rejectUnauthorized: credentials.insecureSkipTLSVerify !== true,
        servername: credentials.tlsServerName,
      };
      this.agent = new https.Agent({ ...tls, maxSockets: 2 });
      this.watchAgent = new https.Agent({ ...tls, maxFreeSockets: 1 });
    } else if (this.url.protocol === "http:") {
      this.agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
      this.watchAgent = new http.Agent({ keepAlive: true, maxFreeSockets: 1 });
    } else {
      throw new KubeconfigError(`server ${credentials.server}: want an https:// (or http://) URL`);
    }
  }

  get server(): string {
    return this.credentials.server;
  }

  /** Sends one request; resolves with the parsed JSON body, rejects with an ApiError. */
  async request<T = unknown>(req: ApiRequest): Promise<T> {
    const headers = await this.headers();
    let payload: Buffer | undefined;
    if (req.body !== undefined) {
      payload = Buffer.from(JSON.stringify(req.body));
      headers["Content-Type"] = req.contentType ?? "application/json";
      headers["Content-Length"] = String(payload.length);
    }
    const target = this.target(req.path);
    const transport = this.url.protocol === "https:" ? https : http;

    const {
      status,
      headers: responseHeaders,
      body,
    } = await new Promise<{
      status: number;
      headers: http.IncomingHttpHeaders;
      body: Buffer;
    }>((resolve, reject) => {
      const outgoing = transport.request(target, {
        method: req.method,
        headers,
        agent: this.agent,
        signal: req.signal,
      });
      const timer = setTimeout(() => {
        outgoing.destroy(
          new ApiError(`${req.method} ${req.path}: no answer within ${this.timeoutMs} ms`, {
            code: 0,
            reason: "Timeout",
          }),
        );
      }, this.timeoutMs);
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(err instanceof ApiError ? err : networkError(req, err));
      };
      outgoing.on("error", fail);
      outgoing.on("response", (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            response.destroy(
              new ApiError(`${req.method} ${req.path}: response larger than ${MAX_RESPONSE_BYTES} bytes`, {
                code: response.statusCode ?? 0,
                reason: "ResponseTooLarge",
              }),
            );
            return;
          }
          chunks.push(chunk);
        });
        response.on("error", fail);
        response.on("end", () => {
          clearTimeout(timer);
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
          });
        });
      });
      outgoing.end(payload);
    });

    const parsed = parseJson(body);
    if (status >= 200 && status < 300) return parsed as T;
    if (status === 401) this.cachedToken = undefined;
    throw statusError(status, parsed, body, responseHeaders["retry-after"]);
  }

  /**
   * Runs one watch: `onEvent` for every event as it arrives (bookmarks included, for their
   * resourceVersion). Resolves when the API server ends the stream (its timeoutSeconds); rejects with an
   * ApiError when the server refuses the watch (410 Gone included), sends an ERROR event (its Status
   * becomes the error: code 410 when the resourceVersion is too old), the connection breaks, the stream
   * stays silent for `silenceTimeoutMs`, or `signal` aborts it. The caller resumes or relists.
   */
  async watch<T = unknown>(req: ApiWatchRequest, onEvent: (event: WatchEvent<T>) => void): Promise<void> {
    const headers = await this.headers();
    const target = this.target(req.path);
    const transport = this.url.protocol === "https:" ? https : http;
    const where = `WATCH ${req.path}`;
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const outgoing = transport.request(target, {
        method: "GET",
        headers,
        agent: this.watchAgent,
        signal: req.signal,
      });
      const finish = (err?: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.signal?.removeEventListener("abort", onAbort);
        if (err === undefined) {
          resolve();
        } else {
          // A broken or abandoned stream must not go back to the agent for reuse.
          outgoing.destroy();
          reject(err);
        }
      };
      // Until the answer's headers: the request budget; after: the stream's allowed silence, re-armed on
      // every chunk.
      const arm = (ms: number, what: string): void => {
        clearTimeout(timer);
        timer = setTimeout(
          () => finish(new ApiError(`${where}: ${what} for ${ms} ms`, { code: 0, reason: "Timeout" })),
          ms,
        );
      };
      // Settled here at once, whatever state the request is in (waiting for a connection included).
      const onAbort = (): void => finish(new ApiError(`${where}: aborted`, { code: 0, reason: "Aborted" }));
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener("abort", onAbort, { once: true });
      arm(this.timeoutMs, "no answer");
      outgoing.on("error", (err) =>
        finish(err instanceof ApiError ? err : networkError({ method: "GET", path: req.path }, err)),
      );
      outgoing.on("response", (response) => {
        const status = response.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          // A refusal is an ordinary JSON Status: read it whole for the error.
          const chunks: Buffer[] = [];
          response.on("data", (chunk: Buffer) => chunks.push(chunk));
          response.on("error", (err) => finish(networkError({ method: "GET", path: req.path }, err)));
          response.on("end", () => {
            const body = Buffer.concat(chunks);
            finish(statusError(status, parseJson(body), body, response.headers["retry-after"]));
          });
          return;
        }
        arm(req.silenceTimeoutMs, "silent");
        let pending = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          if (settled) return;
          arm(req.silenceTimeoutMs, "silent");
          pending += chunk;
          // One JSON object per line; the last piece may be the start of the next one.
          let newline: number;
          while ((newline = pending.indexOf("\n")) >= 0) {
            const line = pending.slice(0, newline).trim();
            pending = pending.slice(newline + 1);
            if (line === "") continue;
            const err = this.deliver(where, line, onEvent);
            if (err !== undefined) {
              finish(err);
              return;
            }
          }
          if (pending.length > MAX_RESPONSE_BYTES) {
            finish(
              new ApiError(`${where}: an event larger than ${MAX_RESPONSE_BYTES} bytes`, {
                code: status,
                reason: "ResponseTooLarge",
              }),
            );
          }
        });
        response.on("error", (err) => finish(networkError({ method: "GET", path: req.path }, err)));
        response.on("end", () => finish());
      });
      outgoing.end();
    });
  }

  /** Hands one line of a watch stream to `onEvent`; an ERROR event, or a line that is no event, is returned. */
  private deliver<T>(
    where: string,
    line: string,
    onEvent: (event: WatchEvent<T>) => void,
  ): ApiError | undefined {
    const parsed = record(parseJson(Buffer.from(line, "utf8")));
    const type = parsed["type"];
    const object = parsed["object"];
    if (type === "ERROR") {
      const status = record(object);
      return statusError(
        typeof status["code"] === "number" ? status["code"] : 500,
        status,
        Buffer.from(line, "utf8"),
        undefined,
      );
    }
    if (type !== "ADDED" && type !== "MODIFIED" && type !== "DELETED" && type !== "BOOKMARK") {
      return new ApiError(`${where}: not a watch event: ${line.slice(0, 200)}`, {
        code: 0,
        reason: "MalformedEvent",
      });
    }
    onEvent({ type, object: object as T });
    return undefined;
  }

  /** Closes idle connections and any watch; in-flight requests finish or fail on their own. */
  close(): void {
    this.agent.destroy();
    this.watchAgent.destroy();
  }

  private async headers(): Promise<Record<string, string>> {
    const headers: Record<string, string> = { Accept: "application/json" };
    const token = await this.bearerToken();
    if (token !== undefined) headers["Authorization"] = `Bearer ${token}`;
    return headers;
  }

  private target(path: string): URL {
    const basePath = this.url.pathname.replace(/\/$/, "");
    return new URL(basePath + path, this.url);
  }

  private async bearerToken(): Promise<string | undefined> {
    const file = this.credentials.tokenFile;
    if (file === undefined) return this.credentials.token;
    const cached = this.cachedToken;
    if (cached !== undefined && Date.now() - cached.readAtMs < this.tokenRefreshMs) return cached.token;
    try {
      const token = (await readFile(file, "utf8")).trim();
      this.cachedToken = { token, readAtMs: Date.now() };
      return token;
    } catch (err) {
      // A token read a moment ago beats none while the kubelet swaps the file.
      if (cached !== undefined) return cached.token;
      throw new ApiError(`cannot read token file ${file}: ${(err as Error).message}`, {
        code: 0,
        reason: "TokenUnreadable",
        cause: err,
      });
    }
  }
}
