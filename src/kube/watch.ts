// One watch request of an informer, from start to how it ended, and how it reaches the API server:
// client-node's Watch, kept open past client-node's own inactivity limit and given up by a silence limit
// that follows the server's bookmarks.
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import type { Clock } from "./clock.js";
import { GoneError, toKubeError } from "./errors.js";
import type { QueryParams } from "./request.js";

/**
 * Starts one watch request (the shape of client-node's `Watch.watch`): `onEvent` per event, then
 * `onDone` once when the stream ends, with an error when it broke.
 */
export type WatchFn = (
  path: string,
  query: QueryParams,
  onEvent: (type: string, object: unknown) => void,
  onDone: (err: unknown) => void,
) => Promise<{ abort(): void }>;

/**
 * How a watch ended without failing: the server closed it (its timeoutSeconds), its resourceVersion
 * expired (410 Gone: relist), or the informer stopped it.
 */
export type WatchOutcome = "closed" | "expired" | "stopped";

/** A server-side watch timeout from 5 to 10 minutes, so that watches started together do not all renew at once. */
export function randomWatchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
}

/** A watch that ends cleanly sooner than this without any event is treated as a failure (as client-go does). */
const SHORTEST_HEALTHY_WATCH_MS = 1_000;

export interface WatchRequest {
  watch: WatchFn;
  path: string;
  query: QueryParams;
  clock: Clock;
  /** Every event but ERROR, which ends the watch. */
  onEvent: (type: string, object: unknown) => void;
  /** The API server accepted the watch. */
  onStarted: () => void;
}

export interface RunningWatch {
  /** How the watch ended; rejects with the error when it failed. */
  outcome: Promise<WatchOutcome>;
  /** Ends the watch with `outcome`; does nothing once it has ended. */
  end: (outcome: WatchOutcome) => void;
}

/** Starts one watch request; a stream ended by the server or by `end` is aborted, so it delivers no more. */
export function runWatch(req: WatchRequest): RunningWatch {
  let end: (outcome: WatchOutcome) => void = () => undefined;
  const outcome = new Promise<WatchOutcome>((resolve, reject) => {
    const startedAt = req.clock.now();
    let events = 0;
    let settled = false;
    let handle: { abort(): void } | undefined;
    const settle = (result: WatchOutcome | Error): void => {
      if (settled) return;
      settled = true;
      handle?.abort();
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    end = settle;
    const onEvent = (type: string, object: unknown): void => {
      if (settled) return;
      events++;
      if (type === "ERROR") {
        const err = toKubeError(object);
        settle(err instanceof GoneError ? "expired" : err);
        return;
      }
      req.onEvent(type, object);
    };
    const onDone = (err: unknown): void => {
      if (settled) return;
      if (err) {
        const kubeErr = toKubeError(err);
        settle(kubeErr instanceof GoneError ? "expired" : kubeErr);
      } else if (events === 0 && req.clock.now() - startedAt < SHORTEST_HEALTHY_WATCH_MS) {
        settle(new Error("watch closed at once without any event"));
      } else {
        settle("closed");
      }
    };
    req.watch(req.path, req.query, onEvent, onDone).then(
      (started) => {
        handle = started;
        if (settled) started.abort();
        else req.onStarted();
      },
      (err: unknown) => settle(toKubeError(err)),
    );
  });
  return { outcome, end: (result) => end(result) };
}

/**
 * How long a watch the API server heartbeats may go without a byte before it counts as dead. The server
 * sends a bookmark about once a minute to a watch that asked for them, so this is longer than that: a
 * quiet watch stays open, on its keep-alive connection, until its own timeoutSeconds; a dead one is
 * noticed within it.
 */
export const WATCH_INACTIVITY_TIMEOUT_MS = 90_000;

/**
 * How long past its own timeoutSeconds a watch without heartbeats may stay silent. The API server's watch
 * cache sends bookmarks only once it has seen an event of the resource since it started, so a watch of a
 * resource nothing writes (no ResourceSlices in a cluster without DRA) hears nothing until the server ends
 * it: cutting it after 90 s cost a new connection, a TLS handshake, every 90 s per such resource.
 */
export const WATCH_DEADLINE_GRACE_MS = 60_000;

/**
 * The silence after which a watch is given up: held to the bookmark interval once the server has sent it
 * a bookmark, else to its own deadline (`timeoutSeconds`) plus a grace.
 */
export function watchSilenceLimitMs(
  timeoutSeconds: number | undefined,
  heartbeating: boolean,
  limits: { heartbeatMs: number; graceMs: number } = {
    heartbeatMs: WATCH_INACTIVITY_TIMEOUT_MS,
    graceMs: WATCH_DEADLINE_GRACE_MS,
  },
): number {
  if (heartbeating || timeoutSeconds === undefined || !(timeoutSeconds > 0)) return limits.heartbeatMs;
  return timeoutSeconds * 1_000 + limits.graceMs;
}

/**
 * client-node 2's Watch aborts a watch after 30 s without data, shorter than the API server's bookmark
 * interval, so every quiet watch was cut and relisted on a new connection. The field is private, so it
 * is set here and checked: a client-node release that renames it fails at start-up, not silently.
 */
export function longLivedWatch(kc: KubeConfig): Watch {
  const watcher = new Watch(kc);
  const settable = watcher as unknown as { requestTimeoutMs?: unknown };
  if (typeof settable.requestTimeoutMs !== "number") {
    throw new Error("@kubernetes/client-node's Watch has no requestTimeoutMs: check the watch timeout");
  }
  settable.requestTimeoutMs = WATCH_INACTIVITY_TIMEOUT_MS;
  return watcher;
}

/**
 * Watches (one at a time, as an informer runs them) through client-node's Watch, each given up after the
 * silence `watchSilenceLimitMs` allows: its deadline plus a grace until its first bookmark, the bookmark
 * interval after. client-node reads the limit each time data arrives, so it is switched on the bookmark.
 */
export function heartbeatAwareWatch(
  kc: KubeConfig,
  limits?: { heartbeatMs: number; graceMs: number },
): WatchFn {
  const watcher = longLivedWatch(kc);
  const settable = watcher as unknown as { requestTimeoutMs: number };
  return (watchPath, query, onEvent, onDone) => {
    const timeoutSeconds =
      query["timeoutSeconds"] === undefined ? undefined : Number(query["timeoutSeconds"]);
    settable.requestTimeoutMs = watchSilenceLimitMs(timeoutSeconds, false, limits);
    return watcher.watch(
      watchPath,
      query,
      (type: string, object: unknown) => {
        if (type === "BOOKMARK")
          settable.requestTimeoutMs = watchSilenceLimitMs(timeoutSeconds, true, limits);
        onEvent(type, object);
      },
      onDone,
    );
  };
}
