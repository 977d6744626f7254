// `dpo probe` with the device samples of config/samples over recorded /dev and /sys trees
// (test/fixtures/sysfs, each with its SOURCE note): the devices a user would see on such a node, what a
// container of each gets, and the standard locality attributes.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { loadDevicePluginConfig } from "../../../src/api/validate.js";
import type { DevicePluginConfig } from "../../../src/api/v1beta1/config.js";
import { formatProbeReport, probeBackend, probeExitCode } from "../../../src/cli/probe.js";
import { createBackend } from "../../../src/plugin-runtime/backends/index.js";
import { layOutFixtureTree, type FixtureTree } from "../support/fixture-tree.js";

const samplesDir = join(import.meta.dirname, "..", "..", "..", "config", "samples");
const PCIE_ROOT = "resource.kubernetes.io/pcieRoot";

/** The sample with its host paths moved under the fixture tree, as a plugin pod sees them mounted. */
function sampleOver(file: string, tree: FixtureTree): DevicePluginConfig {
  const loaded = loadDevicePluginConfig(readFileSync(join(samplesDir, file), "utf8"));
  if (!loaded.ok) throw new Error(`${file}: ${JSON.stringify(loaded.errors)}`);
  const config = structuredClone(loaded.value);
  const { backend } = config.spec;
  if (backend.devFS !== undefined) {
    backend.devFS.root = tree.root;
    backend.devFS.sysfsRoot = join(tree.root, "sys");
  }
  if (backend.pci !== undefined) {
    backend.pci.sysfsRoot = join(tree.root, "sys");
    backend.pci.devRoot = join(tree.root, "dev");
  }
  return config;
}

const trees: FixtureTree[] = [];
async function tree(name: string): Promise<FixtureTree> {
  const laid = await layOutFixtureTree(name);
  trees.push(laid);
  return laid;
}

afterEach(async () => {
  await Promise.all(trees.splice(0).map((t) => t.remove()));
});

/** What Allocate gives one container for `ids`, host paths relative to the tree. */
async function allocationOf(config: DevicePluginConfig, root: string, ids: string[]) {
  const backend = createBackend(config.spec, {
    logger: pino({ level: "silent" }),
    resourceName: config.spec.resourceName,
    cdi: { enabled: false },
  });
  try {
    await backend.start();
    const allocation = backend.allocate(ids);
    const cdi = backend.cdiContainerEdits(ids[0]!);
    const strip = (path: string) => path.slice(root.length);
    return {
      devices: allocation.devices.map((d) => `${d.containerPath} ${strip(d.hostPath)} ${d.permissions}`),
      envs: allocation.envs,
      cdiNodes: (cdi?.deviceNodes ?? []).map((n) => n.path),
    };
  } finally {
    await backend.stop();
  }
}

