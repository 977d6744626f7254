// The NVIDIA backend with MIG strategies Single and Mixed against a fake nvidia-smi replaying the recorded
// H100 layouts: the devices and names each strategy offers, Allocate and the CDI edits as NVIDIA's
// container toolkit expects them, the DRA view, a parent GPU's XID, and a layout change under a running
// plugin.
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema, type NVIDIABackend } from "../../../../src/api/v1beta1/spec.js";
import { UnknownDevicesError } from "../../../../src/plugin-runtime/backends/device-list.js";
import { NVIDIADeviceBackend } from "../../../../src/plugin-runtime/backends/nvidia.js";
import {
  REASON_MIG_CAPABILITY_NODE_MISSING,
  REASON_MIG_PROFILES_MIXED,
} from "../../../../src/plugin-runtime/backends/nvidia-mig.js";
import { allocationEdits, draDevicesOf, draPoolDevices } from "../../../../src/plugin-runtime/dra/devices.js";
import {
  fakeGpuNode,
  type FakeGpuNode,
  type FakeGpuNodeOptions,
} from "../../../fixtures/nvidia/fake-node.js";
import type { Logger } from "pino";
import { byId, captureLogs, silentLogger, waitForDevices } from "./backend-wait.js";

const H100 = "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4";
/** Devices 2 and 3 of both recorded layouts: the same two 1g.10gb instances kept across the change. */
const KEPT = ["MIG-9d14fb21-4ae1-546f-a636-011582899c39", "MIG-0f709664-740c-52b0-ae79-3e4c9ede6d3b"];
const FIRST = "MIG-3f6f389f-b0cc-5e5c-8e32-eaa8fd067902";
const BIG = "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde";

let node: FakeGpuNode | undefined;
let backend: NVIDIADeviceBackend | undefined;
afterEach(async () => {
  await backend?.stop();
  node?.remove();
  backend = undefined;
  node = undefined;
});

async function start(
  scenario: "h100-mig-single" | "h100-mig-mixed",
  mig: NVIDIABackend["mig"],
  options: FakeGpuNodeOptions & { readonly dmesg?: boolean; readonly logger?: Logger } = {},
): Promise<ReturnType<NVIDIADeviceBackend["devices"]>> {
  node = fakeGpuNode(scenario, { numaNodes: { "0000:18:00.0": 1 }, ...options });
  const config = NVIDIABackendSchema.parse({
    nvidiaSmiPath: node.nvidiaSmiPath,
    devRoot: node.devRoot,
    sysfsRoot: node.sysfsRoot,
    timeoutSeconds: 2,
    mig,
    ...(options.dmesg === true ? { dmesgPath: node.dmesgPath } : {}),
  });
  backend = new NVIDIADeviceBackend(config, {
    logger: options.logger ?? silentLogger(),
    pollIntervalMs: 40,
    migMinorsPath: node.migMinorsPath,
  });
  return backend.start();
}

const dev = (name: string) => ({
  containerPath: `/dev/${name}`,
  hostPath: `${node!.devRoot}/${name}`,
  permissions: "rw",
});

