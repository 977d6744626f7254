// What bench-upgrade runs and how much: the DPO_BENCH_* environment knobs and the fixed names.
import type { RenderContext } from "../../src/operator/render/index.js";

export const NODE_COUNT = Number(process.env["DPO_BENCH_NODES"] ?? 100);
/** Nodes in flight at once, for dpo (spec.upgrade.maxUnavailable) and the baseline's RollingUpdate alike. */
export const MAX_UNAVAILABLE = Number(process.env["DPO_BENCH_MAX_UNAVAILABLE"] ?? 1);
/** Admissions in flight at once, each on its own node, round-robin over every node. */
export const WORKERS = Number(process.env["DPO_BENCH_WORKERS"] ?? 2);
/**
 * At most one admission per node per this many ms, so that a failure (which comes back at once) is not
 * retried in a tight loop: failed admissions are then about a node's time without devices / this.
 */
export const ADMISSION_INTERVAL_MS = Number(process.env["DPO_BENCH_ADMISSION_INTERVAL_MS"] ?? 100);
export const SCENARIOS = (process.env["DPO_BENCH_SCENARIOS"] ?? "baseline,surge,replace").split(",");
export const KUBELET_VERSION = "v1.37.0";
export const DEVICES = 4;
export const NAMESPACE = "dpo-system";
export const PLUGIN_IMAGE = "dpo:bench";
export const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
/** The rendering context the operator runs with below (its flags' defaults, --plugin-image dpo:bench). */
export const RENDER_CONTEXT: RenderContext = {
  namespace: NAMESPACE,
  operatorImage: PLUGIN_IMAGE,
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet",
};
export const ROLLOUT_TIMEOUT_MS = Math.max(600_000, NODE_COUNT * 20_000);
