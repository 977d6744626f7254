// Whether a starting plugin stands by instead of registering. On a kubelet before v1.37.0 (ADR 0002) two
// registrations of one resource cannot overlap, so the operator replaces the plugin there; to keep the gap
// short it may start the new plugin beside the old one and say so in the node's upgrade record. The new
// plugin then serves its socket but registers only once the older instance is gone. Instances find each
// other by their sockets in the device-plugins directory (the names carry when each started, handover.ts);
// the Node is read only when an older one is live, once per older instance, so a plugin that starts alone
// costs the API server nothing.
import { connect as http2Connect, type ClientHttp2Session } from "node:http2";
import { connect } from "node:net";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import { matchGlobSegment } from "../../contract/devfs-glob.js";
import { standbyWanted } from "../../contract/node-upgrade.js";
import { compareInstances, parseInstanceSocket, type InstanceKey } from "./handover.js";
import { socketIsLive } from "./sockets.js";

/** The annotations of the plugin's own Node; rejects when the Node cannot be read. */
export type ReadNodeAnnotations = () => Promise<Readonly<Record<string, string>> | undefined>;

/** An older instance's socket: its file name and the instance it belongs to (start and process). */
export interface OlderSocket {
  name: string;
  instance: string;
}

/** An instance (a plugin start), whatever socket of it: start time and process id. */
function instanceOf(key: InstanceKey): string {
  return `${key.wallClock === true ? "w" : "m"}${key.startedAtMs}-${key.pid}`;
}

/**
 * The sockets in `names` of instances that started before `own`, newest first. Pure. Sockets of the own
 * instance (same start and process, another sequence) are not older ones.
 */
export function olderInstanceSockets(
  prefix: string,
  own: InstanceKey,
  names: readonly string[],
): OlderSocket[] {
  const older: { name: string; key: InstanceKey }[] = [];
  for (const name of names) {
    const key = parseInstanceSocket(prefix, name);
    if (key === undefined || instanceOf(key) === instanceOf(own)) continue;
    if (compareInstances(key, own) < 0) older.push({ name, key });
  }
  return older
    .sort((a, b) => compareInstances(b.key, a.key))
    .map(({ name, key }) => ({ name, instance: instanceOf(key) }));
}

/**
 * The sockets in `names` of the plugin a takeover replaces (spec.takeover.socket, `*` matching any run of
 * characters, as in one segment of a DevFS glob: contract/devfs-glob.ts). Pure. They count as older than
 * any instance of this plugin: a node handed over from the incumbent on a kubelet that keeps one
 * registration stands by until the incumbent's socket is gone.
 */
export function incumbentSockets(glob: string | undefined, names: readonly string[]): OlderSocket[] {
  if (glob === undefined || glob === "") return [];
  return names
    .filter((name) => name !== "kubelet.sock" && matchGlobSegment(glob, name))
    .sort()
    .map((name) => ({ name, instance: `incumbent/${name}` }));
}

/**
 * Pure: the older live socket to stand by for, given what the node's record said for each instance
 * (`wanted`); undefined: register. `live` is newest first; an instance not decided yet does not count.
 */
export function standbyFor(
  live: readonly OlderSocket[],
  wanted: ReadonlyMap<string, boolean>,
): OlderSocket | undefined {
  return live.find((s) => wanted.get(s.instance) === true);
}

export interface StandbyOptions {
  /** The kubelet's device-plugins directory, where every instance serves its socket. */
  dir: string;
  /** The socket-name prefix of the resource (socketPrefix): the same for every revision. */
  prefix: string;
  configName: string;
  /** The plugin's own revision; without one it never stands by. */
  revision: string | undefined;
  /** Without one (outside a cluster) it never stands by. */
  readNode: ReadNodeAnnotations | undefined;
  logger: Logger;
  /** It started standing by (the report and the probe follow it); leaving: see takeLeft. */
  onChange: () => void;
  /** The older instance stopped accepting connections: time to look again (a reconcile). */
  onOlderGone: () => void;
  /** spec.takeover.socket: the incumbent's socket, an older instance of the resource's plugin too. */
  incumbentSocket?: string | undefined;
}

/**
 * Decides, before each registration, whether to stand by; level-triggered: each call looks at the
 * directory as it is. Remembers per older instance what its Node said, so it reads the Node once per
 * older instance, and a failed read (logged once) counts as "register": registering beside the old one
 * is what a plugin did before standby existed, and the kubelet's cut-off is healed by Reregistration.
 */
