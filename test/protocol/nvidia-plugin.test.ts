// The plugin with the NVIDIA backend, as the kubelet sees it, against a fake nvidia-smi: devices and NUMA
// topology in ListAndWatch, an XID and the recovery, the driver missing, and Allocate's device specs,
// NVIDIA_VISIBLE_DEVICES and CDI names nvidia.com/gpu=<uuid>; `dpo probe` on the same fake node.
import * as grpc from "@grpc/grpc-js";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { NVIDIADeviceBackend } from "../../src/plugin-runtime/backends/nvidia.js";
import type { AllocateResponse, PreferredAllocationResponse } from "../../src/plugin-runtime/proto/index.js";
import {
  EIGHT_GPU_NUMA,
  NVIDIA_FIXTURES,
  fakeGpuNode,
  type FakeGpuNode,
  type NvidiaScenario,
} from "../fixtures/nvidia/fake-node.js";
import { call } from "./grpc-calls.js";
import { makeConfig, startHarness, waitFor, type Harness } from "./support.js";

const RESOURCE = "nvidia.com/gpu";
const dpo = join(import.meta.dirname, "..", "..", "dist", "dpo.js");

let harness: Harness | undefined;
let node: FakeGpuNode | undefined;
afterEach(async () => {
  await harness?.close();
  node?.remove();
  harness = undefined;
  node = undefined;
});

function nvidiaSpec(fake: FakeGpuNode, extra: Record<string, unknown> = {}) {
  return {
    resourceName: RESOURCE,
    backend: {
      type: "NVIDIA" as const,
      nvidia: {
        nvidiaSmiPath: fake.nvidiaSmiPath,
        dmesgPath: fake.dmesgPath,
        devRoot: fake.devRoot,
        sysfsRoot: fake.sysfsRoot,
        timeoutSeconds: 2,
      },
    },
    ...extra,
  };
}

