// When a device plugin the kubelet dropped registers again: after a backoff that grows while the kubelet
// keeps ending ListAndWatch soon after it starts, and only while no newer instance serves the resource.
import type { Logger } from "../../observability/json-log.js";
import { backoffDelayMs } from "../../kube/backoff.js";
import { NewerInstanceProbe } from "./handover.js";

/**
 * A ListAndWatch stream the kubelet kept this long was a working registration: when the next one ends,
 * registering again starts from the shortest delay. Shorter ones double it each time, up to
 * REREGISTER_MAX_MS, so a kubelet that keeps ending the stream is asked once in a while, not hammered.
 */
const STABLE_STREAM_MS = 30_000;
const REREGISTER_MAX_MS = 30_000;

export interface ReregistrationOptions {
  /** The shortest delay. */
  retryBaseMs: number;
  /** The socket-name prefix of the plugin's instances (socketPrefix). */
  prefix: string;
  logger: Logger;
  /** The delay has passed: time to ask whether to register again. */
  onDue: () => void;
  /** A newer instance serves the resource; called once for each newer instance seen. */
  onStandingBy: (newerInstance: string) => void;
}

/**
 * Set when the kubelet ended ListAndWatch on the socket served now while it still exists (a kubelet before
 * v1.37 does that to a plugin when an older instance's stream ends, kubernetes #121994): the kubelet no
 * longer uses this plugin, which registers again on a fresh socket once the delay has passed, unless a
 * newer instance of the plugin serves the resource (this one is being replaced).
 */
export class Reregistration {
  private dropped: { dueAtMs: number; standingByFor?: string } | undefined;
  /** Consecutive ListAndWatch streams the kubelet ended sooner than STABLE_STREAM_MS: the backoff's step. */
  private shortStreams = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: ReregistrationOptions) {}

  /** Whether the kubelet dropped the plugin and it has not registered again since. */
  get pending(): boolean {
    return this.dropped !== undefined;
  }

  /** The kubelet ended a stream that lasted `lastedMs`: returns the delay before registering again. */
  drop(lastedMs: number): number {
    this.shortStreams = lastedMs >= STABLE_STREAM_MS ? 1 : this.shortStreams + 1;
    const delayMs = backoffDelayMs(
      { baseMs: this.opts.retryBaseMs, maxMs: REREGISTER_MAX_MS },
      this.shortStreams,
    );
    this.dropped = { dueAtMs: Date.now() + delayMs };
    clearTimeout(this.timer);
    this.timer = setTimeout(this.opts.onDue, delayMs);
    this.timer.unref();
    return delayMs;
  }

  /**
   * Whether to register again after the kubelet dropped this plugin: the backoff has passed, and no newer
   * instance of the plugin is live beside it. A newer one means this one is being replaced (an upgrade):
   * registering again would take the resource back from it, and on a kubelet before v1.37 each would
   * keep cutting the other off. The poll asks again, so this one registers once the newer one is gone.
   * `ownSocket` is the path of the socket served now.
   */
  async due(ownSocket: string | undefined): Promise<boolean> {
    const dropped = this.dropped;
    if (dropped === undefined) return false;
    if (Date.now() < dropped.dueAtMs || ownSocket === undefined) return false;
    let newer: string | undefined;
    try {
      newer = await new NewerInstanceProbe(this.opts.prefix, ownSocket).newerLiveInstance();
    } catch (err) {
      // Our own socket name always parses; should it not, registering again is the safe side.
      this.opts.logger.warn(
        { err: (err as Error).message },
        "cannot look for a newer instance of the plugin",
      );
    }
    if (newer !== undefined) {
      if (dropped.standingByFor !== newer) {
        dropped.standingByFor = newer;
        this.opts.logger.info(
          { newerInstance: newer },
          "a newer instance of the plugin serves the resource; not registering again while it runs",
        );
        this.opts.onStandingBy(newer);
      }
      return false;
    }
    this.dropped = undefined;
    return true;
  }

  /** The plugin serves a fresh socket (or stops): whatever made it move ends the wait. */
  cancel(): void {
    this.dropped = undefined;
    clearTimeout(this.timer);
  }
}
