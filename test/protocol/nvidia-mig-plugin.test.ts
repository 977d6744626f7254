// The plugin with MIG strategy Mixed, as the kubelet sees it, against a fake nvidia-smi replaying NVIDIA's
// recorded H100 layouts: the MIG devices of one profile in ListAndWatch with their GPU's NUMA node,
// Allocate's device specs, NVIDIA_VISIBLE_DEVICES and CDI names, and a repartitioned GPU; `dpo probe` on
// a layout strategy Single cannot serve.
import * as grpc from "@grpc/grpc-js";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { NVIDIADeviceBackend } from "../../src/plugin-runtime/backends/nvidia.js";
import type { AllocateResponse } from "../../src/plugin-runtime/proto/index.js";
import { EIGHT_GPU_NUMA, fakeGpuNode, type FakeGpuNode } from "../fixtures/nvidia/fake-node.js";
import { makeConfig, startHarness, waitFor, type Harness } from "./support.js";

const RESOURCE = "nvidia.com/mig-1g.10gb";
/** The two 1g.10gb devices of the recorded balanced layout, GPU instances 9 and 10. */
const SMALL = ["MIG-9d14fb21-4ae1-546f-a636-011582899c39", "MIG-0f709664-740c-52b0-ae79-3e4c9ede6d3b"];

let harness: Harness | undefined;
let node: FakeGpuNode | undefined;
afterEach(async () => {
  await harness?.close();
  node?.remove();
  harness = undefined;
  node = undefined;
});

