// What bench-plugin runs and how much: the entry points, the mock devices, the upstream sample plugin's
// fixed resource, and the BENCH_* environment knobs.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { imageNodeFlags } from "../../tools/kubelet-sim/plugin-pod.js";

export const repo = join(import.meta.dirname, "..", "..");
/** What the image runs: the bundle, with a V8 code cache made once under the same flags (see Dockerfile). */
export const dpo = join(repo, "dist", "dpo.js");
/** The unbundled tsc output, measured beside the bundle to show what bundling and the code cache buy. */
export const dpoUnbundled = join(repo, "dist", "cli", "main.js");
export const RESOURCE = "bench.example/dev";
export const DEVICES = 8;
export const REPLICAS = 100;
/**
 * The upstream sample device plugin (k8s.io/kubernetes test/images/sample-device-plugin): it registers
 * this resource name with two devices, Dev-1 and Dev-2, both healthy, and has no health source.
 */
export const GO_RESOURCE = "example.com/resource";
export const GO_DEVICES = 2;
/** Where its Allocate creates one empty file per device id (a path fixed in its source). */
export const GO_FAKE_DEVICE_DIR = "/tmp";
export const STARTS = Number(process.env["BENCH_STARTS"] ?? 5);
export const ALLOCATES = Number(process.env["BENCH_ALLOCATES"] ?? 10_000);
export const HEALTH_CHANGES = Number(process.env["BENCH_HEALTH_CHANGES"] ?? 100);
/** Calls before measuring, so the JIT has compiled the hot path as it will have on a long-running node. */
export const WARMUP = Number(process.env["BENCH_WARMUP"] ?? 2_000);
/** The Allocates of each plugin are made in this many blocks, the two plugins taking turns block by block. */
export const BLOCKS = Number(process.env["BENCH_BLOCKS"] ?? 10);
/**
 * Seconds the idle plugin and the floor are read again after, idle all along: V8's memory reducer has run
 * (8 s in) and the idle plugin's few allocations have cycled its young generation, whose freed pages V8
 * keeps in its page pool (docs/benchmarks.md); the figure a node holds for the plugin's life.
 */
export const IDLE_SETTLE_S = Number(process.env["BENCH_IDLE_SETTLE_S"] ?? 60);
/** The Node.js flags the container image starts the runtime with (its Dockerfile's ENTRYPOINT). */
export const NODE_FLAGS =
  process.env["BENCH_NODE_FLAGS"] !== undefined
    ? process.env["BENCH_NODE_FLAGS"].split(" ").filter(Boolean)
    : imageNodeFlags(readFileSync(join(repo, "Dockerfile"), "utf8"));
export const PLUGIN_LOGS = process.env["BENCH_PLUGIN_LOGS"];
