// The recorded H100 report the node-label tests publish is what the NVIDIA backend reports for the
// eight-GPU scenario it was built from (test/fixtures/nvidia/reports/SOURCE.md), device by device.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { DeviceNodeStateStatus } from "../../../../src/api/v1beta1/devicenodestate.js";
import { DeviceNodeStateStatusSchema } from "../../../../src/api/v1beta1/devicenodestate.js";
import { nvidiaPhysicalDevice } from "../../../../src/plugin-runtime/backends/nvidia.js";
import {
  parseComputeCaps,
  parseGpuQuery,
  parseNvidiaSmiXml,
} from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import { EIGHT_GPU_NUMA, NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";

it("eight-h100.json lists the devices the NVIDIA backend builds from eight-gpu-two-numa", () => {
  const report = JSON.parse(
    readFileSync(join(NVIDIA_FIXTURES, "reports", "eight-h100.json"), "utf8"),
  ) as DeviceNodeStateStatus;
  expect(DeviceNodeStateStatusSchema.safeParse(report).success).toBe(true);
  const dir = join(NVIDIA_FIXTURES, "eight-gpu-two-numa");
  const { rows } = parseGpuQuery(readFileSync(join(dir, "query-gpu.csv"), "utf8"));
  const xml = parseNvidiaSmiXml(readFileSync(join(dir, "query.xml"), "utf8"));
  if (typeof xml === "string") throw new Error(xml);
  const caps = parseComputeCaps(readFileSync(join(dir, "compute-cap.csv"), "utf8"));
  const built = rows.map((row) =>
    nvidiaPhysicalDevice({
      gpu: { row, numaNode: EIGHT_GPU_NUMA[row.busId], listed: true },
      minor: xml.minorNumbers.get(row.uuid),
      cudaVersion: xml.cudaVersion,
      xid: undefined,
      pollFailure: undefined,
      deviceNodesPresent: true,
      computeCapability: caps.get(row.uuid),
    }),
  );
  expect(
    report.devices.map((d) => ({
      id: d.id,
      health: d.health,
      numaNode: d.numaNode,
      attributes: d.attributes,
    })),
  ).toEqual(
    built.map((d) => ({ id: d.id, health: d.health, numaNode: d.numaNode, attributes: d.attributes })),
  );
});
