import { describe, expect, it } from "vitest";
import { PluginMetrics } from "../../../src/plugin-runtime/metrics.js";
import type { DeviceSeries } from "../../../src/plugin-runtime/podresources/allocations.js";
import { deviceTable, samplesOf } from "../../metrics/exposition.js";

const RESOURCE = "example.com/gpu";
const free = (device: string, healthy: 0 | 1 | undefined, allocated: 0 | 1 | undefined): DeviceSeries => ({
  device,
  namespace: "",
  pod: "",
  container: "",
  allocated,
  healthy,
});
const held = (device: string, pod: string, healthy: 0 | 1 | undefined): DeviceSeries => ({
  device,
  namespace: "ml",
  pod,
  container: "main",
  allocated: 1,
  healthy,
});

describe("the per-device series of PluginMetrics", () => {
  const cases: {
    name: string;
    rows: DeviceSeries[][];
    healthy: Record<string, string>;
    allocated: Record<string, string>;
  }[] = [
    {
      name: "before the kubelet answered: health only, no allocation guessed",
      rows: [[free("gpu-0", 1, undefined), free("gpu-1", 0, undefined)]],
      healthy: { "gpu-0": "=1", "gpu-1": "=0" },
      allocated: {},
    },
    {
      name: "a held device names its holder in both",
      rows: [[held("gpu-0", "trainer", 0), free("gpu-1", 1, 0)]],
      healthy: { "gpu-0": "ml/trainer/main=0", "gpu-1": "=1" },
      allocated: { "gpu-0": "ml/trainer/main=1", "gpu-1": "=0" },
    },
    {
      name: "a device gone from the backend while held: allocated only",
      rows: [[free("gpu-0", 1, 0), held("gpu-9", "trainer", undefined)]],
      healthy: { "gpu-0": "=1" },
      allocated: { "gpu-0": "=0", "gpu-9": "ml/trainer/main=1" },
    },
    {
      name: "the last rows replace those before: a device that moved or went leaves no series",
      rows: [
        [held("gpu-0", "trainer", 1), held("gpu-1", "trainer", 1), free("gpu-2", 1, 0)],
        [free("gpu-0", 1, 0), held("gpu-1", "render", 1)],
      ],
      healthy: { "gpu-0": "=1", "gpu-1": "ml/render/main=1" },
      allocated: { "gpu-0": "=0", "gpu-1": "ml/render/main=1" },
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const metrics = new PluginMetrics();
      for (const rows of c.rows) metrics.recordDeviceSeries(RESOURCE, rows);
      const text = await metrics.render();
      expect(deviceTable(text, "dpo_plugin_device_healthy")).toEqual(c.healthy);
      expect(deviceTable(text, "dpo_plugin_device_allocated")).toEqual(c.allocated);
      for (const s of [
        ...samplesOf(text, "dpo_plugin_device_healthy"),
        ...samplesOf(text, "dpo_plugin_device_allocated"),
      ]) {
        expect(s.labels).toEqual(expect.objectContaining({ resource: RESOURCE }));
        expect(Object.keys(s.labels).sort()).toEqual(["container", "device", "namespace", "pod", "resource"]);
      }
    });
  }

  it("keeps no series once the rows are empty", async () => {
    const metrics = new PluginMetrics();
    metrics.recordDeviceSeries(RESOURCE, [held("gpu-0", "trainer", 1)]);
    metrics.recordDeviceSeries(RESOURCE, []);
    const text = await metrics.render();
    expect(samplesOf(text, "dpo_plugin_device_healthy")).toEqual([]);
    expect(samplesOf(text, "dpo_plugin_device_allocated")).toEqual([]);
    expect(text).toContain("# TYPE dpo_plugin_device_healthy gauge");
  });
});
