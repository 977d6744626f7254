// When the device-plugin runtime reconciles: on file-system events in the kubelet's device-plugins
// directory, on a poll for the events a watch misses, and when asked; one run at a time.
import { watch, type FSWatcher } from "node:fs";
import type { Logger } from "../observability/json-log.js";

export interface ReconcileTriggerOptions {
  /** The directory whose changes may need a reconcile. */
  dir: string;
  /** Whether a change of the file `name` (undefined when the platform does not say) needs a reconcile. */
  relevant: (name: string | undefined) => boolean;
  /** How often to reconcile anyway. */
  pollIntervalMs: number;
  /** Level-triggered: the same result after one trigger or many. */
  reconcile: () => Promise<void>;
  logger: Logger;
}

export class ReconcileTrigger {
  private fsWatcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private dirty = false;
  private stopped = false;

  constructor(private readonly opts: ReconcileTriggerOptions) {}

  /** Watches the directory and runs the first reconcile, then polls; resolves or rejects with that run. */
  async start(): Promise<void> {
    this.watchDir();
    await this.trigger();
    this.pollTimer = setInterval(() => this.kick(), this.opts.pollIntervalMs);
    this.pollTimer.unref();
  }

  /** Schedules a reconcile from an event; failures are logged, the next event or poll retries. */
  kick(): void {
    this.trigger().catch((err: unknown) =>
      this.opts.logger.error({ err: String(err) }, "registration loop failed"),
    );
  }

  /**
   * Runs reconcile, serialized: never two at once (two would register twice), and a trigger during a
   * run makes exactly one more run afterwards. Resolves or rejects with the run it joined.
   */
  trigger(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.dirty = true;
      return this.running;
    }
    const run = this.runOnce().finally(() => {
      this.running = undefined;
      if (this.dirty) {
        this.dirty = false;
        this.kick();
      }
    });
    this.running = run;
    return run;
  }

  /** No reconcile starts from now on: the poll and the watch end. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.pollTimer);
    this.fsWatcher?.close();
  }

  /** Resolves when the reconcile in progress, if any, has ended (whether it failed or not). */
  async settled(): Promise<void> {
    await this.running?.catch(() => undefined);
  }

  private async runOnce(): Promise<void> {
    // A watch that failed is tried again on every run; until it works, the poll does its job.
    if (!this.fsWatcher) this.watchDir();
    await this.opts.reconcile();
  }

  private watchDir(): void {
    try {
      this.fsWatcher = watch(this.opts.dir, (_event, filename) => {
        if (this.opts.relevant(filename?.toString())) this.kick();
      });
      this.fsWatcher.on("error", (err) => {
        this.opts.logger.warn(
          { err: err.message },
          "watching the device-plugins directory failed; polling only",
        );
        this.fsWatcher?.close();
        this.fsWatcher = undefined;
      });
    } catch (err) {
      this.opts.logger.warn(
        { err: (err as Error).message },
        "cannot watch the device-plugins directory; polling only",
      );
    }
  }
}
