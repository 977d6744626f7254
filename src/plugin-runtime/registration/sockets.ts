// Socket file names and housekeeping in the kubelet's directories: a name unique per process start, so
// an old and a new plugin instance can overlap during upgrades, and removal of our own stale sockets.
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { lstat, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";

/**
 * The longest path a unix socket can have on Linux: sun_path is 108 bytes with the terminating NUL.
 * Longer paths fail to listen with EINVAL (older Node releases cut them short silently instead).
 */
export const MAX_SOCKET_PATH_BYTES = 107;
/**
 * Resource names run to 317 characters, the kubelet's directories to 34; the prefix is capped so that a
 * whole socket path in /var/lib/kubelet/plugins_registry stays well inside MAX_SOCKET_PATH_BYTES.
 */
export const MAX_SOCKET_PREFIX_LENGTH = 40;

/**
 * `dpo-<resource with / and unsafe characters as _>-`: every socket of this resource starts with it. A
 * name too long for a socket path is cut and followed by a hash of the whole name, so two long
 * resource names that share their beginning still get prefixes of their own.
 */
export function socketPrefix(resourceName: string): string {
  const full = `dpo-${resourceName.replace(/[^A-Za-z0-9.-]/g, "_")}-`;
  if (full.length <= MAX_SOCKET_PREFIX_LENGTH) return full;
  const hash = createHash("sha256").update(resourceName).digest("hex").slice(0, 8);
  return `${full.slice(0, MAX_SOCKET_PREFIX_LENGTH - hash.length - 2)}~${hash}-`;
}

/**
 * Marks a start read from the node's monotonic clock in a socket name. Names of earlier releases carry
 * the wall clock there instead (no marker): a wall clock stepped back between two starts made the newer
 * instance look older, so it stood by for the one it replaced, or the two took the registration from
 * each other as each in turn looked newest to itself.
 */
export const MONOTONIC_START_MARK = "m";
/** Digits of a monotonic start in a name, zero-padded: 36^8 ms is 89 years of uptime. */
const MONOTONIC_START_DIGITS = 8;

/**
 * When this instance starts, in ms on the node's monotonic clock (CLOCK_MONOTONIC, which libuv's hrtime
 * reads on Linux): one clock for every process on the node, whatever its container, counting from boot,
 * and not moved by NTP or by anyone setting the time. Sockets do not outlive a boot (the kubelet empties
 * its directories when it starts), so starts of different boots are never compared among live sockets.
 */
export function monotonicStartMs(monotonicNs: () => bigint = () => process.hrtime.bigint()): number {
  return Number(monotonicNs() / 1_000_000n);
}

/**
 * A socket file name unique per start: prefix, the start on the monotonic clock (monotonicStartMs) and
 * the process id in base 36 (short, for the path limit), a per-process counter, and the suffix. The start
 * is marked and padded so that an earlier release, which reads it as a wall-clock time, also orders
 * every such name after its own ('m' and eight digits make nine base-36 digits, more than any
 * wall-clock time in ms has):
 * during the upgrade that brings this naming in, old and new instances agree which one is newer.
 */
export function socketFileName(
  prefix: string,
  startedAtMs: number,
  sequence: number,
  suffix = ".sock",
): string {
  const start = startedAtMs.toString(36).padStart(MONOTONIC_START_DIGITS, "0");
  return `${prefix}${MONOTONIC_START_MARK}${start}-${process.pid.toString(36)}-${sequence}${suffix}`;
}

let socketSequence = 0;
/**
 * A sequence number counted across the process, not per plugin: two plugins of one driver created in the
 * same millisecond of one process (tests; a restart in place) still get names of their own, and the later
 * one is the newer instance.
 */
export function nextSocketSequence(): number {
  return ++socketSequence;
}

/** `dir/name`, or an error naming the path when it is too long to be a unix socket. */
export function socketPath(dir: string, name: string): string {
  const path = join(dir, name);
  const bytes = Buffer.byteLength(path);
  if (bytes > MAX_SOCKET_PATH_BYTES) {
    throw new Error(
      `socket path ${path} is ${bytes} bytes; unix sockets allow ${MAX_SOCKET_PATH_BYTES}: use a shorter directory`,
    );
  }
  return path;
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
