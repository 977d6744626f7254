// Two instances of one plugin on a node keep one CDI spec of their kind: only the newest live one writes
// it, so an older one never puts its device list back over the newer one's, and takes over once it goes.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CdiSpecSync } from "../../../src/plugin-runtime/cdi-spec-sync.js";
import type { DeviceBackend } from "../../../src/plugin-runtime/devices/backend.js";
import type { DeviceSetSnapshot } from "../../../src/plugin-runtime/devices/device-set.js";

const KIND = "vendor.example/foo";
const backend = {
  cdiContainerEdits: (id: string) => ({ env: [`FOO=${id}`] }),
} as Partial<DeviceBackend> as DeviceBackend;
const snapshot = (...ids: string[]): DeviceSetSnapshot =>
  ({ physical: ids.map((id) => ({ id })) }) as unknown as DeviceSetSnapshot;

/** Waits for `check` with a deadline, saying what it saw last when it runs out. */
async function waitUntil(what: string, check: () => unknown, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen: unknown;
  for (;;) {
    seen = check();
    if (seen === true) return;
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs} ms; last seen ${String(seen)}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("CdiSpecSync with an older and a newer instance of one plugin", () => {
  let dir: string;
  const syncs: CdiSpecSync[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "dpo-cdi-sync-"));
  });
  afterEach(() => {
    for (const s of syncs.splice(0)) s.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const devicesInFile = (): string[] => {
    const files = readdirSync(dir).filter((f) => f.endsWith(".json"));
    expect(files).toEqual(["vendor.example-foo.json"]);
    const spec = JSON.parse(readFileSync(join(dir, files[0]!), "utf8")) as { devices: { name: string }[] };
    return spec.devices.map((d) => d.name);
  };

  function instance(devices: DeviceSetSnapshot, newerInstanceLive?: () => Promise<boolean>): CdiSpecSync {
    const sync = new CdiSpecSync({
      dir,
      kind: KIND,
      backend,
      devices: () => devices,
      logger: pino({ level: "silent" }),
      newerPollMs: 5,
      ...(newerInstanceLive !== undefined ? { newerInstanceLive } : {}),
    });
    syncs.push(sync);
    return sync;
  }

  it("keeps the newer instance's devices when the older one writes after it, and the older's once the newer is gone", async () => {
    let newerLive = true;
    const olderDevices = snapshot("foo-0", "foo-1");
    const older = instance(olderDevices, () => Promise.resolve(newerLive));
    const newer = instance(snapshot("foo-0", "foo-1", "foo-2"), () => Promise.resolve(false));
    await newer.write(snapshot("foo-0", "foo-1", "foo-2"));
    // A device change on the older instance while the newer one serves.
    await older.write(olderDevices);
    expect(devicesInFile()).toEqual(["foo-0", "foo-1", "foo-2"]);
    // The newer one goes (a rollback deleted it): the older writes its devices again, on its own.
    newerLive = false;
    await waitUntil(
      "the older instance's devices in the spec",
      () => devicesInFile().join(",") === "foo-0,foo-1",
    );
  });

  it("writes when it cannot tell whether a newer instance runs", async () => {
    const sync = instance(snapshot("foo-0"), () => Promise.reject(new Error("EACCES")));
    await sync.write(snapshot("foo-0"));
    expect(devicesInFile()).toEqual(["foo-0"]);
  });
});

describe("CdiSpecSync after a newer instance wrote while nothing changed here", () => {
  it("writes its own devices again once the newer one is gone, with no device change to trigger it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dpo-cdi-sync-"));
    let newerLive = false;
    const sync = (devices: DeviceSetSnapshot, live: () => Promise<boolean>): CdiSpecSync =>
      new CdiSpecSync({
        dir,
        kind: KIND,
        backend,
        devices: () => devices,
        logger: pino({ level: "silent" }),
        newerPollMs: 5,
        newerInstanceLive: live,
      });
    const older = sync(snapshot("foo-0", "foo-1", "foo-2"), () => Promise.resolve(newerLive));
    const newer = sync(snapshot("foo-0"), () => Promise.resolve(false));
    try {
      const inFile = (): string =>
        (
          JSON.parse(readFileSync(join(dir, "vendor.example-foo.json"), "utf8")) as {
            devices: { name: string }[];
          }
        ).devices
          .map((d) => d.name)
          .join(",");
      await older.write(snapshot("foo-0", "foo-1", "foo-2"));
      newerLive = true;
      await newer.write(snapshot("foo-0"));
      expect(inFile()).toBe("foo-0");
      // A rollback deletes the newer instance, whose spec names fewer devices than this one hands out.
      newer.stop();
      newerLive = false;
      await waitUntil("the older instance's devices in the spec", () => inFile() === "foo-0,foo-1,foo-2");
    } finally {
      older.stop();
      newer.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
