// Typed Kubernetes API errors built from client-node's ApiException, keeping the API server's own message.
import { ApiException } from "@kubernetes/client-node";

/** One entry of `Status.details.causes`: for 422 Invalid, the field path and what is wrong with it. */
export interface StatusCause {
  field?: string;
  message?: string;
  reason?: string;
}

export interface KubeApiErrorDetails {
  /** HTTP status code; 0 when no response arrived (connection refused, reset, timed out). */
  code: number;
  /** `Status.reason` from the API server, e.g. NotFound, AlreadyExists, Conflict, Invalid, Expired. */
  reason?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
  cause?: unknown;
}

/** An error answered by (or on the way to) the API server. `message` is the server's own message. */
export class KubeApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly causes: StatusCause[];
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, details: KubeApiErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = details.code;
    this.reason = details.reason ?? "";
    this.causes = details.causes ?? [];
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

export class NotFoundError extends KubeApiError {}
/** 409: an optimistic-concurrency conflict, or (reason AlreadyExists) a create of an existing object. */
export class ConflictError extends KubeApiError {
  get alreadyExists(): boolean {
    return this.reason === "AlreadyExists";
  }
}
export class ForbiddenError extends KubeApiError {}
/** 422: the object was refused; `causes` name the fields. */
export class InvalidError extends KubeApiError {}
/** 410: the resourceVersion is too old (watch or continue token expired); relist. */
export class GoneError extends KubeApiError {}
/** Worth retrying as is: throttling, server errors, timeouts, no connection. */
export class TransientError extends KubeApiError {}

interface StatusBody {
  kind?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { causes?: StatusCause[]; retryAfterSeconds?: number };
}

const NETWORK_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  "UND_ERR_SOCKET",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/**
 * Converts anything a client-node call can throw into a typed error: ApiException (generated and
 * object clients), Watch errors (`statusCode`), a watch `ERROR` event's Status object, and network
 * errors. Other values come back unchanged (wrapped in an Error if they are not one).
 */
export function toKubeError(err: unknown): Error {
  if (err instanceof KubeApiError) return err;
  if (err instanceof ApiException) {
    const status = parseStatus((err as ApiException<unknown>).body);
    return fromStatus(err.code, status, err, retryAfterHeader(err.headers));
  }
  if (isStatusObject(err)) {
    return fromStatus(err.code ?? 0, err, undefined);
  }
  if (err instanceof Error) {
    const statusCode = (err as { statusCode?: unknown }).statusCode;
    if (typeof statusCode === "number") {
      return fromStatus(statusCode, { message: err.message }, err);
    }
    const code = (err as { code?: unknown }).code ?? (err.cause as { code?: unknown } | undefined)?.code;
    if (
      (typeof code === "string" && NETWORK_ERROR_CODES.has(code)) ||
      err.name === "FetchError" ||
      err.name === "TimeoutError"
    ) {
      return new TransientError(err.message, { code: 0, cause: err });
    }
    return err;
  }
  return new Error(String(err));
}

function fromStatus(code: number, status: StatusBody, cause: unknown, retryAfter?: number): KubeApiError {
  const details: KubeApiErrorDetails = {
    code,
    reason: status.reason,
    causes: status.details?.causes,
    retryAfterSeconds: status.details?.retryAfterSeconds ?? retryAfter,
    cause,
  };
  const message = status.message || `HTTP ${code}${status.reason ? ` ${status.reason}` : ""}`;
  switch (code) {
    case 404:
      return new NotFoundError(message, details);
    case 409:
      return new ConflictError(message, details);
    case 403:
      return new ForbiddenError(message, details);
    case 422:
      return new InvalidError(message, details);
    case 410:
      return new GoneError(message, details);
    case 0:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return new TransientError(message, details);
    default:
      return new KubeApiError(message, details);
  }
}

function parseStatus(body: unknown): StatusBody {
  if (typeof body === "string") {
    try {
      const parsed: unknown = JSON.parse(body);
      if (isStatusObject(parsed)) return parsed;
    } catch {
      // Not JSON (a proxy's HTML page, say): keep the text as the message.
    }
    return { message: body.trim().slice(0, 500) };
  }
  if (Buffer.isBuffer(body)) return parseStatus(body.toString("utf8"));
  if (isStatusObject(body)) return body;
  return {};
}

function isStatusObject(value: unknown): value is StatusBody {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { kind?: unknown }).kind === "Status" &&
    !(value instanceof Error)
  );
}

function retryAfterHeader(headers: Record<string, string> | undefined): number | undefined {
  const value = headers?.["retry-after"];
  const seconds = value === undefined ? NaN : Number(value);
  return Number.isFinite(seconds) ? seconds : undefined;
}

export const isNotFound = (err: unknown): boolean => toKubeError(err) instanceof NotFoundError;
export const isConflict = (err: unknown): boolean => toKubeError(err) instanceof ConflictError;
export const isAlreadyExists = (err: unknown): boolean => {
  const e = toKubeError(err);
  return e instanceof ConflictError && e.alreadyExists;
};
export const isForbidden = (err: unknown): boolean => toKubeError(err) instanceof ForbiddenError;
export const isInvalid = (err: unknown): boolean => toKubeError(err) instanceof InvalidError;
export const isGone = (err: unknown): boolean => toKubeError(err) instanceof GoneError;
export const isTransient = (err: unknown): boolean => toKubeError(err) instanceof TransientError;
