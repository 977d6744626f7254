// NVIDIA backend: nvidia-smi and dmesg output parsed (table-driven), then the backend against a fake
// nvidia-smi replaying recorded output: one GPU, eight over two NUMA nodes, MIG, an XID and the recovery,
// the driver missing, nvidia-smi absent, hanging or printing garbage.
import { afterEach, describe, expect, it } from "vitest";
import { NVIDIABackendSchema, type NVIDIABackend } from "../../../../src/api/v1beta1/spec.js";
import { UnknownDevicesError } from "../../../../src/plugin-runtime/backends/device-list.js";
import {
  NVIDIADeviceBackend,
  newXidEvents,
  REASON_DRIVER_UNAVAILABLE,
  REASON_GPU_LOST,
  REASON_MIG_ENABLED,
  REASON_NVIDIA_SMI_MISSING,
  REASON_NVIDIA_SMI_OUTPUT_INVALID,
  REASON_NVIDIA_SMI_TIMEOUT,
  REASON_DEVICE_NODE_MISSING,
} from "../../../../src/plugin-runtime/backends/nvidia.js";
import {
  normalizeBusId,
  parseGpuQuery,
  parseGpuRow,
  parseNvidiaSmiXml,
  parseXidEvents,
} from "../../../../src/plugin-runtime/backends/nvidia-smi.js";
import { EIGHT_GPU_NUMA, fakeGpuNode, type FakeGpuNode } from "../../../fixtures/nvidia/fake-node.js";
import { byId, captureLogs, silentLogger, summarize, waitForDevices } from "./backend-wait.js";

const SINGLE = "GPU-4d3c2f8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f";
const V100_0 = "GPU-c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f";
const V100_1 = "GPU-d4e5f6a7-b8c9-4dae-9f10-2b3c4d5e6f70";

describe("nvidia-smi output parsing", () => {
  it.each([
    ["00000000:3B:00.0", "0000:3b:00.0"],
    ["0000:3b:00.0", "0000:3b:00.0"],
    ["00000001:3B:00.0", "0001:3b:00.0"],
    ["10000000:3B:00.0", undefined],
    ["3B:00.0", undefined],
    ["[Unknown Error]", undefined],
  ])("normalizeBusId(%j) = %j", (text, want) => {
    expect(normalizeBusId(text)).toBe(want);
  });

  it("reads a row, with [N/A] as not supported and bracketed errors as field errors", () => {
    expect(
      parseGpuRow(
        `0, ${SINGLE}, NVIDIA A100 80GB PCIe, 81920, [N/A], 00000000:3B:00.0, 550.127.05, [GPU requires reset]`,
      ),
    ).toEqual({
      index: 0,
      uuid: SINGLE,
      name: "NVIDIA A100 80GB PCIe",
      memoryMiB: 81920,
      migMode: undefined,
      busId: "0000:3b:00.0",
      driverVersion: "550.127.05",
      pagesPendingRetirement: undefined,
      fieldErrors: { "retired_pages.pending": "[GPU requires reset]" },
    });
  });

  it.each([
    ["0, GPU-x, A100", /expected 8 comma-separated fields/],
    [`x, ${SINGLE}, A100, 1, Disabled, 00000000:3B:00.0, 550, No`, /index "x" is not a number/],
    ["0, not-a-uuid, A100, 1, Disabled, 00000000:3B:00.0, 550, No", /uuid "not-a-uuid"/],
    [`0, ${SINGLE}, A100, 1, Disabled, 3B:00, 550, No`, /pci.bus_id "3B:00"/],
    [`0, ${SINGLE}, A100, 80 GiB, Disabled, 00000000:3B:00.0, 550, No`, /memory.total "80 GiB"/],
    [`0, ${SINGLE}, A100, 1, Maybe, 00000000:3B:00.0, 550, No`, /mig.mode.current "Maybe"/],
  ])("refuses %j", (line, problem) => {
    expect(parseGpuRow(line)).toMatch(problem);
  });

  it("takes 'Unable to determine the device handle' lines as unreachable GPUs, and anything else as a problem", () => {
    const parsed = parseGpuQuery(
      [
        `0, ${SINGLE}, NVIDIA A100 80GB PCIe, 81920, Disabled, 00000000:3B:00.0, 550.127.05, No`,
        "Unable to determine the device handle for GPU0000:86:00.0: Unknown Error",
        "",
        "some banner",
      ].join("\n"),
    );
    expect(parsed.rows.map((r) => r.uuid)).toEqual([SINGLE]);
    expect(parsed.unreachable).toEqual(["0000:86:00.0"]);
    expect(parsed.problems).toEqual([expect.stringMatching(/^line 4: expected 8 .*"some banner"$/)]);
  });

  it("reads the CUDA version and minor numbers from -q -x, and refuses what is not its XML", () => {
    const xml = `<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>550.90.07</driver_version>\n<cuda_version>12.4</cuda_version>\n<gpu id="00000000:18:00.0">\n<uuid>GPU-a</uuid>\n<minor_number>3</minor_number>\n</gpu>\n<gpu id="00000000:2A:00.0">\n<uuid>GPU-b</uuid>\n<minor_number>N/A</minor_number>\n</gpu>\n</nvidia_smi_log>\n`;
    expect(parseNvidiaSmiXml(xml)).toEqual({ cudaVersion: "12.4", minorNumbers: new Map([["GPU-a", 3]]) });
    expect(parseNvidiaSmiXml("<html/>")).toBe("no <nvidia_smi_log> element");
  });

  it("finds NVRM Xid lines in dmesg and knows which are new", () => {
    const events = parseXidEvents(
      [
        "[   12.912345] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01",
        "[ 5121.771002] NVRM: Xid (PCI:0000:af:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
        "[ 9000.000001] NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:3b:00): 79, without a timestamp",
      ].join("\n"),
    );
    expect(events.map((e) => [e.timestamp, e.pciDevice, e.xid])).toEqual([
      [5121.771002, "0000:af:00", 48],
      [9000.000001, "0000:3b:00", 79],
    ]);
    expect(newXidEvents(events, undefined)).toEqual({ fresh: [], newest: 9000.000001 });
    expect(newXidEvents(events, 6000).fresh.map((e) => e.xid)).toEqual([79]);
    expect(newXidEvents([], undefined)).toEqual({ fresh: [], newest: 0 });
  });
});

