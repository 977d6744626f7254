// Instances of one plugin on a node keep their order when the wall clock steps back or forward between
// their starts: the newest one started is the newest for every instance, so none stands by for an older
// one or takes the registration back from a newer one.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { DRA_SOCKET_PREFIX, DraPlugin } from "../../../../src/plugin-runtime/dra/dra-plugin.js";
import {
  compareInstances,
  NewerInstanceProbe,
  parseInstanceSocket,
} from "../../../../src/plugin-runtime/registration/handover.js";
import { monotonicStartMs, socketFileName } from "../../../../src/plugin-runtime/registration/sockets.js";

const HOUR_MS = 3_600_000;
const T0 = Date.UTC(2026, 10, 1, 12, 0, 0);

describe("the order of plugin instances across wall-clock steps", () => {
  let dir: string;
  const plugins: DraPlugin[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "dpo-clock-step-"));
    vi.useFakeTimers({ toFake: ["Date"] });
  });

  afterEach(async () => {
    vi.useRealTimers();
    for (const plugin of plugins.splice(0)) await plugin.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts an instance of one driver with the wall clock at `wallMs`. */
  async function startAt(wallMs: number): Promise<DraPlugin> {
    vi.setSystemTime(wallMs);
    const plugin = new DraPlugin({
      driverName: "foo.example.com",
      nodeName: "node-1",
      devices: () => [],
      claims: { getResourceClaim: () => Promise.resolve(undefined) },
      logger: pino({ level: "silent" }),
      pluginDir: join(dir, "plugins"),
      registryDir: join(dir, "registry"),
      cdiDir: join(dir, "cdi"),
    });
    plugins.push(plugin);
    await plugin.serve();
    return plugin;
  }

  it("takes the last started instance as the newest, whatever the wall clock said", async () => {
    const first = await startAt(T0);
    const afterStepBack = await startAt(T0 - HOUR_MS);
    const afterStepForward = await startAt(T0 + 24 * HOUR_MS);
    const afterCorrection = await startAt(T0 + 60_000);
    const started = [first, afterStepBack, afterStepForward, afterCorrection];
    const newest = afterCorrection.endpoint;
    for (const [i, plugin] of started.entries()) {
      const seen = await new NewerInstanceProbe(DRA_SOCKET_PREFIX, plugin.endpoint!).newerLiveInstance();
      expect({ started: i, newerSeen: seen }).toEqual({
        started: i,
        newerSeen: plugin === afterCorrection ? undefined : newest,
      });
    }
  });
});

describe("monotonicStartMs", () => {
  it("reads the monotonic clock in ms, and a later reading names a newer instance", () => {
    let ns = 5_000_000_123n;
    const clock = (): bigint => ns;
    const a = monotonicStartMs(clock);
    ns += 1_000_000n;
    const b = monotonicStartMs(clock);
    expect([a, b]).toEqual([5_000, 5_001]);
    const keyA = parseInstanceSocket("dra-", socketFileName("dra-", a, 1))!;
    const keyB = parseInstanceSocket("dra-", socketFileName("dra-", b, 1))!;
    expect(compareInstances(keyB, keyA)).toBeGreaterThan(0);
  });

  it("names that an earlier release reads as wall-clock times later than its own", () => {
    const own = parseInt("mi3c5k1z", 36); // about 2026, as an earlier release names its start
    const name = socketFileName("dra-", 0, 1);
    const asEarlierReleaseReadsIt = parseInt(/^dra-([0-9a-z]+)-/.exec(name)![1]!, 36);
    expect(asEarlierReleaseReadsIt).toBeGreaterThan(own);
    expect(asEarlierReleaseReadsIt).toBeGreaterThan(Date.UTC(2200, 0, 1));
  });
});
