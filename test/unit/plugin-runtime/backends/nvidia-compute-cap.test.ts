// The NVIDIA backend's compute capability: parsed from `nvidia-smi --query-gpu=uuid,compute_cap`, reported
// as each GPU's `computeCapability` attribute (the operator's node labels read it), and simply absent where
// nvidia-smi does not give it (a driver before R510) rather than a health problem.
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema } from "../../../../src/api/v1beta1/spec.js";
import { NVIDIADeviceBackend } from "../../../../src/plugin-runtime/backends/nvidia.js";
import { parseComputeCaps } from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import { EIGHT_GPU_NUMA, fakeGpuNode, type FakeGpuNode } from "../../../fixtures/nvidia/fake-node.js";
import { silentLogger } from "./backend-wait.js";

const H100_0 = "GPU-0a6f1f4e-2c35-4b8e-9d11-6f1e2a3b4c01";

describe("parseComputeCaps", () => {
  it("reads uuid, capability rows and skips every other line", () => {
    const caps = parseComputeCaps(
      [
        `${H100_0}, 9.0`,
        "GPU-1b7a2e5f-3d46-4c9f-8e22-7a2f3b4c5d02, [N/A]",
        `0, ${H100_0}, NVIDIA H100 80GB HBM3, 81559, Disabled, 00000000:18:00.0, 550.90.07, No`,
        'Field "compute_cap" is not a valid field to query.',
        "",
      ].join("\n"),
    );
    expect([...caps]).toEqual([[H100_0, "9.0"]]);
  });
});

describe("the backend's computeCapability attribute", () => {
  let node: FakeGpuNode | undefined;
  let backend: NVIDIADeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    node?.remove();
    backend = undefined;
    node = undefined;
  });

  async function devicesOf(scenario: "eight-gpu-two-numa" | "single-gpu") {
    node = fakeGpuNode(scenario, { numaNodes: EIGHT_GPU_NUMA });
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: node.nvidiaSmiPath,
      devRoot: node.devRoot,
      sysfsRoot: node.sysfsRoot,
      timeoutSeconds: 2,
    });
    backend = new NVIDIADeviceBackend(config, { logger: silentLogger(), pollIntervalMs: 40 });
    await backend.start();
    return backend.devices();
  }

  it("reports each GPU's capability where nvidia-smi gives it", async () => {
    const devices = await devicesOf("eight-gpu-two-numa");
    expect(devices.map((d) => d.attributes.computeCapability)).toEqual(Array(8).fill("9.0"));
    expect(devices.every((d) => d.health === "Healthy")).toBe(true);
  });

  it("leaves it out, and the GPU healthy, where nvidia-smi gives none", async () => {
    const devices = await devicesOf("single-gpu");
    expect(devices[0]?.attributes).not.toHaveProperty("computeCapability");
    expect(devices[0]?.health).toBe("Healthy");
    expect(backend!.diagnostics()).toEqual([]);
  });
});
