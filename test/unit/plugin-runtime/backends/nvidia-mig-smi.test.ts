// The MIG parsers against recorded nvidia-smi output (test/fixtures/nvidia/*/SOURCE.md says where each
// file comes from): `-L` of an H100 and of A100s (the old MIG UUID form included), the `-q -x` MIG section
// and mig-minors.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  computeInstanceCap,
  gpuInstanceCap,
  parseGpuList,
  parseMigMinors,
  parseMigXml,
} from "../../../../src/plugin-runtime/backends/nvidia-mig-smi.js";
import { parseXidEvents } from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import { migXidKey, xidGpu } from "../../../../src/plugin-runtime/backends/nvidia-mig.js";
import { NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";

const fixture = (path: string) => readFileSync(join(NVIDIA_FIXTURES, path), "utf8");
const H100 = "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4";

describe("nvidia-smi -L", () => {
  it("reads an H100's seven 1g.10gb MIG devices with their UUIDs and indexes", () => {
    const { gpus, problems } = parseGpuList(fixture("h100-mig-single/list.txt"));
    expect(problems).toEqual([]);
    expect(gpus).toHaveLength(1);
    expect(gpus[0]).toMatchObject({ index: 0, name: "NVIDIA H100 80GB HBM3", uuid: H100 });
    expect(gpus[0]!.migDevices.map((d) => [d.index, d.profile])).toEqual(
      [0, 1, 2, 3, 4, 5, 6].map((i) => [i, "1g.10gb"]),
    );
    expect(gpus[0]!.migDevices[0]).toEqual({
      profile: "1g.10gb",
      index: 0,
      uuid: "MIG-3f6f389f-b0cc-5e5c-8e32-eaa8fd067902",
      gpuInstance: undefined,
      computeInstance: undefined,
    });
  });

  it("reads the balanced layout of the same H100 and an A100 80GB's two 3g.40gb", () => {
    const mixed = parseGpuList(fixture("h100-mig-mixed/list.txt"));
    expect(mixed.gpus[0]!.migDevices.map((d) => d.profile)).toEqual([
      "3g.40gb",
      "2g.20gb",
      "1g.10gb",
      "1g.10gb",
    ]);
    const a100 = parseGpuList(fixture("mig-parsing/a100-80gb-pcie-list.txt"));
    expect(a100.problems).toEqual([]);
    expect(a100.gpus[0]).toMatchObject({ name: "NVIDIA A100 80GB PCIe" });
    expect(a100.gpus[0]!.migDevices.map((d) => d.uuid)).toEqual([
      "MIG-0929581a-2be6-5dec-bf34-0954c6c529a6",
      "MIG-3adbed3a-d03d-549f-a016-ba1fd7359f23",
    ]);
  });

  it("takes the GPU and compute instance from an old driver's MIG-GPU-<uuid>/<gi>/<ci> UUIDs", () => {
    const { gpus, problems } = parseGpuList(fixture("mig-parsing/a100-legacy-mixed-list.txt"));
    expect(problems).toEqual([]);
    expect(gpus[0]!.migDevices.map((d) => [d.profile, d.index, d.gpuInstance, d.computeInstance])).toEqual([
      ["3g.20gb", 0, 2, 0],
      ["2g.10gb", 1, 3, 0],
      ["1g.5gb", 2, 9, 0],
    ]);
    expect(parseGpuList(fixture("mig-parsing/a100-legacy-uuids-list.txt")).gpus[0]!.migDevices).toHaveLength(
      7,
    );
  });

  it("lists a GPU without MIG devices, and names lines it does not understand", () => {
    const parsed = parseGpuList(
      [
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4)",
        "No devices were found",
        "  MIG 1g.10gb     Device  0: (UUID: MIG-3f6f389f-b0cc-5e5c-8e32-eaa8fd067902)",
      ].join("\n"),
    );
    expect(parsed.gpus.map((g) => g.migDevices.length)).toEqual([1]);
    expect(parsed.problems).toEqual([
      expect.stringMatching(/^line 2: neither a GPU nor a MIG device: "No devices/),
    ]);
    expect(
      parseGpuList("  MIG 1g.10gb     Device  0: (UUID: MIG-3f6f389f-b0cc-5e5c-8e32-eaa8fd067902)").problems,
    ).toEqual([expect.stringMatching(/^line 1: a MIG device before any GPU/)]);
  });
});

describe("the MIG section of nvidia-smi -q -x", () => {
  it("gives each MIG device's GPU instance, compute instance and memory, keyed by GPU UUID", () => {
    const report = parseMigXml(fixture("h100-mig-mixed/query.xml"));
    expect(report).toBeInstanceOf(Map);
    expect((report as Map<string, unknown>).get(H100)).toEqual([
      { index: 0, gpuInstance: 2, computeInstance: 0, memoryMiB: 40320 },
      { index: 1, gpuInstance: 3, computeInstance: 0, memoryMiB: 20096 },
      { index: 2, gpuInstance: 9, computeInstance: 0, memoryMiB: 9984 },
      { index: 3, gpuInstance: 10, computeInstance: 0, memoryMiB: 9984 },
    ]);
  });

  it("maps a GPU without MIG devices to none, and refuses what is not the report", () => {
    const report = parseMigXml(fixture("eight-gpu-two-numa/query.xml"));
    expect([...(report as Map<string, unknown[]>).values()].every((d) => d.length === 0)).toBe(true);
    expect((report as Map<string, unknown>).size).toBe(8);
    expect(parseMigXml("<html/>")).toBe("no <nvidia_smi_log> element");
  });
});

describe("mig-minors", () => {
  it("maps each capability to the minor of its /dev/nvidia-caps node, skipping lines it does not know", () => {
    const caps = parseMigMinors(`${fixture("h100-mig-mixed/mig-minors")}nonsense\ngpu0/gi1/access x\n`);
    expect(caps.get("config")).toBe(1);
    expect(caps.get("monitor")).toBe(2);
    expect(caps.get(gpuInstanceCap(0, 9))).toBe(84);
    expect(caps.get(computeInstanceCap(0, 9, 0))).toBe(85);
    expect(caps.size).toBe(10);
    // The lines NVIDIA's container toolkit tests its own parser with.
    expect(parseMigMinors("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n")).toEqual(
      new Map([
        ["config", 1],
        ["monitor", 2],
        ["gpu0/gi0/access", 3],
        ["gpu0/gi0/ci0/access", 4],
      ]),
    );
  });
});

describe("XIDs on a MIG GPU", () => {
  it("reads the instances the driver attributes an XID to, in NVIDIA's documented form, and keys them", () => {
    // The first two lines as NVIDIA's A100 memory error management guide prints them
    // (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/); the third with a compute instance too, the
    // form the open GPU kernel modules print (`PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u`).
    const events = parseXidEvents(
      [
        "[ 100.5] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
        "[ 101.5] NVRM: Xid (PCI:0000:01:00): 94, pid=7062, Contained: CE User Channel (0x9). RST: No, D-RST: No",
        "[ 102.5] NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:01): 13, pid=9, name=a, Graphics Exception",
      ].join("\n"),
    );
    expect(events.map((e) => [e.pciDevice, e.xid, e.gpuInstance, e.computeInstance])).toEqual([
      ["0000:01:00", 94, 5, undefined],
      ["0000:01:00", 94, undefined, undefined],
      ["0000:01:00", 13, 5, 1],
    ]);
    expect(events.map((e) => migXidKey(H100, e))).toEqual([`${H100}/gi5`, H100, `${H100}/gi5/ci1`]);
    expect(xidGpu(`${H100}/gi5/ci1`)).toBe(H100);
  });
});
