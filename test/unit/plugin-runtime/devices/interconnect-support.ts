// Recorded interconnects for the allocation tests (test/fixtures/nvidia/topology, see its SOURCE.md), as
// the NVIDIA backend reads them, with GPUs named gpu-<index> on the NUMA node of their CPU affinity.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Sharing } from "../../../../src/api/v1beta1/spec.js";
import type { GpuRow } from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import {
  interconnectFromTopo,
  parseTopoMatrix,
} from "../../../../src/plugin-runtime/backends/nvidia-topology.js";
import type { Interconnect } from "../../../../src/plugin-runtime/devices/interconnect.js";
import { advertiseDevices, indexAdvertisedDevices } from "../../../../src/plugin-runtime/devices/sharing.js";
import type { AdvertisedDevice } from "../../../../src/plugin-runtime/devices/types.js";
import { NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";

export interface Topology {
  readonly name: string;
  readonly interconnect: Interconnect;
  /** GPU id by index (`gpu-3`), with its NUMA node. */
  readonly gpus: readonly { id: string; numaNode: number }[];
}

export function row(index: number): GpuRow {
  return {
    index,
    uuid: `gpu-${index}`,
    name: "",
    memoryMiB: undefined,
    migMode: undefined,
    busId: "",
    driverVersion: "",
    pagesPendingRetirement: undefined,
    fieldErrors: {},
  };
}

/** A recorded topology, with each GPU's NUMA node as the recording's CPU affinity gives it. */
export function recordedTopology(file: string, numa: readonly number[]): Topology {
  const matrix = parseTopoMatrix(readFileSync(join(NVIDIA_FIXTURES, "topology", file), "utf8"));
  if (typeof matrix === "string") throw new Error(`${file}: ${matrix}`);
  const interconnect = interconnectFromTopo(matrix, matrix.gpus.map(row));
  if (typeof interconnect === "string") throw new Error(`${file}: ${interconnect}`);
  return {
    name: file,
    interconnect,
    gpus: matrix.gpus.map((index) => ({ id: `gpu-${index}`, numaNode: numa[index] ?? 0 })),
  };
}

export const HGX_H200 = recordedTopology("hgx-h200-8gpu-nv18.txt", [0, 0, 0, 0, 1, 1, 1, 1]);
export const DGX1 = recordedTopology("dgx1-v100-8gpu-nv1-nv2.txt", [0, 0, 0, 0, 1, 1, 1, 1]);
export const PCIE_T4 = recordedTopology("pcie-t4-4gpu.txt", [0, 1, 1, 1]);

export function advertised(topology: Topology, replicas: number): Map<string, AdvertisedDevice> {
  const sharing: Sharing =
    replicas === 1
      ? { strategy: "None", failRequestsGreaterThanOne: false }
      : { strategy: "TimeSlicing", replicas, failRequestsGreaterThanOne: false };
  return indexAdvertisedDevices(
    advertiseDevices(
      topology.gpus.map((g) => ({
        id: g.id,
        numaNode: g.numaNode,
        health: "Healthy",
        reason: "",
        attributes: {},
      })),
      sharing,
    ),
  );
}