describe("dpo probe over recorded trees", () => {
  it("amd-instinct-gpu.yaml: one device per MI300 (card + render node), /dev/kfd to every container", async () => {
    const t = await tree("amd-instinct-mi300");
    const config = sampleOver("amd-instinct-gpu.yaml", t);
    const report = await probeBackend(config);
    expect(report.problems).toEqual([]);
    expect(probeExitCode(report)).toBe(0);
    expect(report.devices.map((d) => [d.id, d.health, d.numaNode, d.attributes[PCIE_ROOT]])).toEqual([
      ["0000_02_00.0", "Healthy", 0, "pci0000:00"],
      ["0001_02_00.0", "Healthy", 1, "pci0001:00"],
    ]);
    expect(report.devices[1]!.attributes).toMatchObject({
      group: "0001:02:00.0",
      nodes: "2",
      paths: "/dev/dri/card8,/dev/dri/renderD136",
    });
    expect(await allocationOf(config, t.root, ["0001_02_00.0"])).toEqual({
      devices: [
        "/dev/dri/card8 /dev/dri/card8 rw",
        "/dev/dri/renderD136 /dev/dri/renderD136 rw",
        "/dev/kfd /dev/kfd rw",
      ],
      envs: {},
      cdiNodes: ["/dev/dri/card8", "/dev/dri/renderD136", "/dev/kfd"],
    });
    expect(formatProbeReport(report)).toContain("0000_02_00.0  Healthy  -       0");
  });

  it("intel-data-center-gpu.yaml: one device per GPU Max, card and render node together", async () => {
    const t = await tree("intel-data-center-gpu-max");
    const config = sampleOver("intel-data-center-gpu.yaml", t);
    const report = await probeBackend(config);
    expect(report.problems).toEqual([]);
    expect(
      report.devices.map((d) => [d.id, d.health, d.attributes["paths"], d.attributes[PCIE_ROOT]]),
    ).toEqual([
      ["0000_1a_00.0", "Healthy", "/dev/dri/card0,/dev/dri/renderD128", "pci0000:16"],
      ["0000_9a_00.0", "Healthy", "/dev/dri/card1,/dev/dri/renderD129", "pci0000:97"],
    ]);
    expect((await allocationOf(config, t.root, ["0000_1a_00.0", "0000_9a_00.0"])).devices).toEqual([
      "/dev/dri/card0 /dev/dri/card0 rw",
      "/dev/dri/renderD128 /dev/dri/renderD128 rw",
      "/dev/dri/card1 /dev/dri/card1 rw",
      "/dev/dri/renderD129 /dev/dri/renderD129 rw",
    ]);
  });

  it("xilinx-alveo-fpga.yaml: one device per Alveo card, its management and user functions paired by slot", async () => {
    const t = await tree("xilinx-alveo-u250");
    const config = sampleOver("xilinx-alveo-fpga.yaml", t);
    const report = await probeBackend(config);
    expect(report.problems).toEqual([]);
    expect(report.devices.map((d) => [d.id, d.health, d.numaNode, d.attributes["paths"]])).toEqual([
      ["0000_65_00", "Healthy", 0, "/dev/dri/renderD128,/dev/xclmgmt25856"],
      ["0000_b3_00", "Healthy", 1, "/dev/dri/renderD129,/dev/xclmgmt45824"],
    ]);
    expect(report.devices[0]!.attributes[PCIE_ROOT]).toBe("pci0000:64");
  });

  it("xilinx-alveo-fpga.yaml: a card whose user function is gone is one unhealthy device, not a half", async () => {
    const t = await tree("xilinx-alveo-u250");
    const { rm } = await import("node:fs/promises");
    await rm(join(t.root, "dev/dri/renderD129"));
    const report = await probeBackend(sampleOver("xilinx-alveo-fpga.yaml", t));
    expect(report.devices.map((d) => `${d.id}:${d.health}:${d.reason}`)).toEqual([
      "0000_65_00:Healthy:",
      "0000_b3_00:Unhealthy:IncompleteGroup",
    ]);
    expect(probeExitCode(report)).toBe(1);
    expect(report.problems.join("\n")).toContain("0000_b3_00");
  });

  it("sriov-nic-vfs.yaml: the iavf VFs of the one physical function, with their PF and PCIe root", async () => {
    const t = await tree("sriov-nic-e810");
    const config = sampleOver("sriov-nic-vfs.yaml", t);
    const report = await probeBackend(config);
    expect(report.devices.map((d) => d.id)).toEqual(["0000:3b:01.0", "0000:3b:01.1"]);
    expect(report.devices[0]!.attributes).toEqual({
      vendor: "8086",
      device: "1889",
      address: "0000:3b:01.0",
      class: "020000",
      driver: "iavf",
      iommuGroup: "140",
      physicalFunction: "0000:3b:00.0",
      [PCIE_ROOT]: "pci0000:3a",
    });
    expect((await allocationOf(config, t.root, ["0000:3b:01.1"])).envs).toEqual({
      PCI_RESOURCE_INTEL_COM_E810_VF: "0000:3b:01.1",
    });
  });
});