describe("NVIDIADeviceBackend against a fake nvidia-smi", () => {
  let node: FakeGpuNode | undefined;
  let backend: NVIDIADeviceBackend | undefined;
  afterEach(async () => {
    await backend?.stop();
    node?.remove();
    backend = undefined;
    node = undefined;
  });

  function start(
    fake: FakeGpuNode,
    extra: Partial<NVIDIABackend> = {},
    logger = silentLogger(),
  ): Promise<readonly unknown[]> {
    const config = NVIDIABackendSchema.parse({
      nvidiaSmiPath: fake.nvidiaSmiPath,
      devRoot: fake.devRoot,
      sysfsRoot: fake.sysfsRoot,
      timeoutSeconds: 2,
      ...extra,
    });
    backend = new NVIDIADeviceBackend(config, { logger, pollIntervalMs: 40 });
    return backend.start();
  }

  it("single GPU: its UUID as the id, attributes from nvidia-smi, NUMA from sysfs, /dev/nvidia* for a container", async () => {
    node = fakeGpuNode("single-gpu", { numaNodes: { "0000:3b:00.0": 0 } });
    await start(node);
    expect(backend!.devices()).toEqual([
      {
        id: SINGLE,
        numaNode: 0,
        health: "Healthy",
        reason: "",
        attributes: {
          model: "NVIDIA A100 80GB PCIe",
          index: "0",
          pciBusId: "0000:3b:00.0",
          driverVersion: "550.127.05",
          cudaVersion: "12.4",
          migMode: "Disabled",
          memoryMiB: "81920",
          minor: "0",
        },
      },
    ]);
    const dev = (name: string) => ({
      containerPath: `/dev/${name}`,
      hostPath: `${node!.devRoot}/${name}`,
      permissions: "rw",
    });
    expect(backend!.allocate([SINGLE])).toEqual({
      envs: { NVIDIA_VISIBLE_DEVICES: SINGLE },
      mounts: [],
      devices: [dev("nvidia0"), dev("nvidiactl"), dev("nvidia-uvm"), dev("nvidia-uvm-tools")],
      annotations: {},
    });
    expect(backend!.cdiContainerEdits(SINGLE)?.deviceNodes?.map((n) => n.path)).toEqual([
      "/dev/nvidia0",
      "/dev/nvidiactl",
      "/dev/nvidia-uvm",
      "/dev/nvidia-uvm-tools",
    ]);
    expect(backend!.cdiContainerEdits("GPU-nope")).toBeUndefined();
    expect(() => backend!.allocate(["GPU-nope"])).toThrow(UnknownDevicesError);
    expect(backend!.diagnostics()).toEqual([]);
  });

  it("gives only the control nodes that exist, and a GPU whose node is missing is unhealthy", async () => {
    node = fakeGpuNode("single-gpu", { minors: [], controlNodes: ["nvidiactl"] });
    await start(node);
    expect(byId(backend!.devices(), SINGLE)).toMatchObject({
      health: "Unhealthy",
      reason: REASON_DEVICE_NODE_MISSING,
      numaNode: undefined,
    });
    expect(backend!.allocate([SINGLE]).devices.map((d) => d.containerPath)).toEqual(["/dev/nvidiactl"]);
  });

  it("eight GPUs over two NUMA nodes, device nodes by minor number rather than index", async () => {
    node = fakeGpuNode("eight-gpu-two-numa", { numaNodes: EIGHT_GPU_NUMA });
    const devices = (await start(node)) as ReturnType<NVIDIADeviceBackend["devices"]>;
    expect(devices).toHaveLength(8);
    expect(devices.every((d) => d.health === "Healthy")).toBe(true);
    expect(devices.map((d) => d.numaNode)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    expect(devices.map((d) => d.attributes.model)).toEqual(Array(8).fill("NVIDIA H100 80GB HBM3"));
    const seventh = devices[6]!;
    expect(seventh.attributes).toMatchObject({ index: "6", minor: "7", pciBusId: "0000:ba:00.0" });
    const allocation = backend!.allocate([seventh.id, devices[0]!.id]);
    expect(allocation.devices.map((d) => d.containerPath)).toEqual([
      "/dev/nvidia7",
      "/dev/nvidia0",
      "/dev/nvidiactl",
      "/dev/nvidia-uvm",
      "/dev/nvidia-uvm-tools",
    ]);
    expect(allocation.envs.NVIDIA_VISIBLE_DEVICES).toBe(`${seventh.id},${devices[0]!.id}`);
  });

  it("a GPU in MIG mode is listed unhealthy (MIG devices are not advertised), the other one healthy", async () => {
    node = fakeGpuNode("mig-enabled");
    const devices = (await start(node)) as ReturnType<NVIDIADeviceBackend["devices"]>;
    expect(devices.map((d) => [d.attributes.migMode, d.health, d.reason])).toEqual([
      ["Enabled", "Unhealthy", REASON_MIG_ENABLED],
      ["Disabled", "Healthy", ""],
    ]);
    expect(devices[0]!.attributes.cudaVersion).toBe("12.2");
  });

  it("an XID makes its GPU unhealthy, an ignored one does not, and one that needs a reset holds until the driver reloads", async () => {
    node = fakeGpuNode("xid-then-recovery/1-healthy");
    const logs = captureLogs();
    await start(node, { dmesgPath: node.dmesgPath }, logs.logger);
    // The XID 13 already in the kernel log when the plugin starts is history, not news.
    expect(summarize(backend!.devices())).toBe(JSON.stringify([`${V100_0}:Healthy`, `${V100_1}:Healthy`]));

    node.play("xid-then-recovery/2-xid");
    await waitForDevices(
      backend!,
      (d) => byId(d, V100_1)?.reason === "XID48-ResetRequired",
      "XID 48 on the second V100",
    );
    expect(byId(backend!.devices(), V100_0)?.health).toBe("Healthy");
    expect(byId(backend!.devices(), V100_1)?.attributes.lastXid).toMatch(/^48: .*double bit error/);
    await logs.waitFor((l) => l.msg === "XID ignored (application error)" && l.xid === 13, "XID 13 ignored");
    await logs.waitFor(
      () =>
        logs.lines.filter((l) => typeof l.msg === "string" && l.msg.startsWith("XID makes the GPU unhealthy"))
          .length >= 2,
      "both XIDs of the GPU",
    );

    // A clean poll is no reset: refreshes go on, the GPU stays unhealthy.
    node.play("xid-then-recovery/3-clean-poll");
    const refreshes = () => logs.lines.filter((l) => l.msg === "NVIDIA refresh done").length;
    const seen = refreshes();
    await logs.waitFor(() => refreshes() >= seen + 4, "four refreshes after the clean poll");
    expect(byId(backend!.devices(), V100_1)?.reason).toBe("XID48-ResetRequired");

    node.play("xid-then-recovery/4-driver-reloaded");
    await waitForDevices(backend!, (d) => byId(d, V100_1)?.health === "Healthy", "the V100 after the reload");
    await logs.waitFor(
      (l) => l.msg === "GPU recovered after XID" && l.resetSeen === "the NVIDIA driver loaded again",
      "the recovery log line",
    );
  });

  it("a GPU nvidia-smi can no longer open is lost, the others stay healthy", async () => {
    node = fakeGpuNode("eight-gpu-two-numa", { numaNodes: EIGHT_GPU_NUMA });
    const devices = (await start(node)) as ReturnType<NVIDIADeviceBackend["devices"]>;
    const lines = (await import("node:fs")).readFileSync(`${node.root}/bin/state/query-gpu.csv`, "utf8");
    node.write(
      "query-gpu.csv",
      lines.replace(/^7, .*$/m, "Unable to determine the device handle for GPU0000:DB:00.0: Unknown Error"),
    );
    node.write("exit-code", "15\n");
    const seen = await waitForDevices(backend!, (d) => d.some((x) => x.health === "Unhealthy"), "a lost GPU");
    expect(seen.devices.filter((d) => d.health === "Unhealthy").map((d) => [d.id, d.reason])).toEqual([
      [devices[7]!.id, REASON_GPU_LOST],
    ]);
    expect(backend!.diagnostics()[0]).toMatch(/exit code 15/);
  });

  it("the driver missing: no GPUs at first, and known GPUs turn unhealthy then recover with it", async () => {
    node = fakeGpuNode("driver-missing");
    await start(node);
    expect(backend!.devices()).toEqual([]);
    expect(backend!.diagnostics()).toEqual([
      expect.stringContaining("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ]);

    node.play("single-gpu");
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.health === "Healthy",
      "the GPU once the driver loads",
    );
    node.play("driver-missing");
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.reason === REASON_DRIVER_UNAVAILABLE,
      "DriverUnavailable",
    );
    node.play("single-gpu");
    await waitForDevices(backend!, (d) => byId(d, SINGLE)?.health === "Healthy", "the GPU back");
    expect(backend!.diagnostics()).toEqual([]);
  });

  it("nvidia-smi absent: no devices and a diagnostic naming the path, no crash", async () => {
    node = fakeGpuNode("single-gpu");
    await start(node, { nvidiaSmiPath: `${node.root}/bin/absent/nvidia-smi` });
    expect(backend!.devices()).toEqual([]);
    expect(backend!.diagnostics()).toEqual([expect.stringMatching(/absent\/nvidia-smi .*not found/)]);
  });

  it("garbled output and a hanging nvidia-smi make known GPUs unhealthy with a reason, never crash", async () => {
    node = fakeGpuNode("garbled");
    await start(node);
    expect(backend!.devices()).toEqual([]);
    expect(backend!.diagnostics()[0]).toMatch(/not understood: line 1: expected 8 .*infoROM/);

    node.play("single-gpu");
    await waitForDevices(backend!, (d) => byId(d, SINGLE)?.health === "Healthy", "the GPU");
    node.play("garbled");
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.reason === REASON_NVIDIA_SMI_OUTPUT_INVALID,
      "invalid output",
    );
    node.play("single-gpu");
    node.hang(30);
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.reason === REASON_NVIDIA_SMI_TIMEOUT,
      "timeout",
      8000,
    );
    expect(backend!.diagnostics()[0]).toMatch(/no answer within 2000 ms; killed/);
    node.hang(undefined);
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.health === "Healthy",
      "the GPU after the hang",
      8000,
    );
  });

  it("names nvidia-smi missing after GPUs were known as the reason", async () => {
    node = fakeGpuNode("single-gpu");
    await start(node);
    const { rmSync } = await import("node:fs");
    rmSync(node.nvidiaSmiPath);
    await waitForDevices(
      backend!,
      (d) => byId(d, SINGLE)?.reason === REASON_NVIDIA_SMI_MISSING,
      "NvidiaSmiMissing",
    );
  });
});
