// The standby decision of a starting plugin: which sockets are older instances, and, over real unix sockets
// in a temporary directory, when it stands by, how often it reads its Node, and what a failed read does.
import { link, mkdtemp, rm, unlink } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../../../tools/cluster/wait.js";
import { nodeKeys, serializeNodeRecord, type NodeRecord } from "../../../../src/contract/node-upgrade.js";
import type { InstanceKey } from "../../../../src/plugin-runtime/registration/handover.js";
import { socketPrefix } from "../../../../src/plugin-runtime/registration/sockets.js";
import {
  incumbentSockets,
  olderInstanceSockets,
  Standby,
  standbyFor,
  type ReadNodeAnnotations,
} from "../../../../src/plugin-runtime/registration/standby.js";

const PREFIX = socketPrefix("example.com/gpu");
const CONFIG = "gpus";

/** A socket name as an instance started at `ms` (monotonic) in process `pid` names it (socketFileName). */
function name(ms: number, pid: number, sequence = 1, prefix = PREFIX): string {
  return `${prefix}m${ms.toString(36).padStart(8, "0")}-${pid.toString(36)}-${sequence}.sock`;
}
/** A socket name of an earlier release: its start is a wall-clock time, unmarked. */
function wallClockName(ms: number, pid: number, sequence = 1): string {
  return `${PREFIX}${ms.toString(36)}-${pid.toString(36)}-${sequence}.sock`;
}
const key = (startedAtMs: number, pid: number, sequence = 1): InstanceKey => ({ startedAtMs, pid, sequence });

describe("olderInstanceSockets", () => {
  it.each([
    { case: "none but the own", names: [name(2000, 7)], want: [] },
    { case: "an older start", names: [name(1000, 9), name(2000, 7)], want: [name(1000, 9)] },
    { case: "a newer start is not older", names: [name(3000, 1)], want: [] },
    { case: "the own instance's other sequence is not older", names: [name(2000, 7, 0)], want: [] },
    {
      case: "the same millisecond: the lower pid is older",
      names: [name(2000, 3), name(2000, 9)],
      want: [name(2000, 3)],
    },
    {
      case: "an earlier release's wall-clock start is older, however late",
      names: [wallClockName(1_763_950_000_123, 7), wallClockName(1000, 9)],
      want: [wallClockName(1_763_950_000_123, 7), wallClockName(1000, 9)],
    },
    {
      case: "newest first, other resources and files ignored",
      names: [
        name(500, 1),
        "kubelet.sock",
        name(1500, 2),
        name(100, 1, 1, socketPrefix("example.com/nic")),
        `${PREFIX}x.sock`,
      ],
      want: [name(1500, 2), name(500, 1)],
    },
  ])("$case", ({ names, want }) => {
    expect(olderInstanceSockets(PREFIX, key(2000, 7), names).map((s) => s.name)).toEqual(want);
  });

  it("keys the instance by start and process, whatever its socket's sequence", () => {
    const [a, b] = olderInstanceSockets(PREFIX, key(2000, 7), [name(1000, 9, 1), name(1000, 9, 2)]);
    expect(a?.instance).toBe(b?.instance);
  });
});

describe("standbyFor", () => {
  const live = [
    { name: "b", instance: "2" },
    { name: "a", instance: "1" },
  ];
  it.each([
    { case: "nothing decided", wanted: [], want: undefined },
    { case: "the newest older says stand by", wanted: [["2", true]], want: "b" },
    {
      case: "only an older one says stand by",
      wanted: [
        ["2", false],
        ["1", true],
      ],
      want: "a",
    },
    {
      case: "all say register",
      wanted: [
        ["2", false],
        ["1", false],
      ],
      want: undefined,
    },
  ] as const)("$case", ({ wanted, want }) => {
    expect(standbyFor(live, new Map(wanted))?.name).toBe(want);
  });
});

