// A watch whose liveness can be checked. client-node's Watch ends after 30 s without a byte, or on any
// error, and calls its done callback once; a test that hands it `() => undefined` and then asserts "never
// happened" passes on a watch that stopped seeing anything a minute in, or never saw anything at all. This
// one restarts a watch that ended, from the last resourceVersion it was shown (so no event falls in the
// gap), counts its events and restarts, and keeps every error. An error it resumed from loses nothing (a
// 429 or a reset connection, then the watch again from the same version); what can have lost events is a
// gap: the version expired (410 Gone, so the watch starts again from the current state), or the watch
// still failing when it was stopped. Callers assert on the gaps and on the events.
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { inspect } from "node:util";

/** What a live watch went through: events delivered, watches reopened, and errors met. */
export interface WatchHealth {
  /** ADDED, MODIFIED and DELETED events handed to the caller (bookmarks and errors not counted). */
  events: number;
  /** Times the watch ended and was opened again (the client's idle timeout is one). */
  restarts: number;
  /** Errors the watch ended with or was sent (an ERROR event), as text; resumed from unless in gaps. */
  errors: string[];
  /** Where events may have been missed: an expired version, or the watch failing when stopped. */
  gaps: string[];
}

/** Any object the API server sends on a watch: its metadata carries a resourceVersion. */
type Versioned = object;

function versionOf(object: unknown): string | undefined {
  const version = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata?.resourceVersion;
  return typeof version === "string" ? version : undefined;
}

/** A watch's way of ending that is not an error: the client's inactivity timeout on a quiet watch. */
function isIdleTimeout(err: unknown): boolean {
  return err instanceof Error && err.name === "TimeoutError";
}

/** How long to wait before reopening after an error, so a refused watch does not spin. */
const REOPEN_AFTER_ERROR_MS = 200;

export class LiveWatch<T extends Versioned> implements WatchHealth {
  events = 0;
  restarts = 0;
  readonly errors: string[] = [];
  readonly gaps: string[] = [];
  private resourceVersion: string | undefined;
  /** The last opening ended with an error and no opening has succeeded since. */
  private failing: string | undefined;
  private controller: AbortController | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly kc: KubeConfig,
    readonly path: string,
    private readonly query: Record<string, string>,
    private readonly onEvent: (type: string, object: T) => void,
  ) {}

  /** Opens the watch; resolves once the API server answered it (its first events may follow). */
  async start(): Promise<void> {
    await this.open();
  }

  stop(): void {
    if (!this.stopped && this.failing !== undefined)
      this.gaps.push(`${this.path}: still failing when stopped (${this.failing})`);
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.controller?.abort();
  }

  /** The last resourceVersion the watch was shown (an event's or a bookmark's); undefined before the first. */
  get version(): string | undefined {
    return this.resourceVersion;
  }

  health(): WatchHealth {
    return { events: this.events, restarts: this.restarts, errors: [...this.errors], gaps: [...this.gaps] };
  }

  private async open(): Promise<void> {
    if (this.stopped) return;
    const query: Record<string, string> = { ...this.query, allowWatchBookmarks: "true" };
    if (this.resourceVersion !== undefined) query["resourceVersion"] = this.resourceVersion;
    let ended = false;
    this.controller = await new Watch(this.kc).watch(
      this.path,
      query,
      (type: string, object: T) => {
        if (this.stopped) return;
        if (type === "ERROR") {
          this.errors.push(`${this.path}: ERROR event ${JSON.stringify(object)}`);
          // 410 Gone: the version is too old to resume from; the next watch starts from the current
          // state, and whatever happened in between is not seen.
          if ((object as { code?: number }).code === 410) {
            this.gaps.push(`${this.path}: resourceVersion ${this.resourceVersion} expired (410)`);
            this.resourceVersion = undefined;
          }
          return;
        }
        const version = versionOf(object);
        if (version !== undefined) this.resourceVersion = version;
        if (type === "BOOKMARK") return;
        this.events++;
        this.onEvent(type, object);
      },
      (err: unknown) => {
        ended = true;
        this.ended(err);
      },
    );
    if (!ended) this.failing = undefined;
    if (this.stopped) this.controller.abort();
  }

  private ended(err: unknown): void {
    if (this.stopped) return;
    const failed = err !== null && err !== undefined && !isIdleTimeout(err);
    if (failed) {
      this.failing = err instanceof Error ? err.message : inspect(err);
      this.errors.push(`${this.path}: ${this.failing}`);
    }
    this.restarts++;
    const reopen = (): void => {
      this.timer = undefined;
      this.open().catch((e: unknown) => this.ended(e));
    };
    if (failed) this.timer = setTimeout(reopen, REOPEN_AFTER_ERROR_MS);
    else reopen();
  }
}