export class Standby {
  private readonly wanted = new Map<string, boolean>();
  private current: string | undefined;
  private readFailureLogged = false;
  /** It stopped standing by since takeLeft last asked. */
  private left = false;
  /** A connection held to the older socket: its end says at once that the older instance is gone. */
  private held: { path: string; session: ClientHttp2Session } | undefined;

  constructor(private readonly opts: StandbyOptions) {}

  /** The older socket this instance stands by for; undefined while it does not. */
  get standingBy(): string | undefined {
    return this.current;
  }

  /** The older socket to stand by for now (its path), or undefined to register; `ownSocket` is a name. */
  async check(ownSocket: string): Promise<string | undefined> {
    const { readNode, revision } = this.opts;
    const own = parseInstanceSocket(this.opts.prefix, ownSocket);
    if (readNode === undefined || revision === undefined || revision === "" || own === undefined) {
      return this.settle(undefined);
    }
    const live = await this.liveOlderSockets(own);
    if (live.some((s) => !this.wanted.has(s.instance))) {
      let wanted = false;
      try {
        wanted = standbyWanted(await readNode(), this.opts.configName, revision);
      } catch (err) {
        if (!this.readFailureLogged) {
          this.opts.logger.warn(
            { err: (err as Error).message, olderInstance: live[0]?.name },
            "cannot read the node's upgrade record; registering beside the older instance",
          );
        }
        this.readFailureLogged = true;
      }
      for (const s of live) if (!this.wanted.has(s.instance)) this.wanted.set(s.instance, wanted);
    }
    const older = standbyFor(live, this.wanted);
    return this.settle(older === undefined ? undefined : join(this.opts.dir, older.name));
  }

  /**
   * Whether it stopped standing by since the last call. Leaving is not reported through onChange: the
   * registration that follows reports itself, and a report in between would say NotRegistered for a
   * moment; the caller reports it when that registration fails.
   */
  takeLeft(): boolean {
    const left = this.left;
    this.left = false;
    return left;
  }

  /** Stops watching the older instance (the plugin stops). */
  stop(): void {
    this.held?.session.destroy();
    this.held = undefined;
  }

  private async liveOlderSockets(own: InstanceKey): Promise<OlderSocket[]> {
    let names: string[];
    try {
      names = await readdir(this.opts.dir);
    } catch {
      return [];
    }
    const live: OlderSocket[] = [];
    const candidates = [
      ...olderInstanceSockets(this.opts.prefix, own, names),
      ...incumbentSockets(
        this.opts.incumbentSocket,
        names.filter((n) => parseInstanceSocket(this.opts.prefix, n) === undefined),
      ),
    ];
    for (const older of candidates) {
      const path = join(this.opts.dir, older.name);
      try {
        if (!(await lstat(path)).isSocket()) continue;
      } catch {
        continue;
      }
      if (await socketIsLive(path)) live.push(older);
    }
    return live;
  }

  private settle(older: string | undefined): string | undefined {
    const was = this.current;
    this.current = older;
    if (older !== undefined) this.hold(older);
    else this.stop();
    if (was === older) return older;
    if (older !== undefined) {
      this.opts.logger.info(
        { olderInstance: older, revision: this.opts.revision },
        "standing by: an older instance of the plugin serves the resource and the node's upgrade record says to wait for it",
      );
      this.left = false;
      this.opts.onChange();
    } else {
      this.opts.logger.info(
        { olderInstance: was },
        "the older instance is gone; registering after standing by",
      );
      this.left = true;
    }
    return older;
  }

  /**
   * Holds one HTTP/2 connection to the older socket (the older server sees an ordinary idle client and
   * lets it go at once when it shuts down): when that instance dies, the connection ends at once, where
   * its socket file stays behind and only the poll would notice. A connection the older server ends
   * with a GOAWAY is a clean shutdown: the socket file goes once the server is down (the plugin removes
   * it after the kubelet has had the end of its ListAndWatch), and that event is the one to wait for.
   * One connection per older socket: if it ends while the socket still serves, the poll takes over.
   */
  private hold(path: string): void {
    if (this.held?.path === path) return;
    this.stop();
    const session = http2Connect("http://localhost", { createConnection: () => connect(path) });
    const held = { path, session };
    this.held = held;
    // Never what keeps the process running.
    session.unref();
    let goaway = false;
    session.on("error", () => undefined);
    session.once("goaway", () => {
      goaway = true;
      // Gone at once, so the older server's shutdown never waits for this client.
      session.destroy();
    });
    session.once("close", () => {
      if (this.held === held && !goaway) this.opts.onOlderGone();
    });
  }
}
