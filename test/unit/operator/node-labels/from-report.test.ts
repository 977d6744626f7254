// The labels a report gives a node: GPU Feature Discovery's keys and value formats for the NVIDIA backend
// (NVIDIA/k8s-device-plugin internal/lm), dpo's device labels for every backend, nothing guessed.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { DeviceNodeStateStatus, ReportedDevice } from "../../../../src/api/v1beta1/devicenodestate.js";
import {
  archFamily,
  gfdLabels,
  labelsFromReport,
  sanitiseProduct,
} from "../../../../src/operator/node-labels/from-report.js";
import { NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";

const H100_REPORT = JSON.parse(
  readFileSync(join(NVIDIA_FIXTURES, "reports", "eight-h100.json"), "utf8"),
) as DeviceNodeStateStatus;

const noSharing = { sharing: { strategy: "None" as const, failRequestsGreaterThanOne: false } };
const nvidia = (name: string, sharing = noSharing.sharing) => ({
  metadata: { name },
  spec: { sharing, backend: { type: "NVIDIA" as const } },
});

function withAttributes(report: DeviceNodeStateStatus, extra: Record<string, string>): DeviceNodeStateStatus {
  return {
    ...report,
    devices: report.devices.map((d) => ({ ...d, attributes: { ...d.attributes, ...extra } })),
  };
}

describe("labelsFromReport", () => {
  it("gives the eight-H100 node GFD's labels, as GFD writes them for that node, and dpo's", () => {
    expect(labelsFromReport(nvidia("gpus") as never, H100_REPORT)).toEqual({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
      "nvidia.com/gpu.count": "8",
      "nvidia.com/gpu.memory": "81559",
      "nvidia.com/gpu.replicas": "1",
      "nvidia.com/gpu.sharing-strategy": "none",
      "nvidia.com/gpu.family": "hopper",
      "nvidia.com/gpu.compute.major": "9",
      "nvidia.com/gpu.compute.minor": "0",
      "nvidia.com/mps.capable": "false",
      "nvidia.com/mig.capable": "true",
      "nvidia.com/cuda.driver.major": "550",
      "nvidia.com/cuda.driver.minor": "90",
      "nvidia.com/cuda.driver.rev": "07",
      "nvidia.com/cuda.driver-version.major": "550",
      "nvidia.com/cuda.driver-version.minor": "90",
      "nvidia.com/cuda.driver-version.revision": "07",
      "nvidia.com/cuda.driver-version.full": "550.90.07",
      "nvidia.com/cuda.runtime.major": "12",
      "nvidia.com/cuda.runtime.minor": "4",
      "nvidia.com/cuda.runtime-version.major": "12",
      "nvidia.com/cuda.runtime-version.minor": "4",
      "nvidia.com/cuda.runtime-version.full": "12.4",
      "count.device.dpo.dev/gpus": "8",
      "replicas.device.dpo.dev/gpus": "1",
      "product.device.dpo.dev/gpus": "NVIDIA-H100-80GB-HBM3",
    });
  });

  it("marks a time-sliced GPU SHARED with its replicas, as GFD does", () => {
    const labels = labelsFromReport(
      nvidia("gpus", { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: false } as never),
      H100_REPORT,
    );
    expect(labels).toMatchObject({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
      "nvidia.com/gpu.replicas": "4",
      "nvidia.com/gpu.sharing-strategy": "time-slicing",
      "nvidia.com/gpu.count": "8",
      "replicas.device.dpo.dev/gpus": "4",
      // dpo's product names the hardware, shared or not.
      "product.device.dpo.dev/gpus": "NVIDIA-H100-80GB-HBM3",
    });
  });

  it("gives the compute capability and family only where the report carries one", () => {
    const withoutCap: DeviceNodeStateStatus = {
      ...H100_REPORT,
      devices: H100_REPORT.devices.map(({ attributes, ...d }) => {
        const { computeCapability: _cap, ...rest } = attributes ?? {};
        return { ...d, attributes: rest };
      }),
    };
    expect(labelsFromReport(nvidia("gpus"), withoutCap)).not.toHaveProperty("nvidia.com/gpu.family");
    const labels = labelsFromReport(
      nvidia("gpus"),
      withAttributes(H100_REPORT, { computeCapability: "8.6" }),
    );
    expect(labels).toMatchObject({
      "nvidia.com/gpu.family": "ampere",
      "nvidia.com/gpu.compute.major": "8",
      "nvidia.com/gpu.compute.minor": "6",
    });
  });

  it("labels MIG-enabled GPUs without sharing (replicas 0), and not MIG-capable ones as such", () => {
    const mig = gfdLabels(
      { sharing: { strategy: "TimeSlicing", replicas: 2, failRequestsGreaterThanOne: false } },
      withAttributes(H100_REPORT, { migMode: "Enabled" }),
    );
    expect(mig).toMatchObject({
      "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
      "nvidia.com/gpu.replicas": "0",
      "nvidia.com/gpu.sharing-strategy": "none",
      "nvidia.com/mig.capable": "true",
    });
    const t4 = gfdLabels(noSharing, {
      devices: [device("GPU-1", { model: "Tesla T4", migMode: "NotSupported", memoryMiB: "15360" })],
    });
    expect(t4).toMatchObject({ "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/mig.capable": "false" });
  });

  it("labels the most numerous model of a mixed node, with its own count", () => {
    const labels = gfdLabels(noSharing, {
      devices: [
        device("GPU-1", { model: "NVIDIA A100-SXM4-40GB" }),
        device("GPU-2", { model: "NVIDIA H100 80GB HBM3" }),
        device("GPU-3", { model: "NVIDIA H100 80GB HBM3" }),
      ],
    });
    expect(labels["nvidia.com/gpu.product"]).toBe("NVIDIA-H100-80GB-HBM3");
    expect(labels["nvidia.com/gpu.count"]).toBe("2");
  });

  it("leaves out what the report does not say: no driver, no CUDA, no memory, no devices", () => {
    const bare = gfdLabels(noSharing, { devices: [device("GPU-1", { model: "NVIDIA H100 80GB HBM3" })] });
    expect(Object.keys(bare).sort()).toEqual([
      "nvidia.com/gpu.count",
      "nvidia.com/gpu.product",
      "nvidia.com/gpu.replicas",
      "nvidia.com/gpu.sharing-strategy",
      "nvidia.com/mps.capable",
    ]);
    expect(gfdLabels(noSharing, { devices: [] })).toEqual({});
  });

  it("gives other backends dpo's labels only: the PCI ids as product, none where devices differ", () => {
    const pci = {
      metadata: { name: "vfs" },
      spec: { ...noSharing, backend: { type: "PCI" as const } },
    };
    const report = {
      devices: [
        device("0000:3b:00.1", { vendor: "15b3", device: "101e", class: "020000" }),
        device("0000:3b:00.2", { vendor: "15b3", device: "101e", class: "020000" }),
      ],
    };
    expect(labelsFromReport(pci as never, report)).toEqual({
      "count.device.dpo.dev/vfs": "2",
      "replicas.device.dpo.dev/vfs": "1",
      "product.device.dpo.dev/vfs": "15b3-101e",
    });
    const mixed = { devices: [device("a", { model: "X" }), device("b", { model: "Y" })] };
    expect(labelsFromReport({ ...pci, metadata: { name: "m" } }, mixed)).toEqual({
      "count.device.dpo.dev/m": "2",
      "replicas.device.dpo.dev/m": "1",
    });
  });
});

describe("sanitiseProduct and archFamily", () => {
  it("spells products as GFD does, bounded to a valid label value", () => {
    expect(sanitiseProduct("NVIDIA H100 80GB HBM3")).toBe("NVIDIA-H100-80GB-HBM3");
    expect(sanitiseProduct("NVIDIA A100-SXM4-40GB")).toBe("NVIDIA-A100-SXM4-40GB");
    expect(sanitiseProduct("  NVIDIA  H200 (rev 1)/x ")).toBe("NVIDIA-H200-rev-1x");
    const long = sanitiseProduct(`${"A ".repeat(40)}B`);
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^[A-Za-z0-9].*[A-Za-z0-9]$/);
  });

  it("names the architectures as GFD's getArchFamily does", () => {
    expect(archFamily(9, 0)).toBe("hopper");
    expect(archFamily(8, 0)).toBe("ampere");
    expect(archFamily(8, 9)).toBe("ada-lovelace");
    expect(archFamily(7, 5)).toBe("turing");
    expect(archFamily(10, 0)).toBe("blackwell");
    expect(archFamily(4, 0)).toBe("undefined");
  });
});

function device(id: string, attributes: Record<string, string>): ReportedDevice {
  return { id, health: "Healthy", since: "2026-01-01T00:00:00Z", replicas: 1, attributes };
}
