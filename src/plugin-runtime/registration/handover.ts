// Which of several instances of one DRA driver on a node writes the node's ResourceSlices. During a surge
// upgrade the old and the new plugin run side by side (kubelets from v1.33 keep both registered and use
// the newest), and both would publish the same pool: if their devices differ (the new spec changed an
// attribute), each would keep overwriting the other. The rule here mirrors the kubelet's: the newest
// live instance publishes, the others stand by, and when the newest goes (a rollback deletes it, or it
// crashes) the next one takes the pool back. Instances find each other through their DRA sockets in the
// driver's shared plugin directory, whose names carry when each instance started (on the node's monotonic
// clock, so a step of the wall clock cannot reorder them); nothing is written to
// the API server to decide it, so it costs nothing at scale. The device-plugin runtime asks the same
// question of its sockets in device-plugins, whose names carry the same key: a plugin the kubelet dropped
// registers again only while no newer instance serves the resource.
import { lstat, readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import { socketIsLive } from "./sockets.js";

/** When an instance started and how it told its sockets apart: the order of instances. */
export interface InstanceKey {
  /** The start, in ms on the node's monotonic clock (monotonicStartMs), or on the wall clock when wallClock. */
  readonly startedAtMs: number;
  readonly pid: number;
  readonly sequence: number;
  /** A name of an earlier release, whose start is a wall-clock time: older than every monotonic start. */
  readonly wallClock?: true;
}

/**
 * The instance key in a socket file name `<prefix>m<start ms, base 36, 8 digits>-<pid, base 36>-<sequence>
 * <suffix>` (socketFileName), or an earlier release's `<prefix><wall-clock ms, base 36>-…`; undefined for
 * any other name.
 */
export function parseInstanceSocket(prefix: string, name: string, suffix = ".sock"): InstanceKey | undefined {
  if (!name.startsWith(prefix) || !name.endsWith(suffix)) return undefined;
  const m = /^(m(?=[0-9a-z]{8}-))?([0-9a-z]+)-([0-9a-z]+)-([0-9]+)$/.exec(
    name.slice(prefix.length, name.length - suffix.length),
  );
  if (m === null) return undefined;
  const key = {
    startedAtMs: parseInt(m[2] ?? "", 36),
    pid: parseInt(m[3] ?? "", 36),
    sequence: Number(m[4]),
  };
  if (![key.startedAtMs, key.pid, key.sequence].every(Number.isSafeInteger)) return undefined;
  return m[1] === undefined ? { ...key, wallClock: true } : key;
}

/**
 * Orders instances by start: an earlier release's (a wall-clock start) before any of this one, then by
 * the start on the node's monotonic clock, which no clock step moves. Two instances that started in the
 * same millisecond are ordered by process id and then sequence: arbitrary, but every instance computes
 * the same order, so exactly one of them is the newest.
 */
export function compareInstances(a: InstanceKey, b: InstanceKey): number {
  const era = (k: InstanceKey): number => (k.wallClock === true ? 0 : 1);
  return era(a) - era(b) || a.startedAtMs - b.startedAtMs || a.pid - b.pid || a.sequence - b.sequence;
}

/** The socket names in `names` of instances newer than `own`, newest first. Pure. */
export function newerInstanceSockets(prefix: string, own: InstanceKey, names: readonly string[]): string[] {
  const newer: { name: string; key: InstanceKey }[] = [];
  for (const name of names) {
    const key = parseInstanceSocket(prefix, name);
    if (key !== undefined && compareInstances(key, own) > 0) newer.push({ name, key });
  }
  return newer.sort((a, b) => compareInstances(b.key, a.key)).map((n) => n.name);
}

/**
 * Finds a newer live instance of the driver beside the one serving `ownSocket`: a socket in the same
 * directory, named by a later start, that accepts connections. A newer instance that crashed leaves a
 * socket nobody serves, which does not count.
 */
export class NewerInstanceProbe {
  private readonly own: InstanceKey;
  private readonly dir: string;

  constructor(
    private readonly prefix: string,
    ownSocket: string,
  ) {
    const own = parseInstanceSocket(prefix, basename(ownSocket));
    if (own === undefined)
      throw new Error(`DRA socket ${ownSocket} is not named <${prefix}start-pid-seq>.sock`);
    this.own = own;
    this.dir = join(ownSocket, "..");
  }

  /** The newest live newer instance's socket path, or undefined when this instance is the newest. */
  async newerLiveInstance(): Promise<string | undefined> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return undefined;
    }
    for (const name of newerInstanceSockets(this.prefix, this.own, names)) {
      const path = join(this.dir, name);
      try {
        if (!(await lstat(path)).isSocket()) continue;
      } catch {
        continue;
      }
      if (await socketIsLive(path)) return path;
    }
    return undefined;
  }
}
