// The NVIDIA backend publishes each GPU's PCIe root complex (resource.kubernetes.io/pcieRoot) beside its
// NUMA node, read from sysfs for the bus id nvidia-smi reports, as upstream drivers do.
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema } from "../../../../src/api/v1beta1/spec.js";
import { NVIDIADeviceBackend } from "../../../../src/plugin-runtime/backends/nvidia.js";
import { EIGHT_GPU_NUMA, fakeGpuNode, type FakeGpuNode } from "../../../fixtures/nvidia/fake-node.js";
import { silentLogger } from "./backend-wait.js";

const PCIE_ROOT = "resource.kubernetes.io/pcieRoot";

describe("NVIDIADeviceBackend locality", () => {
  let node: FakeGpuNode | undefined;
  let backend: NVIDIADeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    node?.remove();
  });

  it("gives each GPU of the recorded 8-GPU H100 board the root complex sysfs shows above it", async () => {
    // Two root complexes per socket, as on an HGX board; constructed, the bus ids are the recording's.
    const roots = Object.fromEntries(
      Object.keys(EIGHT_GPU_NUMA).map((address, i) => [
        address,
        `pci0000:${(i * 0x20).toString(16).padStart(2, "0")}`,
      ]),
    );
    node = fakeGpuNode("eight-gpu-two-numa", { numaNodes: EIGHT_GPU_NUMA, pcieRoots: roots });
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: node.nvidiaSmiPath,
      devRoot: node.devRoot,
      sysfsRoot: node.sysfsRoot,
      timeoutSeconds: 2,
    });
    backend = new NVIDIADeviceBackend(config, { logger: silentLogger(), pollIntervalMs: 40 });
    const devices = await backend.start();
    expect(devices.map((d) => d.attributes[PCIE_ROOT])).toEqual(
      devices.map((d) => roots[d.attributes.pciBusId!]),
    );
    expect(new Set(devices.map((d) => d.attributes[PCIE_ROOT])).size).toBe(8);
    expect(devices.map((d) => d.numaNode)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
  });

  it("publishes no root where sysfs has no bus link for the GPU", async () => {
    node = fakeGpuNode("eight-gpu-two-numa", { numaNodes: EIGHT_GPU_NUMA });
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: node.nvidiaSmiPath,
      devRoot: node.devRoot,
      sysfsRoot: node.sysfsRoot,
      timeoutSeconds: 2,
    });
    backend = new NVIDIADeviceBackend(config, { logger: silentLogger(), pollIntervalMs: 40 });
    const devices = await backend.start();
    expect(devices.every((d) => d.attributes[PCIE_ROOT] === undefined)).toBe(true);
  });
});
