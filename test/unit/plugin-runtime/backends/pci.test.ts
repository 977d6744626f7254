// PCI backend against a fixture sysfs tree: matching by vendor/device/class, NUMA, VFIO device nodes,
// and devices that disappear and come back.
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PCIBackendSchema, type PCIBackend } from "../../../../src/api/v1beta1/spec.js";
import {
  REASON_DEVICE_REMOVED,
  UnknownDevicesError,
} from "../../../../src/plugin-runtime/backends/device-list.js";
import {
  PCIDeviceBackend,
  REASON_NO_IOMMU_GROUP,
  REASON_VFIO_DEVICE_MISSING,
  matchesPciSelector,
  parseNumaNode,
  parseSysfsHex,
  pciAddressesEnvName,
  vfioDeviceSpecs,
} from "../../../../src/plugin-runtime/backends/pci.js";
import { byId, makeTempDir, silentLogger, waitForDevices } from "./backend-wait.js";

const RESOURCE = "hardware-vendor.example/gpu";
const ENV = "PCI_RESOURCE_HARDWARE-VENDOR_EXAMPLE_GPU";

const parse = (input: unknown): PCIBackend => PCIBackendSchema.parse(input);

describe("sysfs parsing", () => {
  it.each([
    ["0x10de\n", "10de"],
    ["0X10DE", "10de"],
    ["0x030200\n", "030200"],
    ["8086", "8086"],
  ])("parseSysfsHex(%j) = %s", (text, want) => {
    expect(parseSysfsHex(text)).toBe(want);
  });

  it.each([
    ["0\n", 0],
    ["3", 3],
    ["-1\n", undefined],
    ["", undefined],
    ["x", undefined],
    [undefined, undefined],
  ])("parseNumaNode(%j) = %s", (text, want) => {
    expect(parseNumaNode(text)).toBe(want);
  });
});

describe("matchesPciSelector", () => {
  const gpu = { vendor: "10de", device: "20b0", classCode: "030200" };
  it.each([
    [{ vendor: "10de" }, true],
    [{ vendor: "8086" }, false],
    [{ vendor: "10de", devices: ["20b0", "20b5"] }, true],
    [{ vendor: "10de", devices: ["20b5"] }, false],
    [{ vendor: "10de", classPrefix: "03" }, true],
    [{ vendor: "10de", classPrefix: "0302" }, true],
    [{ vendor: "10de", classPrefix: "030200" }, true],
    [{ vendor: "10de", classPrefix: "0300" }, false],
    [{ vendor: "10de", devices: ["20b0"], classPrefix: "04" }, false],
  ])("%j → %s", (selector, want) => {
    expect(matchesPciSelector(parse(selector), gpu)).toBe(want);
  });
});

describe("pciAddressesEnvName and vfioDeviceSpecs", () => {
  it.each([
    ["hardware-vendor.example/gpu", "PCI_RESOURCE_HARDWARE-VENDOR_EXAMPLE_GPU"],
    ["nvidia.com/GP102GL_Tesla_P40", "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40"],
  ])("%s → %s", (name, want) => {
    expect(pciAddressesEnvName(name)).toBe(want);
  });

  it("gives each IOMMU group once, plus the VFIO container node, and nothing for other drivers", () => {
    const base = { vendor: "10de", device: "20b0", classCode: "030200", numaNode: 0 };
    const specs = vfioDeviceSpecs("/host/dev", [
      { ...base, address: "0000:3b:00.0", driver: "vfio-pci", iommuGroup: "42" },
      { ...base, address: "0000:3b:00.1", driver: "vfio-pci", iommuGroup: "42" },
      { ...base, address: "0000:5e:00.0", driver: "vfio-pci", iommuGroup: "7" },
      { ...base, address: "0000:86:00.0", driver: "nvidia", iommuGroup: "77" },
    ]);
    expect(specs).toEqual([
      { containerPath: "/dev/vfio/42", hostPath: "/host/dev/vfio/42", permissions: "rw" },
      { containerPath: "/dev/vfio/7", hostPath: "/host/dev/vfio/7", permissions: "rw" },
      { containerPath: "/dev/vfio/vfio", hostPath: "/host/dev/vfio/vfio", permissions: "rw" },
    ]);
    expect(
      vfioDeviceSpecs("/dev", [{ ...base, address: "0000:86:00.0", driver: "nvidia", iommuGroup: "77" }]),
    ).toEqual([]);
  });
});

