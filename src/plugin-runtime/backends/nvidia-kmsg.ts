// The kernel log read from /dev/kmsg, without a dmesg binary (the release image has none). Each read of
// /dev/kmsg returns one record, `<priority>,<sequence>,<microseconds since boot>,<flags>[,...];<message>`
// followed by dictionary lines that start with a space (Documentation/ABI/testing/dev-kmsg). The file
// stays open between refreshes, so each read returns only what the kernel logged since the last one.
// EPIPE means records were overwritten before they were read (the ring buffer wrapped): they are lost
// and counted, and reading goes on; EAGAIN means nothing more for now. A regular file (a test's stand-in)
// reads in chunks of many records and ends with 0 bytes; both are handled alike.
import { constants } from "node:fs";
import { open } from "node:fs/promises";

/** What one read of the kernel log gave: its records in dmesg's `[seconds] message` form. */
export type KmsgRead = { ok: true; text: string; lost: number } | { ok: false; message: string };

/** The parts of a FileHandle the reader needs (tests give their own). */
export interface KmsgFile {
  read(buffer: Buffer, offset: number, length: number, position: null): Promise<{ bytesRead: number }>;
  close(): Promise<void>;
}

export type KmsgOpen = (path: string) => Promise<KmsgFile>;

const defaultOpen: KmsgOpen = (path) => open(path, constants.O_RDONLY | constants.O_NONBLOCK);

/** Records longer than this are cut by the kernel anyway (a record is at most about 1 KiB of text). */
const RECORD_BUFFER = 16 * 1024;
/** Most bytes one refresh reads, so a flood of kernel messages cannot stall the backend. */
const MAX_BYTES_PER_READ = 4 * 1024 * 1024;

const RECORD = /^(\d+),(\d+),(\d+),[^;]*;(.*)$/;

/** kmsg records as dmesg prints them (`[  5121.771002] NVRM: ...`); dictionary lines dropped. Pure. */
export function kmsgToDmesg(text: string): string {
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const match = RECORD.exec(line);
    if (match === null) continue;
    const micros = Number.parseInt(match[3] ?? "0", 10);
    out.push(`[${(micros / 1e6).toFixed(6).padStart(12)}] ${match[4] ?? ""}`);
  }
  return out.join("\n");
}

function errorCode(err: unknown): string | undefined {
  const code: unknown = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** Why the kernel log cannot be opened, as a user can act on it. */
export function describeOpenError(path: string, err: unknown): string {
  switch (errorCode(err)) {
    case "ENOENT":
      return `${path} does not exist (is the host's /dev mounted there?)`;
    case "EACCES":
    case "EPERM":
      return (
        `cannot read ${path}: permission denied (reading the kernel log needs CAP_SYSLOG where ` +
        `kernel.dmesg_restrict is 1, and a container's device cgroup must allow /dev/kmsg, char 1:11)`
      );
    default:
      return `cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export class KmsgReader {
  private file: KmsgFile | undefined;
  /** A record cut at a chunk's end (regular files only), completed by the next read. */
  private partial = "";
  private readonly buffer = Buffer.alloc(RECORD_BUFFER);

  constructor(
    readonly path: string,
    private readonly openFile: KmsgOpen = defaultOpen,
  ) {}

  /** Everything logged since the last read (the whole buffer the first time). Never rejects. */
  async read(): Promise<KmsgRead> {
    if (this.file === undefined) {
      try {
        this.file = await this.openFile(this.path);
      } catch (err) {
        return { ok: false, message: describeOpenError(this.path, err) };
      }
    }
    let text = this.partial;
    let lost = 0;
    let total = 0;
    while (total < MAX_BYTES_PER_READ) {
      let bytesRead: number;
      try {
        ({ bytesRead } = await this.file.read(this.buffer, 0, this.buffer.length, null));
      } catch (err) {
        const code = errorCode(err);
        if (code === "EAGAIN") break;
        if (code === "EPIPE") {
          // The reader moves on to the oldest record still there; stop if it never does.
          if (++lost > 10_000) break;
          continue;
        }
        await this.close();
        return {
          ok: false,
          message: `reading ${this.path}: ${err instanceof Error ? err.message : String(err)}`,
        };
      }
      if (bytesRead === 0) break;
      total += bytesRead;
      text += this.buffer.toString("utf8", 0, bytesRead);
    }
    const cut = text.lastIndexOf("\n");
    this.partial = text.slice(cut + 1);
    return { ok: true, text: kmsgToDmesg(text.slice(0, cut + 1)), lost };
  }

  async close(): Promise<void> {
    const file = this.file;
    this.file = undefined;
    this.partial = "";
    await file?.close().catch(() => undefined);
  }
}
