// The PCIe root complex and NUMA node of a PCI function, read from sysfs as upstream's deviceattribute
// package reads them (k8s.io/dynamic-resource-allocation/deviceattribute, resolvePCIeRoot).
import { mkdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  pcieRootAttribute,
  pcieRootFromLink,
  readPciLocality,
} from "../../../../src/plugin-runtime/backends/sysfs-pci.js";
import { makeTempDir } from "./backend-wait.js";

describe("pcieRootFromLink", () => {
  it.each([
    // A function right under its root port, and one behind two switches (an HGX board's GPU).
    ["0000:3b:00.0", "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", "pci0000:3a"],
    [
      "0000:1b:00.0",
      "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:1b:00.0",
      "pci0000:15",
    ],
    // A second PCI segment (domain 0001), as on a 4-socket MI300A node.
    ["0001:02:00.0", "../../../devices/pci0001:00/0001:00:01.1/0001:01:00.0/0001:02:00.0", "pci0001:00"],
    // An absolute target, as a test tree or a bind-mounted sysfs may hold.
    ["0000:3b:00.0", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", "pci0000:3a"],
  ])("%s → %s gives %s", (address, target, want) => {
    expect(pcieRootFromLink(address, target)).toBe(want);
  });

  it.each([
    ["not extended BDF (no domain)", "3b:00.0", "../../../devices/pci0000:3a/3b:00.0"],
    ["upper case, which sysfs never writes", "0000:3B:00.0", "../../../devices/pci0000:3a/0000:3B:00.0"],
    ["outside devices/pci*", "0000:3b:00.0", "../../../devices/platform/0000:3b:00.0"],
    ["a target that is another function", "0000:3b:00.0", "../../../devices/pci0000:3a/0000:3b:00.1"],
  ])("gives nothing for %s, where upstream fails", (_what, address, target) => {
    expect(pcieRootFromLink(address, target)).toBeUndefined();
  });
});

describe("readPciLocality", () => {
  let tree: { path: string; remove: () => Promise<void> } | undefined;
  afterEach(async () => {
    await tree?.remove();
  });

  const layOut = async (address: string, rootComplex: string, numa: string | undefined) => {
    tree = await makeTempDir("locality");
    const dir = join(tree.path, "devices", rootComplex, address);
    await mkdir(dir, { recursive: true });
    if (numa !== undefined) await writeFile(join(dir, "numa_node"), `${numa}\n`);
    await mkdir(join(tree.path, "bus/pci/devices"), { recursive: true });
    await symlink(`../../../devices/${rootComplex}/${address}`, join(tree.path, "bus/pci/devices", address));
    return tree.path;
  };

  it("reads the NUMA node and the root complex", async () => {
    const sysfs = await layOut("0000:86:00.0", "pci0000:85", "1");
    expect(await readPciLocality(sysfs, "0000:86:00.0")).toEqual({ numaNode: 1, pcieRoot: "pci0000:85" });
  });

  it("has no NUMA node for -1, as upstream publishes none for a device without affinity", async () => {
    const sysfs = await layOut("0000:86:00.0", "pci0000:85", "-1");
    expect(await readPciLocality(sysfs, "0000:86:00.0")).toEqual({
      numaNode: undefined,
      pcieRoot: "pci0000:85",
    });
  });

  it("says nothing of a function sysfs does not list", async () => {
    const sysfs = await layOut("0000:86:00.0", "pci0000:85", "0");
    expect(await readPciLocality(sysfs, "0000:99:00.0")).toEqual({
      numaNode: undefined,
      pcieRoot: undefined,
    });
  });
});

describe("pcieRootAttribute", () => {
  it("is the standard qualified name with the root, or nothing", () => {
    expect(pcieRootAttribute("pci0000:00")).toEqual({ "resource.kubernetes.io/pcieRoot": "pci0000:00" });
    expect(pcieRootAttribute(undefined)).toEqual({});
  });
});