describe("MIG strategy Single", () => {
  it("offers the seven 1g.10gb MIG devices of the recorded H100 under their MIG UUIDs, healthy", async () => {
    const devices = await start("h100-mig-single", { strategy: "Single" });
    expect(
      devices.map((d) => [d.id.startsWith("MIG-"), d.health, d.attributes.profile, d.attributes.index]),
    ).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => [true, "Healthy", "1g.10gb", `0:${i}`]));
    expect(byId(devices, FIRST)).toMatchObject({
      numaNode: 1,
      attributes: {
        parentUUID: H100,
        gpuInstanceId: "7",
        computeInstanceId: "0",
        memoryMiB: "9984",
        minor: "0",
      },
    });
    expect(byId(devices, H100)).toBeUndefined();
    expect(backend!.diagnostics()).toEqual([]);
  });

  it("Allocate gives the MIG UUIDs in NVIDIA_VISIBLE_DEVICES, the GPU's node and both capability nodes", async () => {
    await start("h100-mig-single", { strategy: "Single" });
    // Device 0 is GPU instance 7 (mig-minors: gpu0/gi7/access 66, gpu0/gi7/ci0/access 67), device 1 is 8.
    const second = backend!.devices()[1]!.id;
    expect(backend!.allocate([FIRST, second])).toEqual({
      envs: { NVIDIA_VISIBLE_DEVICES: `${FIRST},${second}` },
      mounts: [],
      devices: [
        dev("nvidia0"),
        dev("nvidia-caps/nvidia-cap66"),
        dev("nvidia-caps/nvidia-cap67"),
        dev("nvidia-caps/nvidia-cap75"),
        dev("nvidia-caps/nvidia-cap76"),
        dev("nvidiactl"),
        dev("nvidia-uvm"),
        dev("nvidia-uvm-tools"),
      ],
      annotations: {},
    });
    expect(backend!.cdiContainerEdits(FIRST)?.deviceNodes?.map((n) => n.path)).toEqual([
      "/dev/nvidia0",
      "/dev/nvidia-caps/nvidia-cap66",
      "/dev/nvidia-caps/nvidia-cap67",
      "/dev/nvidiactl",
      "/dev/nvidia-uvm",
      "/dev/nvidia-uvm-tools",
    ]);
    expect(() => backend!.allocate([H100])).toThrow(UnknownDevicesError);
  });

  it("in DRA mode the slice's devices carry profile, parent and memory, and a claim gets the same as Allocate", async () => {
    const devices = await start("h100-mig-single", { strategy: "Single" });
    const dra = draDevicesOf(backend!);
    expect(dra).toHaveLength(7);
    expect(dra[0]!.physicalId).toBe(FIRST);
    expect(dra[0]!.containerEdits.deviceNodes?.map((n) => n.path)).toContain("/dev/nvidia-caps/nvidia-cap67");
    const pool = draPoolDevices(devices);
    expect(pool[0]!.attributes).toMatchObject({
      profile: { string: "1g.10gb" },
      parentUUID: { string: H100 },
      parentIndex: { int: 0 },
      gpuInstanceId: { int: 7 },
      memoryMiB: { int: 9984 },
      numaNode: { int: 1 },
    });
    const edits = allocationEdits(backend!.allocate([FIRST]), "nvidia.com/gpu", [FIRST]);
    expect(edits.env).toContain(`NVIDIA_VISIBLE_DEVICES=${FIRST}`);
  });

  it("the recorded balanced layout (three profiles) is reported as NVIDIA's plugin does: every device unhealthy, why in diagnostics", async () => {
    const devices = await start("h100-mig-mixed", { strategy: "Single" });
    expect(devices.map((d) => [d.attributes.profile, d.health, d.reason])).toEqual([
      ["3g.40gb", "Unhealthy", REASON_MIG_PROFILES_MIXED],
      ["2g.20gb", "Unhealthy", REASON_MIG_PROFILES_MIXED],
      ["1g.10gb", "Unhealthy", REASON_MIG_PROFILES_MIXED],
      ["1g.10gb", "Unhealthy", REASON_MIG_PROFILES_MIXED],
    ]);
    expect(backend!.diagnostics()).toEqual([
      "mig.strategy Single: more than one MIG profile on the node (1g.10gb, 2g.20gb, 3g.40gb); strategy Single needs one",
    ]);
  });

  it("a MIG device whose capability node is missing is unhealthy, and Allocate leaves the node out", async () => {
    const devices = await start("h100-mig-single", { strategy: "Single" }, { capMinors: [66, 75, 76] });
    expect(byId(devices, FIRST)).toMatchObject({
      health: "Unhealthy",
      reason: REASON_MIG_CAPABILITY_NODE_MISSING,
    });
    expect(devices[1]!.health).toBe("Healthy");
    expect(backend!.allocate([FIRST]).devices.map((d) => d.containerPath)).not.toContain(
      "/dev/nvidia-caps/nvidia-cap67",
    );
  });
});

