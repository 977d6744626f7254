// Keeps the CDI spec of the plugin's devices on disk: every physical device a CDI name can point at,
// written again on every device change and, after a failed write, with backoff until one succeeds.
//
// One file per kind, whichever instance of the plugin writes it: during an overlapping upgrade the old
// and the new instance describe the same devices under the same names, and a runtime drops a name that
// two spec files of one kind define, so a file per instance would leave neither resolvable (and the old
// one's file must outlive it for its containers' restarts). Instead only the newest live instance writes
// (the order of handover.ts); an older one leaves the file alone while a newer one runs, so it never puts
// back its own, older device list over the newer one's, and writes again once the newer one is gone (a
// rollback deletes it).
import type { Logger } from "../observability/json-log.js";
import { CdiSpecWriter, cdiSpecFileName, type CdiDevice } from "../cdi/index.js";
import { backoffDelayMs } from "../kube/backoff.js";
import type { DeviceBackend } from "./devices/backend.js";
import type { DeviceSetSnapshot } from "./devices/device-set.js";

/** Backoff of a failed CDI spec write. */
const CDI_RETRY = { baseMs: 1_000, maxMs: 60_000 };
/** How often an instance that leaves the file to a newer one looks whether that one is still live. */
const DEFAULT_NEWER_POLL_MS = 2_000;

export interface CdiSpecSyncOptions {
  /** Where the spec goes (default /var/run/cdi in the runtime). */
  dir: string;
  /** The CDI kind, `<vendor>/<class>`, the names Allocate returns are of. */
  kind: string;
  backend: DeviceBackend;
  /** The devices now, for a retry. */
  devices: () => DeviceSetSnapshot;
  /** Whether a newer instance of the plugin serves on the node: it writes the spec then, not this one. */
  newerInstanceLive?: () => Promise<boolean>;
  /** How often to look again while a newer instance writes (default 2 s). */
  newerPollMs?: number;
  logger: Logger;
}

export class CdiSpecSync {
  /** Writes the spec the CDI names Allocate returns resolve against; undefined when the kind is not valid. */
  private readonly writer: CdiSpecWriter | undefined;
  private readonly log: Logger;
  private retryTimer: NodeJS.Timeout | undefined;
  /** Failed writes since the last one that succeeded. */
  private failures = 0;
  private stopped = false;
  /** The last write was left to a newer instance. */
  private leftToNewer = false;
  private pollTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: CdiSpecSyncOptions) {
    this.log = opts.logger;
    this.writer = this.createWriter();
  }

  private createWriter(): CdiSpecWriter | undefined {
    try {
      return new CdiSpecWriter({
        dir: this.opts.dir,
        fileName: cdiSpecFileName(this.opts.kind),
        logger: this.log,
      });
    } catch (err) {
      // An explicit cdi.kind is checked by the schema, but one defaulted from the resource name may be
      // refused by the CDI parser (a domain starting with a digit): serve anyway, but say loudly that
      // runtimes will not resolve the names.
      this.log.error(
        { err: (err as Error).message, kind: this.opts.kind },
        "CDI kind is not valid for a CDI spec; no spec is written and CDI names will not resolve",
      );
      return undefined;
    }
  }

  /** The CDI spec follows the physical devices: every one (healthy or not) that a name can point at. */
  async write(snap: DeviceSetSnapshot): Promise<void> {
    const writer = this.writer;
    if (writer === undefined || this.stopped) return;
    if (this.pollTimer === undefined) this.pollNewer();
    if (await this.newerWrites()) return;
    const devices: CdiDevice[] = snap.physical.map((d) => ({
      name: d.id,
      containerEdits: this.opts.backend.cdiContainerEdits(d.id) ?? {},
    }));
    clearTimeout(this.retryTimer);
    try {
      await writer.write(this.opts.kind, devices);
      if (this.failures > 0 || this.leftToNewer) this.log.info({ path: writer.path }, "CDI spec written");
      this.leftToNewer = false;
      this.failures = 0;
    } catch (err) {
      // Containers whose Allocate named these devices cannot start until the spec is there: try again
      // with backoff (a read-only or full directory may recover), not only on the next device change.
      this.failures++;
      const retryInMs = backoffDelayMs(CDI_RETRY, this.failures);
      this.log.error({ err: String(err), path: writer.path, retryInMs }, "cannot write the CDI spec");
      if (this.stopped) return;
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => void this.write(this.opts.devices()), retryInMs);
      this.retryTimer.unref();
    }
  }

  /** Whether a newer instance writes the spec now; says so in the log once per time it does. */
  private async newerWrites(): Promise<boolean> {
    const live = this.opts.newerInstanceLive;
    if (live === undefined) return false;
    let newer: boolean;
    try {
      newer = await live();
    } catch (err) {
      // Not knowing, write: a spec of older devices is better than none.
      this.log.warn({ err: String(err) }, "cannot look for a newer instance; writing the CDI spec");
      return false;
    }
    if (newer && !this.leftToNewer)
      this.log.info("a newer instance of the plugin writes the CDI spec; leaving it alone");
    if (newer) this.leftToNewer = true;
    return newer;
  }

  /**
   * Looks for a newer instance every newerPollMs for as long as this one runs: when none is live and the
   * file is not what this one last wrote (a newer one wrote it and is gone, however briefly it ran), this
   * one writes its own devices again at once, whether or not they changed meanwhile (a rollback to fewer
   * devices would leave names it hands out undefined). A readdir and a read of the spec each time, and a
   * connect only while a newer socket is there.
   */
  private pollNewer(): void {
    if (this.opts.newerInstanceLive === undefined || this.stopped) return;
    this.pollTimer = setTimeout(() => {
      void (async () => {
        if (!(await this.newerWrites()) && (this.leftToNewer || !(await this.holdsOwn())))
          await this.write(this.opts.devices());
        this.pollNewer();
      })();
    }, this.opts.newerPollMs ?? DEFAULT_NEWER_POLL_MS);
    this.pollTimer.unref();
  }

  private async holdsOwn(): Promise<boolean> {
    return (await this.writer?.holdsLastWritten()) ?? true;
  }

  /** No write from now on; a pending retry is dropped. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.pollTimer);
  }
}
