// The V8 heap the operator's report cache holds at 5000 8-GPU nodes, apart from the cluster: 5000 reports
// built by the plugin's own buildDeviceNodeState from the benchmark's devices (gpu-devices.ts), each parsed
// from JSON as the informer receives it, then kept as the cache keeps them, and the CPU that takes (what
// the reports' arrival costs the operator's event loop besides the reconciles).
//   node --expose-gc --import tsx bench/operator/report-cache-heap.ts whole   (managedFields stripped only)
//   node --expose-gc --import tsx bench/operator/report-cache-heap.ts slim    (slimReportForCache)
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import { stripManagedFields } from "../../src/kube/index.js";
import { slimReportForCache } from "../../src/operator/controllers/cache-transforms.js";
import { buildDeviceNodeState } from "../../src/plugin-runtime/report/node-state.js";
import { simulatedDevice } from "./gpu-devices.js";

const NODES = 5000;
const GPUS = 8;
const mode = process.argv[2] ?? "slim";
if (mode !== "whole" && mode !== "slim") throw new Error(`mode ${mode}: must be whole or slim`);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run it with node --expose-gc");

const now = new Date().toISOString();
const texts: string[] = [];
for (let n = 0; n < NODES; n++) {
  const physical = Array.from({ length: GPUS }, (_, i) => ({
    ...simulatedDevice("nvidia", n, i),
    health: "Healthy" as const,
    reason: "",
  }));
  const report = buildDeviceNodeState({
    namespace: "dpo-system",
    config: { name: "bench-capacity", uid: "config-uid" },
    nodeName: `kwok-node-${n}`,
    resourceName: "bench.example/dev",
    revision: "0123456789",
    podUID: `pod-uid-${n}`,
    pluginVersion: "fleet",
    kubeletAPIVersion: "v1beta1",
    configHash: "config-hash",
    registration: { registered: true, since: now },
    since: new Map(),
    now,
    physical,
    advertised: physical.map((d) => ({
      id: d.id,
      physicalId: d.id,
      replica: 0,
      numaNode: d.numaNode,
      health: d.health,
      reason: "",
    })),
  });
  const served = {
    ...report.object,
    metadata: {
      ...report.object.metadata,
      uid: `uid-${n}`,
      resourceVersion: String(n + 1),
      creationTimestamp: now,
      managedFields: [{ manager: "dpo-plugin", operation: "Apply", fieldsType: "FieldsV1", fieldsV1: {} }],
    },
    status: report.status,
  };
  texts.push(JSON.stringify(served));
}
gc();
gc();
const before = process.memoryUsage().heapUsed;
const keep = mode === "slim" ? slimReportForCache : stripManagedFields<DeviceNodeState>;
const c0 = process.cpuUsage();
const cache = texts.map((text) => keep(JSON.parse(text) as DeviceNodeState));
const used = process.cpuUsage(c0);
const cpuMs = (used.user + used.system) / 1000;
gc();
gc();
const heldMiB = (process.memoryUsage().heapUsed - before) / 2 ** 20;
console.log(
  `${mode}: ${heldMiB.toFixed(1)} MiB of heap for ${cache.length} reports of ${GPUS} GPUs (${Buffer.byteLength(texts[0]!)} B each as JSON); ` +
    `parsed and kept in ${cpuMs.toFixed(0)} ms of CPU, ${((cpuMs / cache.length) * 1000).toFixed(0)} µs a report`,
);
