// `nvidia-smi topo -m` read from recorded output (test/fixtures/nvidia/topology/SOURCE.md), the
// interconnect the NVIDIA backend builds from it against the fake nvidia-smi, and what it changes in
// GetPreferredAllocation on a DGX-1 and a PCIe-only server.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema } from "../../../../src/api/v1beta1/spec.js";
import { NVIDIADeviceBackend } from "../../../../src/plugin-runtime/backends/nvidia.js";
import {
  describeLink,
  interconnectFromTopo,
  linkScore,
  parseTopoMatrix,
  type TopoMatrix,
} from "../../../../src/plugin-runtime/backends/nvidia-topology.js";
import { preferredAllocation } from "../../../../src/plugin-runtime/devices/allocation.js";
import { connectedness } from "../../../../src/plugin-runtime/devices/interconnect.js";
import {
  EIGHT_GPU_NUMA,
  NVIDIA_FIXTURES,
  fakeGpuNode,
  type FakeGpuNode,
} from "../../../fixtures/nvidia/fake-node.js";
import { DGX1, PCIE_T4, advertised } from "../devices/interconnect-support.js";
import { silentLogger } from "./backend-wait.js";

function recorded(file: string): TopoMatrix {
  const matrix = parseTopoMatrix(readFileSync(join(NVIDIA_FIXTURES, "topology", file), "utf8"));
  if (typeof matrix === "string") throw new Error(matrix);
  return matrix;
}

/** The link between GPU i and GPU j, as nvidia-smi names it. */
function link(matrix: TopoMatrix, i: number, j: number): string | undefined {
  const score = matrix.scores[matrix.gpus.indexOf(i)]?.[matrix.gpus.indexOf(j)];
  return score === undefined ? undefined : describeLink(score);
}

