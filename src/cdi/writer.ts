// Writes and removes one CDI spec file atomically (temp file + rename), for any producer of CDI devices.
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../observability/json-log.js";
import { buildCdiSpec, type CdiDevice, type CdiSpec } from "./spec.js";

/** The bytes of a spec file: indented JSON with a final newline, the same for the same spec. Pure. */
export function cdiSpecText(spec: CdiSpec): string {
  return `${JSON.stringify(spec, null, 2)}\n`;
}

/**
 * Puts `text` at `dir/fileName` atomically: a runtime reading the directory sees the old file or the new
 * one, never a partial one. The temp file starts with a dot and has no `.json` extension, so runtimes
 * do not read it either. Returns the path written.
 */
export async function writeCdiSpecFile(dir: string, fileName: string, text: string): Promise<string> {
  const path = join(dir, fileName);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const temp = join(dir, `.${fileName}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    await writeFile(temp, text, { mode: 0o644 });
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  return path;
}

export interface CdiSpecWriterOptions {
  /** The CDI directory, `/var/run/cdi` on a node. */
  readonly dir: string;
  /** The spec file's name in `dir`, e.g. `cdiSpecFileName(kind)`; must end in `.json`. */
  readonly fileName: string;
  readonly logger: Logger;
}

/** What a write did: the file's content, or that no device was left and the file was removed. */
export type CdiWriteResult = { readonly written: true; readonly path: string } | { readonly written: false };

/**
 * One spec file. Writes are serialized, so the file always holds the latest device list; a runtime
 * reading the directory sees the old file or the new one, never a partial one: the temp file has no
 * `.json` extension, so runtimes do not read it either.
 */
export class CdiSpecWriter {
  private chain: Promise<unknown> = Promise.resolve();
  /** What this writer last put in the file, so remove() leaves a file another instance wrote alone. */
  private lastWritten: string | undefined;

  constructor(private readonly opts: CdiSpecWriterOptions) {
    if (!opts.fileName.endsWith(".json") || opts.fileName.includes("/")) {
      throw new Error(`CDI spec file name must be a .json file name, got '${opts.fileName}'`);
    }
  }

  get path(): string {
    return join(this.opts.dir, this.opts.fileName);
  }

  /** Writes the spec for `devices` of `kind`; removes the file when none is left to describe. */
  write(kind: string, devices: readonly CdiDevice[]): Promise<CdiWriteResult> {
    return this.serialized(async () => {
      const { spec, skipped } = buildCdiSpec(kind, devices);
      for (const { name, problem } of skipped) {
        this.opts.logger.warn({ kind, device: name, problem }, "device left out of the CDI spec");
      }
      if (spec === undefined) {
        await this.removeOwn();
        return { written: false };
      }
      const text = cdiSpecText(spec);
      await writeCdiSpecFile(this.opts.dir, this.opts.fileName, text);
      this.lastWritten = text;
      this.opts.logger.debug({ path: this.path, devices: spec.devices.length }, "CDI spec written");
      return { written: true, path: this.path };
    });
  }

  /**
   * Removes the file if it still holds what this writer wrote: during an overlapping upgrade the new
   * instance may already have rewritten it, and its devices must stay resolvable.
   */
  remove(): Promise<void> {
    return this.serialized(() => this.removeOwn());
  }

  /** False when the file no longer holds what this writer last wrote: another writer replaced or removed it. */
  holdsLastWritten(): Promise<boolean> {
    return this.serialized(async () => {
      if (this.lastWritten === undefined) return true;
      return (await readFile(this.path, "utf8").catch(() => undefined)) === this.lastWritten;
    });
  }

  private async removeOwn(): Promise<void> {
    if (this.lastWritten === undefined) return;
    const current = await readFile(this.path, "utf8").catch(() => undefined);
    if (current === this.lastWritten) await unlink(this.path).catch(() => undefined);
    this.lastWritten = undefined;
    this.opts.logger.debug({ path: this.path }, "CDI spec removed");
  }

  private serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = this.chain.then(work, work);
    this.chain = run.catch(() => undefined);
    return run;
  }
}
