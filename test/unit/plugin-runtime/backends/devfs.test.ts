// DevFS backend: globs resolved under a root, ids, file-type health, sharing slots and hot-plug.
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DevFSBackendSchema, type DevFSBackend } from "../../../../src/api/v1beta1/spec.js";
import {
  DevFSDeviceBackend,
  REASON_WRONG_FILE_TYPE,
  devfsDeviceId,
  devfsDevices,
  resolveGlob,
} from "../../../../src/plugin-runtime/backends/devfs.js";
import {
  REASON_DEVICE_REMOVED,
  UnknownDevicesError,
} from "../../../../src/plugin-runtime/backends/device-list.js";
import { byId, makeTempDir, silentLogger, waitForDevices } from "./backend-wait.js";

describe("devfsDeviceId", () => {
  it.each([
    ["/dev/ttyUSB0", "ttyUSB0"],
    ["/dev/bus/usb/001/002", "bus_usb_001_002"],
    ["/dev/serial/by-path/pci-0000:00:14.0-usb-0:2:1.0", "serial_by-path_pci-0000_00_14.0-usb-0_2_1.0"],
    ["/opt/fake/dev0", "opt_fake_dev0"],
    ["/dev", "dev"],
    ["/device", "device"],
  ])("%s → %s", (path, want) => {
    expect(devfsDeviceId(path)).toBe(want);
  });
});

const parse = (input: unknown): DevFSBackend => DevFSBackendSchema.parse(input);

describe("devfsDevices", () => {
  it("makes one device per path, or one per slot with maxContainersPerDevice, sharing the host path", () => {
    const config = parse({
      root: "/host",
      paths: [
        { glob: "/dev/ttyUSB*" },
        { glob: "/dev/kvm", maxContainersPerDevice: 3, permissions: "rwm" },
        { glob: "/dev/tty*" },
      ],
    });
    const { devices, duplicates } = devfsDevices(config, [
      { pathIndex: 0, containerPath: "/dev/ttyUSB0", observed: "CharDevice" },
      { pathIndex: 1, containerPath: "/dev/kvm", observed: "CharDevice" },
      { pathIndex: 2, containerPath: "/dev/ttyUSB0", observed: "CharDevice" },
      { pathIndex: 2, containerPath: "/dev/ttyS0", observed: "File" },
    ]);
    expect(devices.map(({ device }) => `${device.id}:${device.health}:${device.reason}`)).toEqual([
      "ttyUSB0:Healthy:",
      "kvm-0:Healthy:",
      "kvm-1:Healthy:",
      "kvm-2:Healthy:",
      `ttyS0:Unhealthy:${REASON_WRONG_FILE_TYPE}`,
    ]);
    expect(duplicates.map((d) => `${d.pathIndex}:${d.containerPath}`)).toEqual(["2:/dev/ttyUSB0"]);
    const kvm = devices.filter(({ device }) => device.id.startsWith("kvm"));
    expect(new Set(kvm.map(({ spec }) => JSON.stringify(spec)))).toEqual(
      new Set([JSON.stringify({ containerPath: "/dev/kvm", hostPath: "/host/dev/kvm", permissions: "rwm" })]),
    );
    expect(kvm[1]?.device.attributes).toEqual({ path: "/dev/kvm", type: "CharDevice", slot: "1" });
    expect(devices[0]?.device.attributes).toEqual({ path: "/dev/ttyUSB0", type: "CharDevice" });
    expect(devices[0]?.device.numaNode).toBeUndefined();
  });
});

