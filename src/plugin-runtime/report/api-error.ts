// The plugin API client's one error type, from an API server's Status answer or a failed connection.
import { record } from "./json.js";

export interface ApiErrorDetails {
  /** HTTP status code; 0 when no answer arrived (refused, reset, timed out, aborted). */
  code: number;
  /** The API's `Status.reason` (NotFound, Forbidden, ...), or the network error's code. */
  reason: string;
  retryAfterSeconds?: number;
  cause?: unknown;
}

/** A failed request; `message` is the API server's own message when it answered. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, details: ApiErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "ApiError";
    this.code = details.code;
    this.reason = details.reason;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }

  /** Worth retrying soon: no answer, throttled, or a server-side failure. */
  get transient(): boolean {
    return this.code === 0 || this.code === 429 || this.code >= 500;
  }
}

interface StatusBody {
  message?: unknown;
  reason?: unknown;
  details?: { retryAfterSeconds?: unknown };
}

/** A request that got no answer: refused, reset, timed out or aborted. */
export function networkError(req: { method: string; path: string }, err: Error): ApiError {
  const code = (err as NodeJS.ErrnoException).code ?? err.name;
  return new ApiError(`${req.method} ${req.path}: ${err.message}`, {
    code: 0,
    reason: code === "ABORT_ERR" ? "Aborted" : code,
    cause: err,
  });
}

/** The error an API server's answer `status` means: its Status message and reason, and any Retry-After. */
export function statusError(
  status: number,
  parsed: unknown,
  body: Buffer,
  retryAfterHeader: string | undefined,
): ApiError {
  const statusBody = record(parsed) as StatusBody;
  const message =
    typeof statusBody.message === "string" && statusBody.message !== ""
      ? statusBody.message
      : body.toString("utf8").slice(0, 512).trim() || `HTTP ${status}`;
  const fromBody = statusBody.details?.retryAfterSeconds;
  const fromHeader = retryAfterHeader === undefined ? NaN : Number(retryAfterHeader);
  return new ApiError(message, {
    code: status,
    reason: typeof statusBody.reason === "string" ? statusBody.reason : `HTTP${status}`,
    retryAfterSeconds:
      typeof fromBody === "number" ? fromBody : Number.isFinite(fromHeader) ? fromHeader : undefined,
  });
}
