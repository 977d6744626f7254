// Socket file names and housekeeping in the kubelet's directories: a name unique per process start, so
// an old and a new plugin instance can overlap during upgrades, and removal of our own stale sockets.
import { connect } from "node:net";
import { lstat, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";

/** `dpo-<resource with / and unsafe characters as _>-`: every socket of this resource starts with it. */
export function socketPrefix(resourceName: string): string {
  return `dpo-${resourceName.replace(/[^A-Za-z0-9.-]/g, "_")}-`;
}

/** A socket file name unique per start: prefix, start time in ms, a per-process counter and `.sock`. */
export function socketFileName(
  prefix: string,
  startedAtMs: number,
  sequence: number,
  suffix = ".sock",
): string {
  return `${prefix}${startedAtMs}-${process.pid}-${sequence}${suffix}`;
}

/** True when something accepts connections on the unix socket at `path`. */
export function socketIsLive(path: string, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(path);
    const done = (live: boolean): void => {
      clearTimeout(timer);
      sock.destroy();
      resolve(live);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    sock.once("connect", () => done(true));
    sock.once("error", () => done(false));
  });
}

/**
 * Removes sockets in `dir` that start with `prefix` and that nobody serves any more (left by a crashed
 * instance). A live socket belongs to another instance that is still running, e.g. the old plugin during
 * an overlapping upgrade, and is kept. Returns the names removed.
 */
export async function removeStaleSockets(
  dir: string,
  prefix: string,
  keep: ReadonlySet<string>,
): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    if (!name.startsWith(prefix) || keep.has(name)) continue;
    const path = join(dir, name);
    try {
      if (!(await lstat(path)).isSocket()) continue;
      if (await socketIsLive(path)) continue;
      await unlink(path);
      removed.push(name);
    } catch {
      // Raced with another instance's cleanup; nothing to do.
    }
  }
  return removed;
}

/** Identity of a file (device, inode, change time), or undefined when absent: tells a re-created socket apart. */
export async function fileIdentity(path: string): Promise<string | undefined> {
  try {
    const st = await lstat(path);
    return `${st.dev}:${st.ino}:${st.ctimeMs}`;
  } catch {
    return undefined;
  }
}
