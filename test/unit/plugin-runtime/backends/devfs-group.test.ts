// DevFS device groups (ADR 0010): nodes grouped by a key into one device each, health per group, shared
// nodes, and the backend over a recorded tree with a name pattern and with a shared node missing.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DevFSBackendSchema } from "../../../../src/api/v1beta1/spec.js";
import { DevFSDeviceBackend } from "../../../../src/plugin-runtime/backends/devfs.js";
import {
  REASON_INCOMPLETE_GROUP,
  REASON_SHARED_PATH_MISSING,
  groupDevfsDevices,
} from "../../../../src/plugin-runtime/backends/devfs-group.js";
import {
  patternGroupKey,
  pciAddressInPath,
  sysfsGroupKey,
} from "../../../../src/plugin-runtime/backends/devfs-sysfs.js";
import { layOutFixtureTree, type FixtureTree } from "../../support/fixture-tree.js";
import { silentLogger } from "./backend-wait.js";

const config = DevFSBackendSchema.parse({
  root: "/host",
  paths: [{ glob: "/dev/dri/card*" }, { glob: "/dev/dri/renderD*", permissions: "r" }],
  groupBy: { key: "Pattern", pattern: "x(y)" },
});

describe("groupDevfsDevices", () => {
  it("makes one device per key of every node with it, healthy only when each entry contributed", () => {
    const { devices, unkeyed } = groupDevfsDevices(config, [
      { pathIndex: 0, containerPath: "/dev/dri/card1", observed: "CharDevice", key: "0000:c1:00.0" },
      { pathIndex: 1, containerPath: "/dev/dri/renderD129", observed: "CharDevice", key: "0000:c1:00.0" },
      { pathIndex: 0, containerPath: "/dev/dri/card0", observed: "CharDevice", key: "0000:03:00.0" },
      { pathIndex: 1, containerPath: "/dev/dri/renderD130", observed: "File", key: "0000:c2:00.0" },
      { pathIndex: 0, containerPath: "/dev/dri/card2", observed: "CharDevice", key: "0000:c2:00.0" },
      { pathIndex: 1, containerPath: "/dev/dri/renderD131", observed: "CharDevice", key: undefined },
    ]);
    expect(devices.map(({ device }) => `${device.id}:${device.health}:${device.reason}`)).toEqual([
      `0000_03_00.0:Unhealthy:${REASON_INCOMPLETE_GROUP}`,
      "0000_c1_00.0:Healthy:",
      "0000_c2_00.0:Unhealthy:WrongFileType",
    ]);
    expect(devices[1]!.specs).toEqual([
      { containerPath: "/dev/dri/card1", hostPath: "/host/dev/dri/card1", permissions: "rw" },
      { containerPath: "/dev/dri/renderD129", hostPath: "/host/dev/dri/renderD129", permissions: "r" },
    ]);
    expect(unkeyed.map((m) => m.containerPath)).toEqual(["/dev/dri/renderD131"]);
  });
});

describe("group keys", () => {
  it("finds the nearest PCI function in a sysfs path, its slot, and a pattern's group", () => {
    const path = "/sys/devices/pci0000:64/0000:64:00.0/0000:65:00.1/drm/renderD128";
    expect(pciAddressInPath(path)).toBe("0000:65:00.1");
    expect(pciAddressInPath("/sys/devices/virtual/kfd/kfd")).toBeUndefined();
    const node = { parent: "0000:65:00.1", pciAddress: "0000:65:00.1" };
    expect(sysfsGroupKey("PCISlot", node)).toBe("0000:65:00");
    expect(sysfsGroupKey("PCIAddress", node)).toBe("0000:65:00.1");
    expect(sysfsGroupKey("SysfsParent", node)).toBe("0000:65:00.1");
    expect(patternGroupKey(/accel(\d+)$/, "/dev/accel/accel3")).toBe("3");
    expect(patternGroupKey(/accel(\d+)$/, "/dev/accel/ctl")).toBeUndefined();
  });
});

describe("DevFSDeviceBackend with groups over a recorded tree", () => {
  let tree: FixtureTree | undefined;
  let backend: DevFSDeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    await tree?.remove();
  });

  it("groups by a name pattern without sysfs: an MI300's card and render node share nothing in their names, so each is its own", async () => {
    tree = await layOutFixtureTree("amd-instinct-mi300");
    const devFS = DevFSBackendSchema.parse({
      root: tree.root,
      paths: [{ glob: "/dev/dri/renderD*" }],
      groupBy: { key: "Pattern", pattern: "renderD(\\d+)$" },
      sharedPaths: [{ glob: "/dev/kfd" }],
    });
    backend = new DevFSDeviceBackend(devFS, { logger: silentLogger(), rescanIntervalMs: 60_000 });
    const devices = await backend.start();
    expect(devices.map((d) => `${d.id}:${d.health}`)).toEqual(["128:Healthy", "136:Healthy"]);
    expect(backend.allocate(["136"]).devices.map((d) => d.containerPath)).toEqual([
      "/dev/dri/renderD136",
      "/dev/kfd",
    ]);
  });

  it("makes every GPU unhealthy when /dev/kfd, which all of them need, is missing", async () => {
    tree = await layOutFixtureTree("amd-instinct-mi300");
    await rm(join(tree.root, "dev/kfd"));
    const devFS = DevFSBackendSchema.parse({
      root: tree.root,
      sysfsRoot: join(tree.root, "sys"),
      paths: [{ glob: "/dev/dri/card*" }, { glob: "/dev/dri/renderD*" }],
      groupBy: { key: "PCIAddress" },
      sharedPaths: [{ glob: "/dev/kfd" }],
    });
    backend = new DevFSDeviceBackend(devFS, { logger: silentLogger(), rescanIntervalMs: 60_000 });
    const devices = await backend.start();
    expect(devices.map((d) => `${d.id}:${d.reason}`)).toEqual([
      `0000_02_00.0:${REASON_SHARED_PATH_MISSING}`,
      `0001_02_00.0:${REASON_SHARED_PATH_MISSING}`,
    ]);
    expect(backend.diagnostics().join("\n")).toContain("/dev/kfd");
  });
});