async function startMig(scenario: "h100-mig-single" | "h100-mig-mixed") {
  node = fakeGpuNode(scenario, { numaNodes: EIGHT_GPU_NUMA });
  const config = makeConfig(
    {
      resourceName: RESOURCE,
      backend: {
        type: "NVIDIA" as const,
        nvidia: {
          nvidiaSmiPath: node.nvidiaSmiPath,
          devRoot: node.devRoot,
          sysfsRoot: node.sysfsRoot,
          timeoutSeconds: 2,
          mig: { strategy: "Mixed" as const, profile: "1g.10gb" },
        },
      },
      cdi: { enabled: true, kind: RESOURCE },
    },
    "mig-1g-10gb",
  );
  const backend = new NVIDIADeviceBackend(config.spec.backend.nvidia!, {
    logger: pino({ level: "silent" }),
    pollIntervalMs: 40,
    migMinorsPath: node.migMinorsPath,
  });
  harness = await startHarness(config, { backend });
  return waitFor(
    "the simulated kubelet to see the plugin's MIG devices",
    (observe) => {
      const r = harness!.kubelet.resources.get(RESOURCE);
      observe({ connected: r?.connected, devices: r?.devices.length, refused: harness!.kubelet.refused });
      return r?.connected && r.updates > 0 ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}

function allocate(r: Awaited<ReturnType<typeof startMig>>, ids: string[]): Promise<AllocateResponse> {
  return new Promise((resolve, reject) =>
    r.client.allocate(
      { containerRequests: [{ devicesIds: ids }] },
      new grpc.Metadata(),
      { deadline: Date.now() + 10_000 },
      (e: grpc.ServiceError | null, res: AllocateResponse) => (e ? reject(e) : resolve(res)),
    ),
  );
}

describe("MIG strategy Mixed through the kubelet API", () => {
  it("advertises one profile's MIG devices on their GPU's NUMA node; Allocate gives what NVIDIA's toolkit expects", async () => {
    const r = await startMig("h100-mig-mixed");
    expect(r.devices.map((d) => [d.ID, d.health, d.topology?.nodes?.[0]?.ID])).toEqual([
      [SMALL[0], "Healthy", 0],
      [SMALL[1], "Healthy", 0],
    ]);
    const c = (await allocate(r, [SMALL[1]!])).containerResponses[0]!;
    expect(c.envs["NVIDIA_VISIBLE_DEVICES"]).toBe(SMALL[1]);
    // GPU instance 10, compute instance 0 of GPU minor 0: mig-minors gives 93 and 94.
    expect(c.devices.map((d) => [d.containerPath, d.hostPath])).toEqual(
      [
        "nvidia0",
        "nvidia-caps/nvidia-cap93",
        "nvidia-caps/nvidia-cap94",
        "nvidiactl",
        "nvidia-uvm",
        "nvidia-uvm-tools",
      ].map((name) => [`/dev/${name}`, join(node!.devRoot, name)]),
    );
    expect(c.cdiDevices).toEqual([{ name: `${RESOURCE}=${SMALL[1]}` }]);
    const [file] = readdirSync(harness!.cdiDir).filter((f) => f.endsWith(".json"));
    const spec = JSON.parse(readFileSync(join(harness!.cdiDir, file!), "utf8")) as {
      kind: string;
      devices: { name: string; containerEdits: { deviceNodes: { path: string }[] } }[];
    };
    expect(spec.kind).toBe(RESOURCE);
    expect(spec.devices.map((d) => d.name).sort()).toEqual([...SMALL].sort());
    expect(
      spec.devices.find((d) => d.name === SMALL[1])?.containerEdits.deviceNodes.map((n) => n.path),
    ).toEqual(c.devices.map((d) => d.containerPath));
  });

  it("a GPU repartitioned under the running plugin: the kubelet sees the MIG devices change, the plugin keeps serving", async () => {
    const r = await startMig("h100-mig-single");
    expect(r.devices).toHaveLength(7);
    node!.play("h100-mig-mixed");
    await waitFor(
      "the balanced layout's two 1g.10gb devices",
      (observe) => {
        observe(r.devices.map((d) => d.ID));
        return r.devices.length === 2;
      },
      { timeoutMs: 5_000, intervalMs: 10 },
    );
    expect(r.devices.map((d) => d.ID)).toEqual(SMALL);
    expect(harness!.kubelet.capacity(RESOURCE)).toEqual({ capacity: 2, allocatable: 2 });
    expect((await allocate(r, [SMALL[0]!])).containerResponses[0]!.envs["NVIDIA_VISIBLE_DEVICES"]).toBe(
      SMALL[0],
    );
  });
});

describe("dpo probe with MIG strategy Single", () => {
  const dpo = join(import.meta.dirname, "..", "..", "dist", "dpo.js");
  beforeAll(() => {
    if (!existsSync(dpo)) throw new Error(`${dpo} is missing: run 'make build' first`);
  });

  it("on the recorded balanced layout: every MIG device unhealthy with MIGProfilesMixed, the profiles named, exit 1", () => {
    node = fakeGpuNode("h100-mig-mixed", { numaNodes: EIGHT_GPU_NUMA });
    const file = join(node.root, "config.yaml");
    writeFileSync(
      file,
      stringify({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: "gpus" },
        spec: {
          resourceName: "nvidia.com/gpu",
          backend: {
            type: "NVIDIA",
            nvidia: {
              nvidiaSmiPath: node.nvidiaSmiPath,
              devRoot: node.devRoot,
              sysfsRoot: node.sysfsRoot,
              mig: { strategy: "Single" },
            },
          },
        },
      }),
    );
    const out = spawnSync(process.execPath, [dpo, "probe", "--config", file, "--output", "json"], {
      encoding: "utf8",
    });
    expect(out.status, out.stderr).toBe(1);
    const report = JSON.parse(out.stdout) as {
      devices: { id: string; reason: string; attributes: Record<string, string> }[];
      problems: string[];
    };
    expect(report.devices.map((d) => [d.attributes.profile, d.reason])).toEqual([
      ["3g.40gb", "MIGProfilesMixed"],
      ["2g.20gb", "MIGProfilesMixed"],
      ["1g.10gb", "MIGProfilesMixed"],
      ["1g.10gb", "MIGProfilesMixed"],
    ]);
    expect(report.problems).toContain(
      "mig.strategy Single: more than one MIG profile on the node (1g.10gb, 2g.20gb, 3g.40gb); strategy Single needs one",
    );
  });
});