let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "dpo-standby-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A socket some process serves; `close` ends it as the process exiting would (its connections too). */
async function liveSocket(path: string): Promise<{ close: () => Promise<void> }> {
  const connections = new Set<Socket>();
  const server: Server = createServer((c) => {
    connections.add(c.on("error", () => undefined).on("close", () => connections.delete(c)));
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  const close = (): Promise<void> =>
    new Promise((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const c of connections) c.destroy();
    });
  cleanups.push(close);
  return { close };
}

/** A socket file nobody serves any more (its process died): bound, linked, the server gone. */
async function deadSocket(dir: string, socketName: string): Promise<void> {
  const bind = join(dir, ".bind");
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(bind, resolve));
  await link(bind, join(dir, socketName));
  await new Promise((resolve) => server.close(resolve));
  await unlink(bind).catch(() => undefined);
}

function record(r: NodeRecord): Record<string, string> {
  return { [nodeKeys(CONFIG).upgrade]: serializeNodeRecord(r) };
}

interface Probe {
  standby: Standby;
  reads: () => number;
  /** How often the standby said the older instance stopped accepting connections. */
  gone: () => number;
  warnings: string[];
}

function standby(
  dir: string,
  read: ReadNodeAnnotations | undefined,
  revision: string | undefined = "r2",
  incumbentSocket?: string,
): Probe {
  let reads = 0;
  let gone = 0;
  const warnings: string[] = [];
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void (JSON.parse(line).level === 40 && warnings.push(line)) },
  );
  const s = new Standby({
    dir,
    prefix: PREFIX,
    configName: CONFIG,
    revision,
    readNode:
      read &&
      (() => {
        reads++;
        return read();
      }),
    logger,
    onChange: () => undefined,
    onOlderGone: () => void gone++,
    incumbentSocket,
  });
  cleanups.push(() => Promise.resolve(s.stop()));
  return { standby: s, reads: () => reads, gone: () => gone, warnings };
}

const OWN_MS = Date.now();
const OWN = name(OWN_MS, 7);
const OLDER = name(OWN_MS - 60_000, 9);