describe("nvidia-smi topo -m", () => {
  it("reads the recorded HGX H200: eight GPUs, every pair NV18, the NIC columns and legend ignored", () => {
    const matrix = recorded("hgx-h200-8gpu-nv18.txt");
    expect(matrix.gpus).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (let i = 0; i < 8; i++) {
      for (let j = 0; j < 8; j++) expect(link(matrix, i, j)).toBe(i === j ? undefined : "NV18");
    }
  });

  it("reads the recorded DGX-1's hybrid cube mesh: NV1, NV2 and SYS pairs", () => {
    const matrix = recorded("dgx1-v100-8gpu-nv1-nv2.txt");
    expect([link(matrix, 0, 1), link(matrix, 0, 3), link(matrix, 0, 4), link(matrix, 0, 5)]).toEqual([
      "NV1",
      "NV2",
      "NV2",
      "SYS",
    ]);
    expect(link(matrix, 7, 6)).toBe("NV2");
  });

  it("reads the recorded PCIe-only server printed with spaces: SYS across sockets, NODE within one", () => {
    const matrix = recorded("pcie-t4-4gpu.txt");
    expect([link(matrix, 0, 1), link(matrix, 1, 2), link(matrix, 2, 3)]).toEqual(["SYS", "NODE", "NODE"]);
  });

  it("orders links as nvidia-smi's legend does: NVLink (more links better) over PIX, PXB, PHB, NODE, SYS", () => {
    const order = ["NV18", "NV2", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"].map((c) => linkScore(c));
    expect([...order].sort((a, b) => Number(b) - Number(a))).toEqual(order);
    expect(linkScore("SOC")).toBe(linkScore("SYS"));
    expect(linkScore("X")).toBeUndefined();
  });

  it.each([
    ["garbage\n", /no header line/],
    ["\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \tWHAT\n", undefined],
    ["\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tNV4\t X \n", /row GPU0, column GPU1: unknown link "FOO"/],
    ["\tGPU0\tGPU1\nGPU0\t X \tNV4\n", /1 GPU rows missing/],
    ["\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tPIX\t X \n", /GPU1 and GPU0 disagree/],
    ["\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV4\t X \n", /row GPU0 has 1 cells, expected 2/],
    ["\tGPU0\tGPU1\nGPU0\tNV4\t X \nGPU1\tNV4\t X \n", /row GPU0, column GPU0: expected X/],
  ])("refuses what it cannot trust: %j", (text, problem) => {
    const parsed = parseTopoMatrix(text);
    if (problem === undefined) expect(typeof parsed).toBe("object");
    else expect(parsed).toMatch(problem);
  });

  it("maps GPU<index> to the UUIDs of the query rows, and says when a GPU is not in the matrix", () => {
    const matrix = recorded("pcie-t4-4gpu.txt");
    const row = (index: number, uuid: string) =>
      ({ index, uuid, fieldErrors: {} }) as unknown as Parameters<typeof interconnectFromTopo>[1][number];
    const links = interconnectFromTopo(matrix, [row(2, "GPU-b"), row(1, "GPU-a")]);
    if (typeof links === "string") throw new Error(links);
    expect(connectedness(links, ["GPU-a", "GPU-b"])).toEqual({ weakest: 20, total: 20 });
    expect(interconnectFromTopo(matrix, [row(4, "GPU-c")])).toBe("GPU 4 (GPU-c) is not in the matrix");
  });
});

describe("GetPreferredAllocation with a recorded interconnect", () => {
  it("PCIe-only, no NUMA known: Packed takes the NODE pair rather than the first two GPUs across sockets", () => {
    const devices = advertised(PCIE_T4, 1);
    const noNuma = new Map([...devices].map(([id, d]) => [id, { ...d, numaNode: undefined }]));
    const request = { available: [...noNuma.keys()], mustInclude: [], size: 2 };
    expect(preferredAllocation("Packed", noNuma, request)).toEqual(["gpu-0", "gpu-1"]);
    expect(preferredAllocation("Packed", noNuma, request, PCIE_T4.interconnect)).toEqual(["gpu-1", "gpu-2"]);
  });

  it("DGX-1: a GPU joins the container's GPU over NV2, on its own socket among equals (Packed)", () => {
    const devices = advertised(DGX1, 1);
    const request = { available: [...devices.keys()], mustInclude: ["gpu-0"], size: 2 };
    expect(preferredAllocation("Packed", devices, request)).toEqual(["gpu-0", "gpu-1"]);
    expect(preferredAllocation("Packed", devices, request, DGX1.interconnect)).toEqual(["gpu-0", "gpu-3"]);
    // Spread prefers the other socket among the equally connected (gpu-3 and gpu-4 are both NV2).
    expect(preferredAllocation("Spread", devices, request, DGX1.interconnect)).toEqual(["gpu-0", "gpu-4"]);
  });

  it("DGX-1, time-sliced x2: replicas map to their GPU, and four replicas on two GPUs take an NV2 pair", () => {
    const devices = advertised(DGX1, 2);
    const request = { available: [...devices.keys()], mustInclude: [], size: 4 };
    const answer = preferredAllocation("Packed", devices, request, DGX1.interconnect);
    expect(answer).toEqual(["gpu-0::0", "gpu-0::1", "gpu-3::0", "gpu-3::1"]);
  });
});

describe("NVIDIADeviceBackend interconnect", () => {
  let node: FakeGpuNode | undefined;
  let backend: NVIDIADeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    node?.remove();
    backend = node = undefined;
  });

  async function start(fake: FakeGpuNode): Promise<NVIDIADeviceBackend> {
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: fake.nvidiaSmiPath,
      devRoot: fake.devRoot,
      sysfsRoot: fake.sysfsRoot,
      timeoutSeconds: 2,
    });
    backend = new NVIDIADeviceBackend(config, { logger: silentLogger(), pollIntervalMs: 40 });
    await backend.start();
    return backend;
  }

  it("reads topo -m once the GPUs are known: every pair of the eight NV18, by UUID", async () => {
    node = fakeGpuNode("eight-gpu-two-numa", { numaNodes: EIGHT_GPU_NUMA });
    const b = await start(node);
    const ids = b.devices().map((d) => d.id);
    expect(connectedness(b.interconnect()!, ids)).toEqual({ weakest: 118, total: 118 * 28 });
    expect(b.diagnostics()).toEqual([]);
  });

  it("one GPU has no links to read; a topo -m it cannot read is a diagnostic, not a failure", async () => {
    node = fakeGpuNode("single-gpu");
    expect((await start(node)).interconnect()).toBeUndefined();
    await backend!.stop();
    node.remove();

    node = fakeGpuNode("mig-enabled");
    const b = await start(node);
    expect(b.interconnect()).toBeUndefined();
    expect(b.devices()).toHaveLength(2);
    expect(b.diagnostics()).toEqual([
      expect.stringMatching(/topo -m: no header line .*ignores the GPU interconnect/),
    ]);
  });
});