async function startNvidia(
  scenario: NvidiaScenario,
  extra: Record<string, unknown> = {},
  prepare: (fake: FakeGpuNode) => void = () => undefined,
) {
  node = fakeGpuNode(scenario, { numaNodes: EIGHT_GPU_NUMA });
  prepare(node);
  const config = makeConfig(nvidiaSpec(node, extra), "gpus");
  const nvidia = config.spec.backend.nvidia!;
  const backend = new NVIDIADeviceBackend(nvidia, { logger: pino({ level: "silent" }), pollIntervalMs: 40 });
  harness = await startHarness(config, { backend });
  return waitFor(
    "the simulated kubelet to see the plugin's devices",
    (observe) => {
      const r = harness!.kubelet.resources.get(RESOURCE);
      observe({ connected: r?.connected, devices: r?.devices.length, refused: harness!.kubelet.refused });
      return r?.connected && r.updates > 0 ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}

function allocate(r: Awaited<ReturnType<typeof startNvidia>>, ids: string[]): Promise<AllocateResponse> {
  return new Promise((resolve, reject) =>
    r.client.allocate(
      { containerRequests: [{ devicesIds: ids }] },
      new grpc.Metadata(),
      { deadline: Date.now() + 10_000 },
      (e: grpc.ServiceError | null, res: AllocateResponse) => (e ? reject(e) : resolve(res)),
    ),
  );
}

describe("the NVIDIA backend through the kubelet API", () => {
  it("single GPU: one device, healthy, and Allocate gives its nodes, NVIDIA_VISIBLE_DEVICES and no CDI by default", async () => {
    const r = await startNvidia("single-gpu");
    const uuid = "GPU-4d3c2f8e-9b1a-4c5d-8e7f-0a1b2c3d4e5f";
    // Its bus (3b) is not in the eight-GPU sysfs: no NUMA node, so no topology.
    expect(r.devices).toEqual([{ ID: uuid, health: "Healthy" }]);
    const res = await allocate(r, [uuid]);
    const c = res.containerResponses[0]!;
    expect(c.envs["NVIDIA_VISIBLE_DEVICES"]).toBe(uuid);
    expect(c.devices.map((d) => [d.containerPath, d.hostPath, d.permissions])).toEqual([
      ["/dev/nvidia0", join(node!.devRoot, "nvidia0"), "rw"],
      ["/dev/nvidiactl", join(node!.devRoot, "nvidiactl"), "rw"],
      ["/dev/nvidia-uvm", join(node!.devRoot, "nvidia-uvm"), "rw"],
      ["/dev/nvidia-uvm-tools", join(node!.devRoot, "nvidia-uvm-tools"), "rw"],
    ]);
    expect(c.cdiDevices).toEqual([]);
  });

  it("eight GPUs over two NUMA nodes, time-sliced: NUMA hints per replica, CDI names nvidia.com/gpu=<uuid>", async () => {
    const r = await startNvidia("eight-gpu-two-numa", {
      sharing: { strategy: "TimeSlicing", replicas: 2 },
      topology: { allocationPolicy: "NUMAAligned" },
      cdi: { enabled: true, kind: RESOURCE },
    });
    expect(r.devices).toHaveLength(16);
    const numa = (id: string) => r.devices.find((d) => d.ID === id)?.topology?.nodes?.[0]?.ID;
    const uuids = [...new Set(r.devices.map((d) => d.ID.split("::")[0]!))];
    expect(uuids.map((u) => numa(`${u}::1`))).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    const res = await allocate(r, [`${uuids[6]}::1`, `${uuids[7]}::0`]);
    const c = res.containerResponses[0]!;
    expect(c.cdiDevices).toEqual([
      { name: `nvidia.com/gpu=${uuids[6]}` },
      { name: `nvidia.com/gpu=${uuids[7]}` },
    ]);
    expect(c.envs["NVIDIA_VISIBLE_DEVICES"]).toBe(`${uuids[6]},${uuids[7]}`);
    // Minor numbers 7 and 6 belong to indexes 6 and 7 in this recording.
    expect(c.devices.map((d) => d.containerPath).slice(0, 2)).toEqual(["/dev/nvidia7", "/dev/nvidia6"]);
    const spec = JSON.parse(readFileSync(join(harness!.cdiDir, "nvidia.com-gpu.json"), "utf8")) as {
      devices: { name: string; containerEdits: { deviceNodes: { path: string }[] } }[];
    };
    expect(
      spec.devices.find((d) => d.name === uuids[6])?.containerEdits.deviceNodes.map((n) => n.path),
    ).toEqual(["/dev/nvidia7", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]);
  });

  it("GetPreferredAllocation joins the container's GPU over its best NVLink (a DGX-1's topo -m)", async () => {
    const dgx1 = readFileSync(join(NVIDIA_FIXTURES, "topology", "dgx1-v100-8gpu-nv1-nv2.txt"), "utf8");
    const r = await startNvidia("eight-gpu-two-numa", { topology: { allocationPolicy: "Packed" } }, (fake) =>
      fake.write("topo.txt", dgx1),
    );
    const uuids = r.devices.map((d) => d.ID);
    // The UUIDs of this recording sort in index order, as the plugin lists them.
    expect(r.devices.map((d) => d.ID)).toEqual([...uuids].sort());
    const res: PreferredAllocationResponse = await call(r.client.getPreferredAllocation.bind(r.client), {
      containerRequests: [
        { availableDeviceIDs: uuids, mustIncludeDeviceIDs: [uuids[0]!], allocationSize: 2 },
      ],
    });
    // GPU0's links: NV1 to GPU1 and GPU2, NV2 to GPU3 and GPU4; Packed stays on GPU0's NUMA node.
    expect(res.containerResponses[0]!.deviceIDs).toEqual([uuids[0], uuids[3]]);
  });

  it("MIG: the GPU in MIG mode is advertised unhealthy and Allocate refuses it", async () => {
    const r = await startNvidia("mig-enabled");
    expect(r.devices.map((d) => d.health)).toEqual(["Unhealthy", "Healthy"]);
    await expect(allocate(r, [r.devices[0]!.ID])).rejects.toMatchObject({
      code: grpc.status.FAILED_PRECONDITION,
    });
  });

  it("XID then recovery: the kubelet sees the GPU go unhealthy and come back after the driver reloads", async () => {
    const r = await startNvidia("xid-then-recovery/1-healthy");
    const bad = "GPU-d4e5f6a7-b8c9-4dae-9f10-2b3c4d5e6f70";
    const health = () => r.devices.map((d) => `${d.ID}:${d.health}`).join(",");
    expect(health()).not.toContain("Unhealthy");
    node!.play("xid-then-recovery/2-xid");
    await waitFor(
      "the XID 48 GPU unhealthy",
      (observe) => {
        observe(health());
        return (
          r.devices.find((d) => d.ID === bad)?.health === "Unhealthy" &&
          r.devices.filter((d) => d.health === "Unhealthy").length === 1
        );
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    expect(harness!.kubelet.capacity(RESOURCE)).toEqual({ capacity: 2, allocatable: 1 });
    // XID 48 needs a reset: the GPU comes back once the kernel log shows the driver loaded again.
    node!.play("xid-then-recovery/4-driver-reloaded");
    await waitFor(
      "the GPU healthy again",
      (observe) => {
        observe(health());
        return r.devices.every((d) => d.health === "Healthy");
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    expect(harness!.kubelet.capacity(RESOURCE)).toEqual({ capacity: 2, allocatable: 2 });
  });

  it("the driver missing: every GPU unhealthy until it is back, and the plugin keeps serving", async () => {
    const r = await startNvidia("single-gpu");
    node!.play("driver-missing");
    await waitFor("the GPU unhealthy", () => r.devices[0]?.health === "Unhealthy", {
      timeoutMs: 5_000,
      intervalMs: 10,
    });
    expect(harness!.runtime.devices.snapshot().physical[0]?.reason).toBe("DriverUnavailable");
    node!.play("single-gpu");
    await waitFor("the GPU healthy", () => r.devices[0]?.health === "Healthy", {
      timeoutMs: 5_000,
      intervalMs: 10,
    });
  });
});

describe("dpo probe", () => {
  beforeAll(() => {
    if (!existsSync(dpo)) throw new Error(`${dpo} is missing: run 'make build' first`);
  });

  function probe(scenario: NvidiaScenario, ...args: string[]) {
    node = fakeGpuNode(scenario, { numaNodes: EIGHT_GPU_NUMA });
    const file = join(node.root, "config.yaml");
    writeFileSync(
      file,
      stringify({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: "gpus" },
        spec: nvidiaSpec(node),
      }),
    );
    return spawnSync(process.execPath, [dpo, "probe", "--config", file, ...args], { encoding: "utf8" });
  }

  it("prints the GPUs with health, NUMA node and attributes, exit 0 when all are healthy", () => {
    const out = probe("eight-gpu-two-numa");
    expect(out.status, out.stderr).toBe(0);
    const lines = out.stdout.split("\n");
    expect(lines[0]).toBe("config gpus: backend NVIDIA, 8 device(s)");
    expect(lines[1]).toMatch(/^DEVICE\s+HEALTH\s+REASON\s+NUMA$/);
    expect(lines[2]).toMatch(/^GPU-0a6f1f4e-2c35-4b8e-9d11-6f1e2a3b4c01\s+Healthy\s+-\s+0$/);
    expect(lines[9]).toMatch(/^GPU-71d084b5-93ac-42f5-a488-d08591a23308\s+Healthy\s+-\s+1$/);
    expect(out.stdout).toContain(
      "GPU-0a6f1f4e-2c35-4b8e-9d11-6f1e2a3b4c01: model=NVIDIA H100 80GB HBM3 index=0 pciBusId=0000:18:00.0 driverVersion=550.90.07 migMode=Disabled memoryMiB=81559 cudaVersion=12.4 computeCapability=9.0 minor=0",
    );
  });

  it("says what is wrong when the driver is missing, exit 1, and --output json gives the same report", () => {
    const out = probe("driver-missing");
    expect(out.status).toBe(1);
    expect(out.stdout).toContain("config gpus: backend NVIDIA, 0 device(s)");
    expect(out.stdout).toMatch(
      /problems:\n {2}.*nvidia-smi --query-gpu=.*NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/,
    );
    expect(out.stdout).toContain("no devices found");
    node!.remove();
    const json = probe("mig-enabled", "--output", "json");
    expect(json.status).toBe(1);
    const report = JSON.parse(json.stdout) as { backend: string; devices: { reason: string }[] };
    expect(report.backend).toBe("NVIDIA");
    expect(report.devices.map((d) => d.reason)).toEqual(["MIGEnabled", ""]);
  });

  it("refuses a config that is not valid with exit 2", () => {
    node = fakeGpuNode("single-gpu");
    const file = join(node.root, "bad.yaml");
    writeFileSync(
      file,
      "apiVersion: dpo.dev/v1beta1\nkind: DevicePluginConfig\nmetadata: {name: x}\nspec: {resourceName: nvidia.com/gpu, backend: {type: NVIDIA}}\n",
    );
    const out = spawnSync(process.execPath, [dpo, "probe", "--config", file], { encoding: "utf8" });
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("spec.backend.nvidia: must be set when type is NVIDIA");
  });
});