describe("Standby", () => {
  it.each([
    {
      case: "no older instance: registers without reading the Node",
      older: "none",
      read: () => Promise.resolve(record({ from: "r1", to: "r2", standby: true })),
      want: { standingBy: false, reads: 0 },
    },
    {
      case: "an older live instance and a standby record for this revision: stands by",
      older: "live",
      read: () => Promise.resolve(record({ from: "r1", to: "r2", standby: true })),
      want: { standingBy: true, reads: 1 },
    },
    {
      case: "the older socket is dead: registers without reading the Node",
      older: "dead",
      read: () => Promise.resolve(record({ from: "r1", to: "r2", standby: true })),
      want: { standingBy: false, reads: 0 },
    },
    {
      case: "the Node cannot be read: registers, warning once",
      older: "live",
      read: () => Promise.reject(new Error('nodes "n1" is forbidden')),
      want: { standingBy: false, reads: 1, warnings: 1 },
    },
    {
      case: "a record of another revision: registers",
      older: "live",
      read: () => Promise.resolve(record({ from: "r1", to: "r3", standby: true })),
      want: { standingBy: false, reads: 1 },
    },
    {
      case: "a record without standby: registers",
      older: "live",
      read: () => Promise.resolve(record({ from: "r1", to: "r2" })),
      want: { standingBy: false, reads: 1 },
    },
    {
      case: "no API client (outside a cluster): registers without reading",
      older: "live",
      read: undefined,
      want: { standingBy: false, reads: 0 },
    },
  ])("$case", async ({ older, read, want }) => {
    const dir = await tempDir();
    await liveSocket(join(dir, OWN));
    if (older === "live") await liveSocket(join(dir, OLDER));
    if (older === "dead") await deadSocket(dir, OLDER);
    const probe = standby(dir, read);
    // Twice: the Node is read once per older instance, however often the plugin asks.
    for (let i = 0; i < 2; i++) {
      const got = await probe.standby.check(OWN);
      expect(got, `check ${i + 1}`).toBe(want.standingBy ? join(dir, OLDER) : undefined);
    }
    expect(probe.standby.standingBy).toBe(want.standingBy ? join(dir, OLDER) : undefined);
    expect(probe.reads()).toBe(want.reads);
    expect(probe.warnings.length, probe.warnings.join("\n")).toBe(want.warnings ?? 0);
    if (want.warnings) expect(probe.warnings[0]).toContain('nodes \\"n1\\" is forbidden');
  });

  it("without a revision never stands by", async () => {
    const dir = await tempDir();
    await liveSocket(join(dir, OLDER));
    const probe = standby(dir, () => Promise.resolve(record({ from: "r1", to: "r2", standby: true })), "");
    expect(await probe.standby.check(OWN)).toBeUndefined();
    expect(probe.reads()).toBe(0);
  });

  it("reads the Node again for another older instance, and registers once the older one is gone", async () => {
    const dir = await tempDir();
    const first = await liveSocket(join(dir, OLDER));
    const probe = standby(dir, () => Promise.resolve(record({ from: "r1", to: "r2", standby: true })));
    expect(await probe.standby.check(OWN)).toBe(join(dir, OLDER));
    // The older instance's socket moves (a kubelet restart): same instance, no new read. The connection
    // the standby holds to it ends at once, which says to look again.
    await first.close();
    await waitFor("the standby told that the older socket ended", () => probe.gone() === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    const moved = name(OWN_MS - 60_000, 9, 2);
    const second = await liveSocket(join(dir, moved));
    expect(await probe.standby.check(OWN)).toBe(join(dir, moved));
    expect(probe.reads()).toBe(1);
    // Another older instance: read once more.
    const other = name(OWN_MS - 30_000, 11);
    const third = await liveSocket(join(dir, other));
    expect(await probe.standby.check(OWN)).toBe(join(dir, other));
    expect(probe.reads()).toBe(2);
    await second.close();
    await third.close();
    expect(await probe.standby.check(OWN)).toBeUndefined();
    expect(probe.standby.standingBy).toBeUndefined();
  });
});

describe("a takeover's incumbent (spec.takeover.socket)", () => {
  it.each<{ glob: string; names: string[]; want: string[] }>([
    { glob: "dp.*", names: ["dp.1764400000", "kubelet.sock", "dpx1"], want: ["dp.1764400000"] },
    {
      glob: "nvidia-gpu.sock",
      names: ["nvidia-gpu.sock", "nvidia-gpuXsock", "nvidia-gpu.sock.1"],
      want: ["nvidia-gpu.sock"],
    },
    { glob: "*", names: ["kubelet.sock", "a.sock"], want: ["a.sock"] },
  ])("$glob matches $want", ({ glob, names, want }) => {
    expect(incumbentSockets(glob, names).map((s) => s.name)).toEqual(want);
    expect(incumbentSockets(undefined, names)).toEqual([]);
  });

  it("stands by while the incumbent's socket serves and the record says so, and registers once it is gone", async () => {
    const dir = await tempDir();
    await liveSocket(join(dir, OWN));
    const incumbent = await liveSocket(join(dir, "dp.1764400000"));
    const probe = standby(
      dir,
      () => Promise.resolve(record({ from: "incumbent", to: "r2", standby: true })),
      "r2",
      "dp.*",
    );
    expect(await probe.standby.check(OWN)).toBe(join(dir, "dp.1764400000"));
    await incumbent.close();
    await waitFor("the standby told that the incumbent's socket ended", () => probe.gone() === 1, {
      timeoutMs: 2_000,
      intervalMs: 5,
    });
    expect(await probe.standby.check(OWN)).toBeUndefined();
    // Without the setting the same socket is none of the plugin's business.
    const other = await tempDir();
    await liveSocket(join(other, "dp.1764400000"));
    const plain = standby(other, () =>
      Promise.resolve(record({ from: "incumbent", to: "r2", standby: true })),
    );
    expect(await plain.standby.check(OWN)).toBeUndefined();
    expect(plain.reads()).toBe(0);
  });
});
