// Where the file-reading commands (validate, convert, probe) get their manifests: a file, or standard input
// for `-`, and the one way they all say that a file could not be read.
import { readFile } from "node:fs/promises";
import { UsageError } from "./flags.js";

/** The name `-` reads standard input under, in every message and report. */
export const STDIN_NAME = "<stdin>";

/** Reads one source: a file's text, or standard input's for `-`. Rejects with the file system's error. */
export type ReadSource = (file: string) => Promise<string>;

/** Reads a file, or the whole of standard input for `-`. */
export const readSource: ReadSource = async (file) => {
  if (file !== "-") return readFile(file, "utf8");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
};

/** The name a source goes by in messages: the file as given, or `<stdin>`. */
export function sourceName(file: string): string {
  return file === "-" ? STDIN_NAME : file;
}

// The errno codes a user meets reading a manifest, in words; a CI log reader should not need errno(3).
const READ_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: "no such file",
  EACCES: "permission denied",
  EPERM: "permission denied",
  EISDIR: "is a directory",
  ENOTDIR: "a part of the path is not a directory",
  ELOOP: "too many symbolic links",
  ENAMETOOLONG: "the name is too long",
  EMFILE: "too many open files",
  ENFILE: "too many open files",
  EIO: "input/output error",
};

/**
 * `cannot read foo.yaml: no such file`: an unreadable source (or, with `verb`, an unwritable report) in
 * words, without the errno code or the syscall node puts in its message. Pure.
 */
export function describeReadError(file: string, err: unknown, verb: "read" | "write" = "read"): string {
  const { code, message } = (typeof err === "object" && err !== null ? err : {}) as {
    code?: unknown;
    message?: unknown;
  };
  const known = typeof code === "string" ? READ_ERRORS[code] : undefined;
  // node's own text, less its `ENOENT: ` prefix and `, open 'path'` tail, for a code not in the table.
  const fallback =
    typeof message === "string"
      ? message.replace(/^[A-Z][A-Z0-9_]+: /, "").replace(/, \w+ '[^']*'$/, "")
      : String(err);
  return `cannot ${verb} ${sourceName(file)}: ${known ?? fallback}`;
}

/** Refuses `-` given twice: standard input can be read once, and the second would be silently empty. */
export function checkStdinOnce(files: readonly string[], usage: string): void {
  if (files.filter((f) => f === "-").length > 1) {
    throw new UsageError("'-' (standard input) given more than once", usage);
  }
}