describe("MIG strategy Mixed", () => {
  it("a config per profile: 1g.10gb gets the two small devices, 3g.40gb the big one, no profile no device", async () => {
    const small = await start("h100-mig-mixed", { strategy: "Mixed", profile: "1g.10gb" });
    expect(small.map((d) => [d.id, d.health, d.attributes.index])).toEqual([
      [KEPT[0], "Healthy", "0:2"],
      [KEPT[1], "Healthy", "0:3"],
    ]);
    await backend!.stop();
    node!.remove();
    const big = await start("h100-mig-mixed", { strategy: "Mixed", profile: "3g.40gb" });
    expect(big.map((d) => [d.id, d.attributes.memoryMiB])).toEqual([[BIG, "40320"]]);
    expect(backend!.allocate([BIG]).devices.map((d) => d.containerPath)).toEqual([
      "/dev/nvidia0",
      "/dev/nvidia-caps/nvidia-cap21",
      "/dev/nvidia-caps/nvidia-cap22",
      "/dev/nvidiactl",
      "/dev/nvidia-uvm",
      "/dev/nvidia-uvm-tools",
    ]);
    await backend!.stop();
    node!.remove();
    expect(await start("h100-mig-mixed", { strategy: "Mixed" })).toEqual([]);
  });

  it("a layout change under the running plugin is read again: devices go and come through the device list", async () => {
    const before = await start("h100-mig-single", { strategy: "Mixed", profile: "1g.10gb" });
    expect(before).toHaveLength(7);
    node!.play("h100-mig-mixed");
    const after = await waitForDevices(backend!, (d) => d.length === 2, "the balanced layout's two 1g.10gb");
    expect(after.devices.map((d) => [d.id, d.attributes.gpuInstanceId])).toEqual([
      [KEPT[0], "9"],
      [KEPT[1], "10"],
    ]);
    expect(() => backend!.allocate([FIRST])).toThrow(UnknownDevicesError);
    expect(backend!.allocate([KEPT[0]!]).devices.map((d) => d.containerPath)).toContain(
      "/dev/nvidia-caps/nvidia-cap85",
    );
    node!.play("h100-mig-single");
    await waitForDevices(backend!, (d) => d.length === 7, "the seven 1g.10gb again");
    expect(backend!.diagnostics()).toEqual([]);
  });

  it("an XID of the parent GPU makes its MIG devices unhealthy; nvidia-smi -L failing keeps the last layout", async () => {
    const logs = captureLogs();
    const devices = await start(
      "h100-mig-mixed",
      { strategy: "Mixed", profile: "1g.10gb" },
      { dmesg: true, logger: logs.logger },
    );
    expect(devices.every((d) => d.health === "Healthy")).toBe(true);
    // The first read of the (empty) kernel log only learned where "now" is; this line is news.
    node!.write(
      "dmesg.txt",
      "[ 9.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n",
    );
    const seen = await waitForDevices(
      backend!,
      (d) => d.every((x) => x.reason === "XID79-ResetRequired"),
      "XID 79 on both",
    );
    expect(seen.devices.map((d) => d.id)).toEqual(KEPT);

    node!.write("list.txt", "garbage\n");
    await logs.waitFor(
      (l) => l.source === "mig" && String(l.problem).startsWith("nvidia-smi -L output not understood"),
      "the -L problem",
    );
    expect(backend!.devices().map((d) => d.id)).toEqual(KEPT);
  });

  it("an XID the driver attributes to a GPU instance holds only that instance's MIG device, until the reset is seen", async () => {
    await start("h100-mig-mixed", { strategy: "Mixed", profile: "1g.10gb" }, { dmesg: true });
    // NVIDIA's documented MIG form of the line (`NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...`), for this
    // fixture's bus and the GPU instance 9 of its first 1g.10gb device.
    node!.write(
      "dmesg.txt",
      "[ 9.000000] NVRM: Xid (PCI:0000:18:00 GPU-I:09): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n",
    );
    const seen = await waitForDevices(
      backend!,
      (d) => byId(d, KEPT[0]!)?.reason === "XID94-ResetRequired",
      "XID 94 in GI 9",
    );
    expect(byId(seen.devices, KEPT[1]!)).toMatchObject({ health: "Healthy", reason: "" });
    // XID 94 waits for a reset (nvidia-health.ts): the driver loading again is one.
    node!.write(
      "dmesg.txt",
      "[ 9.000000] NVRM: Xid (PCI:0000:18:00 GPU-I:09): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n" +
        "[ 60.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n",
    );
    await waitForDevices(backend!, (d) => d.every((x) => x.health === "Healthy"), "the recovery");
  });
});
