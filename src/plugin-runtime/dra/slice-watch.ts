// Watches this node's ResourceSlices of one driver (field selectors spec.nodeName and spec.driver, which the
// API server indexes), so the publisher learns at once when someone else changed or deleted them: the
// kubelet deletes every slice of its node when it starts. A list, then a watch from its resourceVersion,
// resumed after every clean end; a 410 Gone lists again; any other failure backs off and resumes. Nothing
// is cached here: the publisher compares what it hears with what it wrote.
import type { Logger } from "../../observability/json-log.js";
import { ApiError, type ApiClient, type WatchEvent } from "../report/api-client.js";
import {
  RESOURCE_SLICES_PATH,
  SLICE_FIELD_DRIVER,
  SLICE_FIELD_NODE_NAME,
  type ResourceSlice,
} from "./slices.js";

/** What the watch tells: the whole set after every list, then each change. */
export type SliceObservation =
  | { readonly kind: "list"; readonly slices: readonly ResourceSlice[] }
  | {
      readonly kind: "event";
      readonly type: "ADDED" | "MODIFIED" | "DELETED";
      readonly slice: ResourceSlice;
    };

export interface NodeSliceWatchOptions {
  readonly client: Pick<ApiClient, "request" | "watch">;
  readonly node: string;
  readonly driver: string;
  readonly logger: Logger;
  readonly onObservation: (observation: SliceObservation) => void;
  /** First and largest delay before a failed list or watch is tried again. */
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
  /** The server-side length of one watch (timeoutSeconds); spread so that nodes do not renew at once. */
  readonly watchTimeoutSeconds?: () => number;
}

const DEFAULT_RETRY_BASE_MS = 500;
/** An API server back after an outage hears from every node within seconds, not minutes. */
const DEFAULT_RETRY_MAX_MS = 8_000;
/**
 * Silence allowed past the watch's own timeoutSeconds before it counts as dead. The API server sends
 * bookmarks only for a resource it has seen an event of since it started, so a quiet node's watch may
 * hear nothing until the server ends it.
 */
const WATCH_SILENCE_GRACE_MS = 60_000;
/** A watch that ends sooner than this without any event is a failure, or a server ending it at once would be asked again in a tight loop. */
const SHORTEST_HEALTHY_WATCH_MS = 1_000;

function randomWatchTimeoutSeconds(): number {
  return 300 + Math.floor(Math.random() * 300);
}

interface SliceList {
  metadata?: { resourceVersion?: string };
  items?: ResourceSlice[];
}

export class NodeSliceWatch {
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private readonly selector: string;
  private loop: Promise<void> | undefined;
  private failures = 0;

  constructor(private readonly opts: NodeSliceWatchOptions) {
    this.log = opts.logger.child({ component: "resourceslice-watch" });
    this.selector = encodeURIComponent(
      `${SLICE_FIELD_NODE_NAME}=${opts.node},${SLICE_FIELD_DRIVER}=${opts.driver}`,
    );
  }

  /** Lists and watches in the background until stop(). */
  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const signal = this.abort.signal;
    let resourceVersion = "";
    while (!signal.aborted) {
      let during: "list" | "watch" = resourceVersion === "" ? "list" : "watch";
      try {
        if (during === "list") {
          resourceVersion = await this.list();
          this.failures = 0;
          during = "watch";
        }
        const started = Date.now();
        let events = 0;
        const timeoutSeconds = (this.opts.watchTimeoutSeconds ?? randomWatchTimeoutSeconds)();
        await this.opts.client.watch<ResourceSlice>(
          {
            path:
              `${RESOURCE_SLICES_PATH}?watch=true&allowWatchBookmarks=true&fieldSelector=${this.selector}` +
              `&resourceVersion=${encodeURIComponent(resourceVersion)}&timeoutSeconds=${timeoutSeconds}`,
            silenceTimeoutMs: timeoutSeconds * 1_000 + WATCH_SILENCE_GRACE_MS,
            signal,
          },
          (event: WatchEvent<ResourceSlice>) => {
            events++;
            resourceVersion = event.object.metadata?.resourceVersion || resourceVersion;
            if (event.type !== "BOOKMARK") {
              this.tell({ kind: "event", type: event.type, slice: event.object });
            }
          },
        );
        if (events === 0 && Date.now() - started < SHORTEST_HEALTHY_WATCH_MS) {
          throw new Error("the watch ended at once without any event");
        }
        this.failures = 0;
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ApiError && err.code === 410) {
          // What happened since our resourceVersion is compacted away: only a fresh list tells.
          this.log.debug({ resourceVersion }, "ResourceSlice watch expired; listing again");
          resourceVersion = "";
          continue;
        }
        const base = this.opts.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
        const cap = this.opts.retryMaxMs ?? DEFAULT_RETRY_MAX_MS;
        const backoff = Math.min(base * 2 ** Math.min(this.failures, 20), cap);
        this.failures++;
        // Full jitter on the upper half: the plugins of a whole cluster lose the API server together.
        const retryInMs = Math.round(backoff / 2 + (Math.random() * backoff) / 2);
        this.log.warn(
          { err: err instanceof Error ? err.message : String(err), during, resourceVersion, retryInMs },
          during === "list"
            ? "listing this node's ResourceSlices failed; trying again"
            : "watching this node's ResourceSlices failed; resuming",
        );
        await sleep(retryInMs, signal);
      }
    }
  }

  /** A listener that throws must not end the watch, nor, from inside a stream's data event, the process. */
  private tell(observation: SliceObservation): void {
    try {
      this.opts.onObservation(observation);
    } catch (err) {
      this.log.error(
        { err: err instanceof Error ? err.message : String(err), observation: observation.kind },
        "handling a ResourceSlice observation failed",
      );
    }
  }

  /** Lists the node's slices of the driver, tells the publisher, and returns the list's resourceVersion. */
  private async list(): Promise<string> {
    const list = await this.opts.client.request<SliceList>({
      method: "GET",
      path: `${RESOURCE_SLICES_PATH}?fieldSelector=${this.selector}`,
      signal: this.abort.signal,
    });
    const resourceVersion = list.metadata?.resourceVersion ?? "";
    if (resourceVersion === "") {
      throw new Error(`the list of ResourceSlices had no resourceVersion to watch from`);
    }
    this.tell({ kind: "list", slices: list.items ?? [] });
    return resourceVersion;
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
