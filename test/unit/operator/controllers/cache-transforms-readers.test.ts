// Each reader of a plugin's report that came with node labels, self-heals and the rollout gate gets the
// same answer from the report as the operator's cache keeps it (slimReportForCache) as from the whole
// report: the node's labels from a recorded 8-GPU report, the self-heal Events, the rollout's decision
// and the configs found again at the start of a term. The node-health, choice and stale-report readers
// are in cache-transforms-report.test.ts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type {
  DeviceNodeState,
  DeviceNodeStateStatus,
  ReportedDevice,
} from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpec } from "../../../../src/api/v1beta1/spec.js";
import { slimReportForCache } from "../../../../src/operator/controllers/cache-transforms.js";
import { configsToReconcileAtStart } from "../../../../src/operator/controllers/rediscovery.js";
import {
  LABEL_SOURCE_ATTRIBUTES,
  labelsFromReport,
} from "../../../../src/operator/node-labels/from-report.js";
import { SelfHealEvents } from "../../../../src/operator/status/self-heals.js";
import { NVIDIA_FIXTURES } from "../../../fixtures/nvidia/fake-node.js";
import {
  decide,
  FRESH,
  NEW,
  newRev,
  node,
  NOW,
  OLD,
  pod,
  report as rolloutReport,
  stored,
  written,
} from "../upgrade/rollout-support.js";

/** The status dpo's NVIDIA backend writes for an eight-H100 node (test/fixtures/nvidia/reports). */
const H100 = JSON.parse(
  readFileSync(join(NVIDIA_FIXTURES, "reports", "eight-h100.json"), "utf8"),
) as DeviceNodeStateStatus;

function asReport(status: DeviceNodeStateStatus, nodeName = "gpu-1"): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `gpus.${nodeName}`, namespace: "dpo-system", uid: `uid-${nodeName}` },
    spec: { configName: "gpus", nodeName, resourceName: "nvidia.com/gpu" },
    status,
  };
}

/** The fixture's devices with more of what the backend writes: an XID's text, the PCIe root, typed twins. */
function everyAttribute(status: DeviceNodeStateStatus): DeviceNodeStateStatus {
  return {
    ...status,
    devices: status.devices.map((d): ReportedDevice => ({
      ...d,
      attributes: {
        ...d.attributes,
        lastXid: "94: Contained ECC error, pid=1234, name=python3, Ch 00000004",
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
      },
      typedAttributes: { model: { string: d.attributes?.model ?? "" }, numaNode: { int: d.numaNode ?? 0 } },
      capacity: { memory: { value: "81559Mi" } },
    })),
  };
}

const sharing = {
  none: { strategy: "None" as const, failRequestsGreaterThanOne: false },
  timeSliced: { strategy: "TimeSlicing" as const, replicas: 4, failRequestsGreaterThanOne: false },
};
const nvidia = (s: DevicePluginConfigSpec["sharing"] = sharing.none) => ({
  metadata: { name: "gpus" },
  spec: { sharing: s, backend: { type: "NVIDIA" as const } },
});
const devfs = {
  metadata: { name: "fpgas" },
  spec: { sharing: sharing.none, backend: { type: "DevFS" as const } },
};

