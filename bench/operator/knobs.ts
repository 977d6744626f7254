// What bench-operator runs and how much: the BENCH_* environment knobs, KWOK's pacing at scale, and what
// the operator is started with, as config/manager/deployment.yaml starts it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  createMemoryCgroup,
  deploymentMemoryLimit,
  deploymentNodeFlags,
  memoryBytes,
  type MemoryCgroup,
} from "../memory-cgroup.js";
import { parseDeviceShape } from "./gpu-devices.js";

function positiveInteger(variable: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${variable}=${value}: must be a positive integer`);
  return n;
}

export const repo = join(import.meta.dirname, "..", "..");
export const dpo = join(repo, "dist", "dpo.js");
export const NODE_COUNTS = (process.env["BENCH_NODES"] ?? "100,5000").split(",").map(Number);
export const CREATES = Number(process.env["BENCH_CREATES"] ?? 20);
export const CAPACITY_CHANGES = Number(process.env["BENCH_CAPACITY_CHANGES"] ?? 40);
export const IDLE_SECONDS = Number(process.env["BENCH_IDLE_SECONDS"] ?? 60);
/** The flap storm: this share of the nodes flips one device's health once a second, for this long. */
export const FLAP_SHARE = Number(process.env["BENCH_FLAP_SHARE"] ?? 0.1);
export const FLAP_SECONDS = Number(process.env["BENCH_FLAP_SECONDS"] ?? 60);
/** Devices per node: an 8-GPU node's by default. */
export const DEVICES_PER_NODE = positiveInteger("BENCH_DEVICES", process.env["BENCH_DEVICES"] ?? "8");
/** What each device reports (gpu-devices.ts): every attribute of the NVIDIA backend by default. */
export const DEVICE_SHAPE = parseDeviceShape(
  process.env["BENCH_DEVICE_ATTRIBUTES"] ?? "nvidia",
  "BENCH_DEVICE_ATTRIBUTES",
);
/**
 * The simulated kubelets beyond 1000 nodes. At 5000 nodes with a kubelet's own 40 s leases (renewed
 * every 10 s) and conditions refreshed every 10–12 s, KWOK (4 at a time) falls behind at about 60
 * writes/s of the 800/s needed, and half the nodes go NotReady. With leases of 160 s (renewed every
 * 40 s) it renewed about 35/s of the 125/s needed on a machine shared with other work, and 482 nodes
 * went NotReady in 12 min. Leases of 10 min (renewed every 2.5 min, about 33/s) and conditions every
 * 2–2.4 min (a kubelet reports unchanged status every 5 min) keep them Ready. The operator watches no
 * Lease; the Node updates it sees stay more frequent than a kubelet's.
 */
export const PACING = { nodeLeaseDurationSeconds: 600, heartbeatIntervalMs: 120_000, parallelism: 16 };
/** The operator's status coalescing interval (statusWriteIntervalMs): at most one write per config in it. */
export const STATUS_WRITE_INTERVAL_MS = 500;
export const DEPLOYMENT = readFileSync(
  join(import.meta.dirname, "..", "..", "config", "manager", "deployment.yaml"),
  "utf8",
);
/** The Node flags the operator Deployment starts `dpo operator` with (config/manager/deployment.yaml). */
export const NODE_FLAGS =
  process.env["BENCH_NODE_FLAGS"] === undefined
    ? deploymentNodeFlags(DEPLOYMENT)
    : process.env["BENCH_NODE_FLAGS"].split(" ").filter(Boolean);
export const RESOURCE = "bench.example/dev";
/**
 * The operator runs under this memory limit (a memory cgroup), as its pod would: the Deployment's own
 * limit by default, `none` for none.
 */
const MEMORY_LIMIT =
  process.env["BENCH_OPERATOR_MEMORY_LIMIT"] ?? deploymentMemoryLimit(DEPLOYMENT) ?? "none";
/** The operator Deployment's memory limit, MiB: its peak RSS's bound whether or not it runs under one here. */
export const DEPLOYMENT_MEMORY_LIMIT_MIB = ((limit) =>
  limit === undefined ? undefined : memoryBytes(limit) / 2 ** 20)(deploymentMemoryLimit(DEPLOYMENT));

export function operatorMemoryLimit(nodeCount: number): MemoryCgroup | { reason: string } {
  if (MEMORY_LIMIT === "none") return { reason: "BENCH_OPERATOR_MEMORY_LIMIT=none" };
  return createMemoryCgroup(`dpo-bench-operator-${process.pid}-${nodeCount}`, memoryBytes(MEMORY_LIMIT));
}
export const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
export const CONVERSION_OBJECTS = Number(process.env["BENCH_CONVERSION_OBJECTS"] ?? 1000);
export const CONVERSION_LISTS = Number(process.env["BENCH_CONVERSION_LISTS"] ?? 20);
