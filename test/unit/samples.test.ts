// The example configs in config/samples: each passes `dpo validate`, all of them apply together, and they show every backend.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { loadDevicePluginConfig } from "../../src/api/validate.js";
import { BACKEND_TYPES, type DevicePluginConfig } from "../../src/api/index.js";
import { validateFiles } from "../../src/cli/validate.js";

const samplesDir = join(import.meta.dirname, "..", "..", "config", "samples");
const sampleFiles = readdirSync(samplesDir)
  .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
  .sort();

function loadSample(file: string): DevicePluginConfig {
  const result = loadDevicePluginConfig(readFileSync(join(samplesDir, file), "utf8"));
  if (!result.ok) throw new Error(`${file}: ${JSON.stringify(result.errors)}`);
  return result.value;
}

describe("config/samples", () => {
  it("has the examples the docs point to", () => {
    expect(sampleFiles).toEqual([
      "amd-instinct-gpu.yaml",
      "devfs-serial.yaml",
      "intel-data-center-gpu.yaml",
      "mock-basic.yaml",
      "mock-time-slicing.yaml",
      "nvidia-gpu.yaml",
      "nvidia-mig-1g-10gb.yaml",
      "pci-vfio-gpu.yaml",
      "sriov-nic-vfs.yaml",
      "time-slicing-default.yaml",
      "time-slicing-override.yaml",
      "topology-spread.yaml",
      "xilinx-alveo-fpga.yaml",
    ]);
  });

  it.each(sampleFiles)("dpo validate accepts %s", async (file) => {
    const path = join(samplesDir, file);
    const out = await validateFiles([path]);
    const { metadata } = parse(readFileSync(path, "utf8")) as { metadata: { name: string } };
    expect(out.lines).toEqual([`${path} DevicePluginConfig/${metadata.name}: valid (dpo.dev/v1beta1)`]);
    expect(out.exitCode).toBe(0);
  });

  it("kustomization.yaml lists every sample, so `kubectl apply -k config/samples` applies them all", () => {
    const kustomization = parse(readFileSync(join(samplesDir, "kustomization.yaml"), "utf8")) as {
      resources?: string[];
    };
    expect([...(kustomization.resources ?? [])].sort()).toEqual(sampleFiles);
  });

  it("applied together, no two samples claim the same name, or the same resource name at one priority", () => {
    const configs = sampleFiles.map(loadSample);
    const names = configs.map((c) => c.metadata.name);
    const claims = configs.map((c) => `${c.spec.resourceName} at ${c.spec.priority}`);
    expect(new Set(names).size, names.join(", ")).toBe(configs.length);
    expect(new Set(claims).size, claims.join(", ")).toBe(configs.length);
  });

  it("show every backend type, time-slicing and the topology policies", () => {
    const configs = sampleFiles.map(loadSample);
    expect(new Set(configs.map((c) => c.spec.backend.type))).toEqual(new Set(BACKEND_TYPES));
    expect(configs.some((c) => c.spec.sharing.strategy === "TimeSlicing")).toBe(true);
    expect(new Set(configs.map((c) => c.spec.topology.allocationPolicy))).toEqual(
      new Set(["None", "Packed", "Spread", "NUMAAligned"]),
    );
  });

  it.each([
    ["mock-basic.yaml", { backend: { type: "Mock", mock: { healthFile: "/run/dpo/health.json" } } }],
    [
      "mock-time-slicing.yaml",
      { sharing: { strategy: "TimeSlicing", replicas: 4, failRequestsGreaterThanOne: true } },
    ],
    ["devfs-serial.yaml", { backend: { type: "DevFS", devFS: { paths: [{ glob: "/dev/ttyUSB*" }] } } }],
    [
      "pci-vfio-gpu.yaml",
      {
        backend: { type: "PCI", pci: { vendor: "10de", classPrefix: "0302" } },
        topology: { allocationPolicy: "NUMAAligned" },
        cdi: { enabled: true },
      },
    ],
    [
      "nvidia-mig-1g-10gb.yaml",
      {
        resourceName: "nvidia.com/mig-1g.10gb",
        backend: { type: "NVIDIA", nvidia: { mig: { strategy: "Mixed", profile: "1g.10gb" } } },
      },
    ],
    ["topology-spread.yaml", { topology: { allocationPolicy: "Spread" } }],
    [
      "time-slicing-default.yaml",
      { resourceName: "hardware-vendor.example/foo-sliced", priority: 0, sharing: { replicas: 4 } },
    ],
    [
      "time-slicing-override.yaml",
      {
        resourceName: "hardware-vendor.example/foo-sliced",
        priority: 10,
        sharing: { replicas: 8 },
        nodeSelectorTerm: { matchExpressions: [{ key: "feature.example/pool", operator: "In" }] },
      },
    ],
  ])("%s shows what its name promises", (file, expected) => {
    expect(loadSample(file).spec).toMatchObject(expected);
  });

  it("nvidia-gpu.yaml advertises each GPU once: copying it must not multiply the nodes' GPU counts", () => {
    const spec = loadSample("nvidia-gpu.yaml").spec;
    expect(spec.sharing.strategy).toBe("None");
    expect(spec.sharing.replicas ?? 1).toBe(1);
  });
});
