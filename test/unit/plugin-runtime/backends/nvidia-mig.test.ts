// The MIG plan (what strategy Single and Mixed offer, and the layouts Single refuses with NVIDIA's
// reasons), a MIG device's health and attributes, and its capability nodes: pure, over GPUs whose MIG
// devices are the recorded H100 layouts (test/fixtures/nvidia/h100-mig-*/).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  REASON_MIG_CAPABILITY_NODE_MISSING,
  REASON_MIG_CAPABILITY_UNKNOWN,
  REASON_MIG_MODE_MIXED,
  REASON_MIG_NO_DEVICES,
  REASON_MIG_PLACEMENT_UNKNOWN,
  REASON_MIG_PROFILES_MIXED,
  joinMigDevices,
  migCapabilityNodes,
  migPhysicalDevice,
  planMig,
  type MigParent,
} from "../../../../src/plugin-runtime/backends/nvidia-mig.js";
import {
  parseGpuList,
  parseMigMinors,
  parseMigXml,
  type XmlMigDevice,
} from "../../../../src/plugin-runtime/backends/nvidia-mig-smi.js";
import { NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";

const fixture = (path: string) => readFileSync(join(NVIDIA_FIXTURES, path), "utf8");

/** The recorded H100 in one of its layouts, as GPU `index` (the listing has one GPU). */
function h100(layout: "single" | "mixed", index = 0, over: Partial<MigParent> = {}): MigParent {
  const listed = parseGpuList(fixture(`h100-mig-${layout}/list.txt`)).gpus;
  const report = parseMigXml(fixture(`h100-mig-${layout}/query.xml`)) as Map<string, XmlMigDevice[]>;
  const gpu = listed[0]!;
  const devices = joinMigDevices(listed, report).get(gpu.uuid) ?? [];
  return {
    uuid: index === 0 ? gpu.uuid : `${gpu.uuid.slice(0, -1)}${index}`,
    index,
    name: gpu.name,
    busId: "0000:18:00.0",
    driverVersion: "550.54.15",
    migEnabled: true,
    numaNode: 0,
    minor: index,
    reason: "",
    migDevices: index === 0 ? devices : devices.map((d) => ({ ...d, uuid: `${d.uuid}-${index}` })),
    ...over,
  };
}

const wholeGpu = (index: number): MigParent => ({
  ...h100("single", index),
  migEnabled: false,
  migDevices: [],
});
const profiles = (plan: ReturnType<typeof planMig>) => plan.migDevices.map((m) => m.device.profile);

describe("planMig", () => {
  it("Single: every MIG device of a uniform node, no whole GPU, no problem", () => {
    const plan = planMig("Single", undefined, [h100("single", 0), h100("single", 1)]);
    expect(plan.layoutProblem).toBeUndefined();
    expect(plan.wholeGpus).toEqual([]);
    expect(plan.migDevices).toHaveLength(14);
  });

  it("Single with MIG off everywhere offers the whole GPUs, as NVIDIA's plugin does", () => {
    const plan = planMig("Single", undefined, [wholeGpu(0), wholeGpu(1)]);
    expect(plan).toMatchObject({ layoutProblem: undefined, migDevices: [] });
    expect(plan.wholeGpus.map((g) => g.index)).toEqual([0, 1]);
  });

  it.each([
    {
      what: "MIG on for one GPU and off for another",
      gpus: () => [h100("single", 0), wholeGpu(1)],
      reason: REASON_MIG_MODE_MIXED,
      message: "MIG is on for GPU 0 and off for GPU 1; strategy Single needs MIG on every GPU of the node",
      whole: [1],
    },
    {
      what: "MIG on with no MIG device",
      gpus: () => [h100("single", 0), h100("single", 1, { migDevices: [] })],
      reason: REASON_MIG_NO_DEVICES,
      message:
        "MIG is on but no MIG device is configured on GPU 1; strategy Single needs at least one on each",
      whole: [1],
    },
    {
      what: "the recorded balanced layout (three profiles)",
      gpus: () => [h100("mixed", 0)],
      reason: REASON_MIG_PROFILES_MIXED,
      message: "more than one MIG profile on the node (1g.10gb, 2g.20gb, 3g.40gb); strategy Single needs one",
      whole: [],
    },
    {
      what: "two GPUs each uniform but with different profiles",
      gpus: () => [
        h100("single", 0),
        h100("mixed", 1, { migDevices: h100("mixed").migDevices.filter((d) => d.profile === "3g.40gb") }),
      ],
      reason: REASON_MIG_PROFILES_MIXED,
      message: "more than one MIG profile on the node (1g.10gb, 3g.40gb); strategy Single needs one",
      whole: [],
    },
  ])("Single refuses $what with $reason, still listing every device", ({ gpus, reason, message, whole }) => {
    const plan = planMig("Single", undefined, gpus());
    expect(plan.layoutProblem).toEqual({ reason, message });
    expect(plan.wholeGpus.map((g) => g.index)).toEqual(whole);
    expect(plan.migDevices.length).toBeGreaterThan(0);
  });

  it("Mixed with a profile offers that profile's MIG devices of every GPU, never a whole GPU", () => {
    const gpus = [h100("mixed", 0), h100("single", 1), wholeGpu(2)];
    const small = planMig("Mixed", "1g.10gb", gpus);
    expect(small.layoutProblem).toBeUndefined();
    expect(small.wholeGpus).toEqual([]);
    expect(small.migDevices.map((m) => `${m.parent.index}:${m.device.index}`)).toEqual([
      "0:2",
      "0:3",
      ...[0, 1, 2, 3, 4, 5, 6].map((i) => `1:${i}`),
    ]);
    expect(profiles(planMig("Mixed", "3g.40gb", gpus))).toEqual(["3g.40gb"]);
    expect(planMig("Mixed", "7g.80gb", gpus).migDevices).toEqual([]);
  });

  it("Mixed without a profile offers the GPUs with MIG off only", () => {
    const plan = planMig("Mixed", undefined, [h100("mixed", 0), wholeGpu(1)]);
    expect(plan.wholeGpus.map((g) => g.index)).toEqual([1]);
    expect(plan.migDevices).toEqual([]);
    expect(plan.layoutProblem).toBeUndefined();
  });
});

describe("a MIG device", () => {
  const caps = parseMigMinors(fixture("h100-mig-mixed/mig-minors"));
  const all = new Set(["nvidia-caps/nvidia-cap21", "nvidia-caps/nvidia-cap22"]);
  const parent = h100("mixed");
  const big = parent.migDevices[0]!;

  it("is reported under its MIG UUID with its profile, parent, instances and memory", () => {
    expect(migPhysicalDevice(parent, big, undefined, { caps, presentNodes: all }, "12.4")).toEqual({
      id: "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
      numaNode: 0,
      health: "Healthy",
      reason: "",
      attributes: {
        model: "NVIDIA H100 80GB HBM3",
        profile: "3g.40gb",
        index: "0:0",
        parentUUID: "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4",
        parentIndex: "0",
        pciBusId: "0000:18:00.0",
        driverVersion: "550.54.15",
        gpuInstanceId: "2",
        computeInstanceId: "0",
        memoryMiB: "40320",
        minor: "0",
        cudaVersion: "12.4",
      },
    });
  });

  it.each([
    ["its GPU's reason first", { ...parent, reason: "XID79" }, big, all, "XID79"],
    ["the layout's reason next", parent, big, all, REASON_MIG_PROFILES_MIXED],
    ["unknown instances", parent, { ...big, gpuInstance: undefined }, all, REASON_MIG_PLACEMENT_UNKNOWN],
    [
      "instances mig-minors does not name",
      parent,
      { ...big, gpuInstance: 5 },
      all,
      REASON_MIG_CAPABILITY_UNKNOWN,
    ],
    [
      "a capability node missing",
      parent,
      big,
      new Set(["nvidia-caps/nvidia-cap21"]),
      REASON_MIG_CAPABILITY_NODE_MISSING,
    ],
  ])("is unhealthy for %s", (_what, p, device, present, reason) => {
    const layout =
      reason === REASON_MIG_PROFILES_MIXED ? { reason, message: "more than one MIG profile" } : undefined;
    expect(migPhysicalDevice(p, device, layout, { caps, presentNodes: present }, undefined)).toMatchObject({
      health: "Unhealthy",
      reason,
    });
  });

  it("needs its GPU instance's and compute instance's capability nodes, by the GPU's minor", () => {
    expect(migCapabilityNodes(0, big, caps)).toEqual([
      "nvidia-caps/nvidia-cap21",
      "nvidia-caps/nvidia-cap22",
    ]);
    expect(migCapabilityNodes(1, big, caps)).toBe(REASON_MIG_CAPABILITY_UNKNOWN);
    expect(migCapabilityNodes(undefined, big, caps)).toBe(REASON_MIG_CAPABILITY_UNKNOWN);
  });
});