describe("the cached report, read for node labels", () => {
  const whole = asReport(everyAttribute(H100));
  const slim = slimReportForCache(whole);

  it("gives the recorded eight-H100 node the labels the whole report gives it", () => {
    for (const config of [nvidia(), nvidia(sharing.timeSliced)]) {
      const labels = labelsFromReport(config, slim.status!);
      expect(labels).toEqual(labelsFromReport(config, whole.status!));
      // Every GFD key the attributes make is there, so a dropped attribute shows as a missing label.
      expect(labels).toMatchObject({
        "nvidia.com/gpu.product": expect.stringContaining("NVIDIA-H100-80GB-HBM3") as string,
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/cuda.driver-version.full": "550.90.07",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/mig.capable": "true",
        "product.device.dpo.dev/gpus": "NVIDIA-H100-80GB-HBM3",
      });
    }
  });

  it("gives a PCI device's product label from its vendor and device ids", () => {
    const pci = asReport({
      ...H100,
      devices: H100.devices.map((d) => ({
        ...d,
        attributes: { vendor: "10ee", device: "5020", pciBusId: "0000:3b:00.0" },
      })),
    });
    const labels = labelsFromReport(devfs, slimReportForCache(pci).status!);
    expect(labels).toEqual(labelsFromReport(devfs, pci.status!));
    expect(labels["product.device.dpo.dev/fpgas"]).toBe("10ee-5020");
  });

  it("keeps of each device only the attributes labels are made of, one shared object for equal sets", () => {
    const devices = slim.status!.devices;
    for (const d of devices) {
      expect(
        Object.keys(d.attributes ?? {}).every((k) =>
          (LABEL_SOURCE_ATTRIBUTES as readonly string[]).includes(k),
        ),
      ).toBe(true);
      expect(d).not.toHaveProperty("typedAttributes");
      expect(d).not.toHaveProperty("capacity");
    }
    expect(devices[0]!.attributes).toEqual({
      model: "NVIDIA H100 80GB HBM3",
      driverVersion: "550.90.07",
      migMode: "Disabled",
      memoryMiB: "81559",
      cudaVersion: "12.4",
      computeCapability: "9.0",
    });
    // Eight GPUs of one model and driver: one object in the cache, and no reader can change it.
    expect(new Set(devices.map((d) => d.attributes)).size).toBe(1);
    expect(Object.isFrozen(devices[0]!.attributes)).toBe(true);
  });
});

describe("the cached report, read for the self-heal Events", () => {
  const heal = (healedTime?: string) =>
    asReport({
      ...H100,
      registration: {
        ...H100.registration,
        selfHeal: {
          count: 2,
          lastTime: "2026-01-01T00:10:00Z",
          message: "kubelet advertised 0 of 8 healthy devices for 30 s; registered again",
          ...(healedTime === undefined ? {} : { healedTime }),
        },
      },
    });

  it("announces the heal and its end as the whole report does", () => {
    const now = Date.parse("2026-01-01T00:11:00Z");
    for (const report of [heal(), heal("2026-01-01T00:10:04Z")]) {
      const fromSlim = new SelfHealEvents().events("gpus", [slimReportForCache(report)], now);
      const fromWhole = new SelfHealEvents().events("gpus", [report], now);
      expect(fromSlim).toEqual(fromWhole);
      expect(fromSlim.map((e) => e.reason)).toContain("CapacityLost");
    }
  });
});

describe("the cached report, read by the rollout", () => {
  it("moves a surged node on as the whole report does: registered, its advertised count and its unhealthy devices", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const gpus = H100.devices.slice(0, 4);
    const whole = rolloutReport(NEW, newPod);
    whole.status = {
      ...whole.status!,
      advertised: 4,
      healthy: 3,
      devices: [...gpus.slice(0, 3), { ...gpus[3]!, health: "Unhealthy", reason: "XID79-ResetRequired" }],
    };
    // The kubelet advertises the new plugin's healthy devices: the gate holds against the baseline less the unhealthy one.
    const input = (r: DeviceNodeState) => ({
      config: NEW,
      daemonSets: [base, next],
      nodes: [
        node("a", "v1.37.0", 3, { surge: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } }),
        node("b"),
      ],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [r],
    });
    const fromSlim = decide(input(slimReportForCache(whole)));
    expect(fromSlim).toEqual(decide(input(whole)));
    expect(written(fromSlim)).toEqual(["Node a revision=NEW surge=-"]);
  });
});

describe("the cached report, read for the configs to reconcile at the start of a term", () => {
  it("names the config of a report whose config is gone", () => {
    const report = asReport(H100);
    const configs = { get: () => undefined, list: () => [] };
    const left = (r: DeviceNodeState) => ({ nodes: [], owned: [], reports: [r] });
    expect(configsToReconcileAtStart(configs, left(slimReportForCache(report)))).toEqual(["gpus"]);
  });
});