interface FixtureFunction {
  readonly address: string;
  readonly vendor: string;
  readonly device: string;
  readonly classCode: string;
  readonly numaNode: string;
  readonly driver?: string;
  readonly iommuGroup?: string;
}

const FUNCTIONS: readonly FixtureFunction[] = [
  {
    address: "0000:3b:00.0",
    vendor: "10de",
    device: "20b0",
    classCode: "030200",
    numaNode: "0",
    driver: "vfio-pci",
    iommuGroup: "42",
  },
  {
    address: "0000:86:00.0",
    vendor: "10de",
    device: "20b0",
    classCode: "030200",
    numaNode: "1",
    driver: "nvidia",
    iommuGroup: "77",
  },
  {
    address: "0000:af:00.1",
    vendor: "10de",
    device: "10f0",
    classCode: "040300",
    numaNode: "-1",
    driver: "snd_hda_intel",
  },
  { address: "0000:d8:00.0", vendor: "10de", device: "20b5", classCode: "030200", numaNode: "1" },
  {
    address: "0000:00:1f.0",
    vendor: "8086",
    device: "a1c8",
    classCode: "060100",
    numaNode: "0",
    driver: "lpc_ich",
  },
];

describe("PCIDeviceBackend", () => {
  let tree: { path: string; remove: () => Promise<void> };
  let sysfsRoot: string;
  let devRoot: string;
  const backends: PCIDeviceBackend[] = [];

  /** Lays a function out the way sysfs does: a device directory, a bus symlink to it, driver and group links. */
  const addFunction = async (fn: FixtureFunction) => {
    const deviceDir = join(sysfsRoot, "devices", "pci0000:00", fn.address);
    await mkdir(deviceDir, { recursive: true });
    await writeFile(join(deviceDir, "vendor"), `0x${fn.vendor}\n`);
    await writeFile(join(deviceDir, "device"), `0x${fn.device}\n`);
    await writeFile(join(deviceDir, "class"), `0x${fn.classCode}\n`);
    await writeFile(join(deviceDir, "numa_node"), `${fn.numaNode}\n`);
    if (fn.driver !== undefined) {
      await mkdir(join(sysfsRoot, "bus/pci/drivers", fn.driver), { recursive: true });
      await symlink(`../../../bus/pci/drivers/${fn.driver}`, join(deviceDir, "driver"));
    }
    if (fn.iommuGroup !== undefined) {
      await mkdir(join(sysfsRoot, "kernel/iommu_groups", fn.iommuGroup), { recursive: true });
      await symlink(`../../../kernel/iommu_groups/${fn.iommuGroup}`, join(deviceDir, "iommu_group"));
      if (fn.driver === "vfio-pci") await writeFile(join(devRoot, "vfio", fn.iommuGroup), "");
    }
    await symlink(
      `../../../devices/pci0000:00/${fn.address}`,
      join(sysfsRoot, "bus/pci/devices", fn.address),
    );
  };

  const removeFunction = async (address: string) => {
    await rm(join(sysfsRoot, "bus/pci/devices", address));
    await rm(join(sysfsRoot, "devices", "pci0000:00", address), { recursive: true });
  };

  const startBackend = async (
    selector: Record<string, unknown>,
    timings: { removedGracePeriodMs?: number } = {},
  ) => {
    const backend = new PCIDeviceBackend(parse({ ...selector, sysfsRoot, devRoot }), {
      logger: silentLogger(),
      resourceName: RESOURCE,
      rescanIntervalMs: 100,
      ...timings,
    });
    backends.push(backend);
    const initial = await backend.start();
    return { backend, initial };
  };

  beforeEach(async () => {
    tree = await makeTempDir("pci");
    sysfsRoot = join(tree.path, "sys");
    devRoot = join(tree.path, "dev");
    await mkdir(join(sysfsRoot, "bus/pci/devices"), { recursive: true });
    await mkdir(join(devRoot, "vfio"), { recursive: true });
    await writeFile(join(devRoot, "vfio", "vfio"), "");
    for (const fn of FUNCTIONS) await addFunction(fn);
  });

  afterEach(async () => {
    await Promise.all(backends.splice(0).map((backend) => backend.stop()));
    await tree.remove();
  });

  it.each([
    [{ vendor: "10de" }, ["0000:3b:00.0", "0000:86:00.0", "0000:af:00.1", "0000:d8:00.0"]],
    [{ vendor: "10de", classPrefix: "0302" }, ["0000:3b:00.0", "0000:86:00.0", "0000:d8:00.0"]],
    [{ vendor: "10de", classPrefix: "04" }, ["0000:af:00.1"]],
    [{ vendor: "10de", devices: ["20b5", "10f0"] }, ["0000:af:00.1", "0000:d8:00.0"]],
    [{ vendor: "8086" }, ["0000:00:1f.0"]],
    [{ vendor: "1002" }, []],
  ])("selects %j", async (selector, want) => {
    const { initial } = await startBackend(selector);
    expect(initial.map((d) => d.id)).toEqual(want);
  });

  it("reads the NUMA node (-1 is unknown) and the attributes", async () => {
    const { initial } = await startBackend({ vendor: "10de" });
    expect(initial.map((d) => d.numaNode)).toEqual([0, 1, undefined, 1]);
    expect(byId(initial, "0000:3b:00.0")).toEqual({
      id: "0000:3b:00.0",
      numaNode: 0,
      health: "Healthy",
      reason: "",
      attributes: {
        vendor: "10de",
        device: "20b0",
        address: "0000:3b:00.0",
        class: "030200",
        driver: "vfio-pci",
        iommuGroup: "42",
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
      },
    });
    expect(byId(initial, "0000:d8:00.0")?.attributes).toEqual({
      vendor: "10de",
      device: "20b5",
      address: "0000:d8:00.0",
      class: "030200",
      "resource.kubernetes.io/pcieRoot": "pci0000:00",
    });
  });

  it("allocates VFIO device nodes under devRoot for vfio-pci devices and lists addresses in the env", async () => {
    const { backend } = await startBackend({ vendor: "10de", classPrefix: "0302" });
    expect(backend.allocate(["0000:3b:00.0", "0000:86:00.0"])).toEqual({
      envs: { [ENV]: "0000:3b:00.0,0000:86:00.0" },
      mounts: [],
      annotations: {},
      devices: [
        { containerPath: "/dev/vfio/42", hostPath: join(devRoot, "vfio/42"), permissions: "rw" },
        { containerPath: "/dev/vfio/vfio", hostPath: join(devRoot, "vfio/vfio"), permissions: "rw" },
      ],
    });
    expect(backend.allocate(["0000:86:00.0"]).devices).toEqual([]);
    expect(() => backend.allocate(["0000:00:1f.0"])).toThrow(UnknownDevicesError);
  });

  it("gives each function CDI edits of its own: its vfio nodes when bound to vfio-pci, and its address", async () => {
    const { backend } = await startBackend({ vendor: "10de", classPrefix: "0302" });
    expect(backend.cdiContainerEdits("0000:3b:00.0")).toEqual({
      env: ["PCI_DEVICE_0000_3B_00_0=0000:3b:00.0"],
      deviceNodes: [
        { path: "/dev/vfio/42", hostPath: join(devRoot, "vfio/42"), permissions: "rw" },
        { path: "/dev/vfio/vfio", hostPath: join(devRoot, "vfio/vfio"), permissions: "rw" },
      ],
    });
    // Another driver: no nodes, but never empty edits (runtimes refuse those).
    expect(backend.cdiContainerEdits("0000:86:00.0")).toEqual({
      env: ["PCI_DEVICE_0000_86_00_0=0000:86:00.0"],
      deviceNodes: [],
    });
    expect(backend.cdiContainerEdits("0000:00:1f.0")).toBeUndefined();
  });

  it("marks a vfio-pci device unhealthy while /dev/vfio/<group> is missing, and healthy when it is back", async () => {
    const { backend } = await startBackend({ vendor: "10de", classPrefix: "0302" });
    await rm(join(devRoot, "vfio/42"));
    await waitForDevices(
      backend,
      (d) => byId(d, "0000:3b:00.0")?.reason === REASON_VFIO_DEVICE_MISSING,
      "VFIO node missing",
    );
    expect(byId(backend.devices(), "0000:86:00.0")?.health).toBe("Healthy");
    await writeFile(join(devRoot, "vfio/42"), "");
    await waitForDevices(backend, (d) => byId(d, "0000:3b:00.0")?.health === "Healthy", "VFIO node back");
  });

  it("marks a vfio-pci device without an IOMMU group unhealthy", async () => {
    await addFunction({
      address: "0000:e1:00.0",
      vendor: "1af4",
      device: "1000",
      classCode: "020000",
      numaNode: "0",
      driver: "vfio-pci",
    });
    const { initial } = await startBackend({ vendor: "1af4" });
    expect(initial).toMatchObject([
      { id: "0000:e1:00.0", health: "Unhealthy", reason: REASON_NO_IOMMU_GROUP },
    ]);
  });

  it("sees a removed device go unhealthy and then away, and a new one appear", async () => {
    const { backend } = await startBackend(
      { vendor: "10de", classPrefix: "0302" },
      { removedGracePeriodMs: 300 },
    );
    await removeFunction("0000:86:00.0");
    await waitForDevices(
      backend,
      (d) => byId(d, "0000:86:00.0")?.reason === REASON_DEVICE_REMOVED,
      "device removed",
    );
    expect(byId(backend.devices(), "0000:86:00.0")?.health).toBe("Unhealthy");
    await waitForDevices(
      backend,
      (d) => byId(d, "0000:86:00.0") === undefined,
      "device dropped after the grace period",
    );

    await addFunction({
      address: "0000:5e:00.0",
      vendor: "10de",
      device: "20b0",
      classCode: "030200",
      numaNode: "0",
      driver: "vfio-pci",
      iommuGroup: "9",
    });
    const seen = await waitForDevices(
      backend,
      (d) => byId(d, "0000:5e:00.0")?.health === "Healthy",
      "hot-added device",
    );
    expect(seen.devices.map((d) => d.id)).toEqual(["0000:3b:00.0", "0000:5e:00.0", "0000:d8:00.0"]);
  });

  it("notices a driver rebind and stops idempotently", async () => {
    const { backend } = await startBackend({ vendor: "10de", devices: ["20b5"] });
    await mkdir(join(sysfsRoot, "bus/pci/drivers/vfio-pci"), { recursive: true });
    const deviceDir = join(sysfsRoot, "devices", "pci0000:00", "0000:d8:00.0");
    await mkdir(join(sysfsRoot, "kernel/iommu_groups/50"), { recursive: true });
    await symlink("../../../kernel/iommu_groups/50", join(deviceDir, "iommu_group"));
    await symlink("../../../bus/pci/drivers/vfio-pci", join(deviceDir, "driver"));
    const rebound = await waitForDevices(
      backend,
      (d) => byId(d, "0000:d8:00.0")?.attributes.driver === "vfio-pci",
      "driver rebind seen by the periodic rescan",
    );
    expect(byId(rebound.devices, "0000:d8:00.0")?.reason).toBe(REASON_VFIO_DEVICE_MISSING);
    await backend.stop();
    await backend.stop();
  });
});
