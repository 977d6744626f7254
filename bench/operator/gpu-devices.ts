// The devices each simulated node reports: by default an 8-GPU node's, every attribute made by the NVIDIA
// backend's own function (nvidiaPhysicalDevice) from what nvidia-smi says of an H100, so a report is as
// large as a real GPU node's and grows with the backend; `BENCH_DEVICE_ATTRIBUTES=none` gives the bare
// devices the benchmark reported before (an id, no attributes).
import { nvidiaPhysicalDevice } from "../../src/plugin-runtime/backends/nvidia.js";
import type { SimulatedDevice } from "../../tools/cluster/report-fleet.js";

export const DEVICE_SHAPES = ["nvidia", "none"] as const;
export type DeviceShape = (typeof DEVICE_SHAPES)[number];

/** `value` as a device shape, or an error naming the environment variable it came from. */
export function parseDeviceShape(value: string, variable: string): DeviceShape {
  const shape = DEVICE_SHAPES.find((s) => s === value);
  if (shape === undefined)
    throw new Error(`${variable}=${value}: must be one of ${DEVICE_SHAPES.join(", ")}`);
  return shape;
}

/** A stable GPU UUID per node and index, shaped as nvidia-smi prints one (`GPU-` and 36 characters). */
function gpuUuid(nodeIndex: number, index: number): string {
  const hex = (n: number, width: number) => n.toString(16).padStart(width, "0").slice(-width);
  return `GPU-${hex(nodeIndex, 8)}-${hex(index, 4)}-4a2b-9c3d-${hex(nodeIndex * 8 + index, 12)}`;
}

/**
 * Device `index` of the node as a report carries it. For `nvidia`: the attributes of an H100 SXM, half
 * the GPUs on each of two NUMA nodes and PCIe roots, PCI addresses and minors as an 8-GPU HGX board has them, and on
 * every GPU the lastXid attribute the backend writes while an XID holds a GPU (the longest it writes),
 * so the reports are the largest the backend makes. Health stays the fleet's (healthy until flipped).
 */
export function simulatedDevice(shape: DeviceShape, nodeIndex: number, index: number): SimulatedDevice {
  if (shape === "none") return { id: `dev-${index}`, numaNode: 0, attributes: {} };
  const busIds = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"];
  const device = nvidiaPhysicalDevice({
    gpu: {
      row: {
        index,
        uuid: gpuUuid(nodeIndex, index),
        name: "NVIDIA H100 80GB HBM3",
        memoryMiB: 81559,
        migMode: "Disabled",
        busId: `0000:${busIds[index % busIds.length]}:00.0`,
        driverVersion: "550.90.07",
        pagesPendingRetirement: false,
        fieldErrors: {},
      },
      numaNode: index < 4 ? 0 : 1,
      pcieRoot: index < 4 ? "pci0000:00" : "pci0000:80",
      listed: true,
    },
    minor: index,
    cudaVersion: "12.4",
    computeCapability: "9.0",
    // An XID that held the GPU once: its code and driver text stay in the attributes.
    xid: {
      xid: 94,
      cls: "ResetRequired",
      detail: "Contained ECC error, pid=1234, name=python3, Ch 00000004",
      timestamp: 0,
      refresh: 0,
      eccAtXid: undefined,
      wentAway: false,
      resetSeen: undefined,
    },
    pollFailure: undefined,
    deviceNodesPresent: true,
  });
  return { id: device.id, numaNode: device.numaNode, attributes: device.attributes };
}
