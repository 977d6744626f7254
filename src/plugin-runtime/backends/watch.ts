// Change triggers for backends: directory watches that re-arm themselves, and a runner that turns bursts of
// events into one scan at a time so a scan never overlaps another and no event is lost while one runs.
import { watch, type FSWatcher } from "node:fs";
import { stat } from "node:fs/promises";
import type { Logger } from "../../observability/json-log.js";

/**
 * Runs an async task on request, never two at once. A request that arrives while the task runs makes it
 * run once more afterwards (however many requests came), so the last run always sees the latest state.
 */
export class SerialRunner {
  private running: Promise<void> | undefined;
  private pending = false;
  private stopped = false;

  constructor(
    private readonly task: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** Asks for a run; returns at once. */
  request(): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.pending = true;
      return;
    }
    this.running = this.loop();
  }

  /** Runs the task now (or after the current run) and resolves when a run that started after this call ends. */
  async runNow(): Promise<void> {
    this.request();
    while (this.running !== undefined) await this.running;
  }

  /** Stops accepting requests and waits for a run in progress to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pending = false;
    while (this.running !== undefined) await this.running;
  }

  private async loop(): Promise<void> {
    try {
      do {
        this.pending = false;
        try {
          await this.task();
        } catch (error) {
          // A scan failing must not stop the next one; the backend keeps its last known devices.
          this.logger.error({ err: error }, "device scan failed");
        }
      } while (this.pending && !this.stopped);
    } finally {
      this.running = undefined;
    }
  }
}

interface WatchedDirectory {
  readonly watcher: FSWatcher;
  /** Inode the watch was placed on; a different inode means the directory was replaced. */
  readonly inode: number;
}

/**
 * Watches a set of directories with fs.watch and calls `onEvent` for anything that happens in them.
 * Directories that do not exist yet, or that were deleted and re-created (which silently ends an inotify
 * watch), are picked up on the next `watch` call, so callers re-submit their set after every scan; a
 * periodic scan is the backstop for file systems that send no events at all (sysfs, some network mounts).
 */
export class DirectoryWatcher {
  private readonly watched = new Map<string, WatchedDirectory>();
  private closed = false;

  /**
   * With `entriesOnly`, only entries appearing or disappearing count: in /dev every write to a device
   * node (think /dev/null) is a change event, and scanning on each would be a busy loop.
   */
  constructor(
    private readonly onEvent: () => void,
    private readonly logger: Logger,
    private readonly options: { readonly entriesOnly: boolean } = { entriesOnly: false },
  ) {}

  /** Makes the watched set exactly `directories`, (re)placing watches where needed. Never throws. */
  async watch(directories: Iterable<string>): Promise<void> {
    const wanted = new Set(directories);
    for (const [dir, entry] of this.watched) {
      if (!wanted.has(dir)) this.unwatch(dir, entry);
    }
    for (const dir of wanted) {
      if (this.closed) return;
      const inode = await currentInode(dir);
      if (this.closed) return;
      const existing = this.watched.get(dir);
      if (existing !== undefined && existing.inode === inode) continue;
      if (existing !== undefined) this.unwatch(dir, existing);
      if (inode === undefined) continue;
      this.place(dir, inode);
    }
  }

  /** The directories currently watched (for tests and logs). */
  directories(): string[] {
    return [...this.watched.keys()].sort();
  }

  close(): void {
    this.closed = true;
    for (const [dir, entry] of this.watched) this.unwatch(dir, entry);
  }

  private place(dir: string, inode: number): void {
    let watcher: FSWatcher;
    try {
      watcher = watch(dir, { persistent: false }, (eventType) => {
        if (eventType === "rename" || !this.options.entriesOnly) this.onEvent();
      });
    } catch (error) {
      this.logger.debug({ path: dir, err: error }, "cannot watch directory; relying on periodic scans");
      return;
    }
    watcher.on("error", (error) => {
      this.logger.debug({ path: dir, err: error }, "directory watch ended; will re-arm on the next scan");
      const current = this.watched.get(dir);
      if (current?.watcher === watcher) this.unwatch(dir, current);
      this.onEvent();
    });
    this.watched.set(dir, { watcher, inode });
  }

  private unwatch(dir: string, entry: WatchedDirectory): void {
    this.watched.delete(dir);
    try {
      entry.watcher.close();
    } catch (error) {
      this.logger.debug({ path: dir, err: error }, "closing directory watch failed");
    }
  }
}

async function currentInode(dir: string): Promise<number | undefined> {
  try {
    const info = await stat(dir);
    return info.isDirectory() ? info.ino : undefined;
  } catch {
    return undefined;
  }
}
