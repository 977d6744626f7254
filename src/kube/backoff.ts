// Exponential backoff: the one rule for how long to wait after consecutive failures, shared by the work queue,
// the informer, the storage migration and the plugin's node-report writer. Pure: callers keep their own
// failure counts. It imports nothing, so the plugin may use it without loading the controller machinery.

/**
 * The bounds of a backoff; it has no jitter (none of its callers had any). The callers' defaults: the work
 * queue 5 ms to 5 min per key; the informer 500 ms to 5 s, counting again from the first after a minute
 * without failures; the storage migration 200 ms to 10 s per request and the node-report writer 500 ms
 * to 8 s, both lengthened to a server's Retry-After.
 */
export interface ExponentialBackoff {
  /** The delay after the first failure. */
  baseMs: number;
  /** The longest delay, however many failures, and however long a server's Retry-After asks for. */
  maxMs: number;
}

/**
 * The delay after `failures` consecutive failures, this one included: `baseMs` after the first, doubling
 * with each further one up to `maxMs`. A server's Retry-After (`retryAfterMs`) lengthens it, never past
 * `maxMs`, and never shortens it.
 */
export function backoffDelayMs(backoff: ExponentialBackoff, failures: number, retryAfterMs?: number): number {
  // 2 ** 1024 is Infinity, and 0 * Infinity is NaN: past 1023 doublings the ceiling is reached anyway.
  const doublings = Math.min(Math.max(failures - 1, 0), 1023);
  const delay = Math.min(backoff.maxMs, backoff.baseMs * 2 ** doublings);
  return retryAfterMs === undefined ? delay : Math.max(delay, Math.min(backoff.maxMs, retryAfterMs));
}