describe("DevFSDeviceBackend", () => {
  let root: { path: string; remove: () => Promise<void> };
  const backends: DevFSDeviceBackend[] = [];

  /** A character device inside the fake tree: a symlink to /dev/null, which stat follows like a runtime does. */
  const plugCharDevice = async (path: string) => {
    await mkdir(dirname(join(root.path, path)), { recursive: true });
    await symlink("/dev/null", join(root.path, path));
  };
  const unplug = (path: string) => rm(join(root.path, path), { recursive: true });

  const startBackend = async (
    paths: unknown[],
    timings: { rescanIntervalMs?: number; removedGracePeriodMs?: number } = {},
  ) => {
    const backend = new DevFSDeviceBackend(parse({ root: root.path, paths }), {
      logger: silentLogger(),
      rescanIntervalMs: 100,
      ...timings,
    });
    backends.push(backend);
    const initial = await backend.start();
    return { backend, initial };
  };

  beforeEach(async () => {
    root = await makeTempDir("devfs");
  });

  afterEach(async () => {
    await Promise.all(backends.splice(0).map((backend) => backend.stop()));
    await root.remove();
  });

  it("discovers matching character devices under the root, in natural order, ignoring non-matches", async () => {
    for (const name of ["ttyUSB10", "ttyUSB2", "ttyUSB0", "ttyS0"]) await plugCharDevice(`/dev/${name}`);
    const { initial } = await startBackend([{ glob: "/dev/ttyUSB*" }]);
    expect(initial.map((d) => `${d.id}:${d.health}`)).toEqual([
      "ttyUSB0:Healthy",
      "ttyUSB2:Healthy",
      "ttyUSB10:Healthy",
    ]);
  });

  it("allocates device specs with the path the glob names, the host path under the root and the permissions", async () => {
    await plugCharDevice("/dev/ttyUSB0");
    await plugCharDevice("/dev/ttyUSB1");
    const { backend } = await startBackend([{ glob: "/dev/ttyUSB*", permissions: "r" }]);
    expect(backend.allocate(["ttyUSB1"])).toEqual({
      envs: {},
      mounts: [],
      annotations: {},
      devices: [
        { containerPath: "/dev/ttyUSB1", hostPath: join(root.path, "dev/ttyUSB1"), permissions: "r" },
      ],
    });
    expect(() => backend.allocate(["ttyUSB7"])).toThrow(UnknownDevicesError);
  });

  it("gives each device its node as CDI edits, with the host path when the root moves it", async () => {
    await plugCharDevice("/dev/ttyUSB1");
    const { backend } = await startBackend([{ glob: "/dev/ttyUSB*", permissions: "r" }]);
    expect(backend.cdiContainerEdits("ttyUSB1")).toEqual({
      deviceNodes: [{ path: "/dev/ttyUSB1", hostPath: join(root.path, "dev/ttyUSB1"), permissions: "r" }],
    });
    expect(backend.cdiContainerEdits("ttyUSB7")).toBeUndefined();
  });

  it("shares one path among maxContainersPerDevice devices and gives a container the node once", async () => {
    await plugCharDevice("/dev/kvm");
    const { backend, initial } = await startBackend([{ glob: "/dev/kvm", maxContainersPerDevice: 2 }]);
    expect(initial.map((d) => d.id)).toEqual(["kvm-0", "kvm-1"]);
    expect(backend.allocate(["kvm-0", "kvm-1"]).devices).toEqual([
      { containerPath: "/dev/kvm", hostPath: join(root.path, "dev/kvm"), permissions: "rw" },
    ]);
  });

  it("checks the file type: a regular file is unhealthy as a CharDevice and healthy as a File", async () => {
    await mkdir(join(root.path, "dev"), { recursive: true });
    await writeFile(join(root.path, "dev/accel0"), "");
    await plugCharDevice("/dev/accel1");
    const asChar = await startBackend([{ glob: "/dev/accel*", type: "CharDevice" }]);
    expect(asChar.initial.map((d) => `${d.id}:${d.health}:${d.reason}`)).toEqual([
      `accel0:Unhealthy:${REASON_WRONG_FILE_TYPE}`,
      "accel1:Healthy:",
    ]);
    const asFile = await startBackend([{ glob: "/dev/accel*", type: "File" }]);
    expect(asFile.initial.map((d) => `${d.id}:${d.health}`)).toEqual(["accel0:Healthy", "accel1:Unhealthy"]);
  });

  it("turns a device healthy when its path becomes the right type", async () => {
    await mkdir(join(root.path, "dev"), { recursive: true });
    await writeFile(join(root.path, "dev/accel0"), "");
    const { backend } = await startBackend([{ glob: "/dev/accel*" }]);
    expect(byId(backend.devices(), "accel0")?.health).toBe("Unhealthy");
    await unplug("/dev/accel0");
    await plugCharDevice("/dev/accel0");
    await waitForDevices(
      backend,
      (d) => byId(d, "accel0")?.health === "Healthy",
      "accel0 healthy as a char device",
    );
  });

  it("hot-plug: a new match appears healthy; a removed one goes unhealthy, then away after the grace period", async () => {
    await plugCharDevice("/dev/ttyUSB0");
    const { backend } = await startBackend([{ glob: "/dev/ttyUSB*" }], { removedGracePeriodMs: 300 });

    const plugged = performance.now();
    await plugCharDevice("/dev/ttyUSB1");
    await waitForDevices(backend, (d) => byId(d, "ttyUSB1")?.health === "Healthy", "ttyUSB1 plugged in");
    console.log(`devfs hot-plug → subscriber: ${(performance.now() - plugged).toFixed(1)} ms`);

    await unplug("/dev/ttyUSB0");
    const removed = await waitForDevices(
      backend,
      (d) => byId(d, "ttyUSB0")?.reason === REASON_DEVICE_REMOVED,
      "ttyUSB0 unhealthy after removal",
    );
    expect(byId(removed.devices, "ttyUSB0")?.health).toBe("Unhealthy");
    expect(byId(removed.devices, "ttyUSB1")?.health).toBe("Healthy");
    await waitForDevices(
      backend,
      (d) => byId(d, "ttyUSB0") === undefined,
      "ttyUSB0 dropped after the grace period",
    );
    expect(() => backend.allocate(["ttyUSB0"])).toThrow(UnknownDevicesError);
  });

  it("a device that comes back within the grace period is healthy again under the same id", async () => {
    await plugCharDevice("/dev/ttyUSB0");
    const { backend } = await startBackend([{ glob: "/dev/ttyUSB*" }], { removedGracePeriodMs: 60_000 });
    await unplug("/dev/ttyUSB0");
    await waitForDevices(
      backend,
      (d) => byId(d, "ttyUSB0")?.reason === REASON_DEVICE_REMOVED,
      "ttyUSB0 removed",
    );
    expect(backend.allocate(["ttyUSB0"]).devices).toHaveLength(1);
    await plugCharDevice("/dev/ttyUSB0");
    await waitForDevices(backend, (d) => byId(d, "ttyUSB0")?.health === "Healthy", "ttyUSB0 back");
  });

  it("watches directories that appear later and nested wildcard directories", async () => {
    await plugCharDevice("/dev/bus/usb/001/002");
    const { backend, initial } = await startBackend(
      [{ glob: "/dev/bus/usb/*/*" }, { glob: "/dev/serial/by-id/*" }],
      {
        rescanIntervalMs: 60_000,
      },
    );
    expect(initial.map((d) => d.id)).toEqual(["bus_usb_001_002"]);
    // Without periodic rescans in this test's time frame, only directory watches can see these.
    await plugCharDevice("/dev/bus/usb/003/001");
    await waitForDevices(
      backend,
      (d) => byId(d, "bus_usb_003_001") !== undefined,
      "device on a new bus directory",
    );
    await plugCharDevice("/dev/serial/by-id/usb-FTDI-if00");
    await waitForDevices(
      backend,
      (d) => byId(d, "serial_by-id_usb-FTDI-if00") !== undefined,
      "device in a new directory tree",
    );
  });

  it("starts with no devices when nothing matches, and the root need not exist", async () => {
    const { initial } = await startBackend([{ glob: "/dev/nothing*" }]);
    expect(initial).toEqual([]);
    const missing = new DevFSDeviceBackend(
      parse({ root: join(root.path, "absent"), paths: [{ glob: "/dev/x*" }] }),
      {
        logger: silentLogger(),
      },
    );
    backends.push(missing);
    expect(await missing.start()).toEqual([]);
  });

  it("resolveGlob records every directory it looked into, so new matches there are noticed", async () => {
    await plugCharDevice("/dev/bus/usb/001/002");
    const lookedIn = new Set<string>();
    expect(await resolveGlob(root.path, "/dev/bus/usb/*/*", lookedIn)).toEqual(["/dev/bus/usb/001/002"]);
    expect([...lookedIn].sort()).toEqual(
      [root.path, "dev", "dev/bus", "dev/bus/usb", "dev/bus/usb/001"].map((p) =>
        p === root.path ? p : join(root.path, p),
      ),
    );
  });

  it("ignores dangling symlinks and stops idempotently", async () => {
    await mkdir(join(root.path, "dev"), { recursive: true });
    await symlink(join(root.path, "dev/gone"), join(root.path, "dev/ttyUSB9"));
    const { backend, initial } = await startBackend([{ glob: "/dev/ttyUSB*" }]);
    expect(initial).toEqual([]);
    await backend.stop();
    await backend.stop();
  });
});
