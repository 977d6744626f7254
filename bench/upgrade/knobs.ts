// What bench-upgrade runs and how much: the DPO_BENCH_* environment knobs and the fixed names.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { RenderContext } from "../../src/operator/render/index.js";
import { deploymentMemoryLimit, memoryBytes } from "../memory-cgroup.js";

/** A whole number from the environment, at least `min`; anything else names the variable. */
export function intKnob(
  env: Readonly<Record<string, string | undefined>>,
  name: string,
  fallback: number,
  min = 0,
): number {
  const text = env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    throw new Error(`${name}: want a whole number >= ${min}, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * `spec.upgrade.maxUnavailable` as the knob gives it: a node count (`10`) or a share of the nodes
 * (`10%`), and the node count a plain DaemonSet's RollingUpdate gets for it (a share rounded up, as the
 * DaemonSet controller rounds maxUnavailable, and at least 1).
 */
export function maxUnavailableKnob(
  env: Readonly<Record<string, string | undefined>>,
  nodes: number,
): { dpo: number | string; nodes: number } {
  const name = "DPO_BENCH_MAX_UNAVAILABLE";
  const text = env[name] ?? "1";
  const percent = /^(\d+)%$/.exec(text);
  if (percent) {
    const share = Number(percent[1]);
    if (share < 1 || share > 100) throw new Error(`${name}: want 1% to 100%, got ${JSON.stringify(text)}`);
    return { dpo: text, nodes: Math.max(1, Math.ceil((nodes * share) / 100)) };
  }
  const count = intKnob(env, name, 1, 1);
  return { dpo: count, nodes: count };
}

export type PluginMode = "process" | "processless";

/** `process` (a real `dpo plugin` per plugin pod) or `processless` (see tools/kubelet-sim/README.md). */
export function pluginModeKnob(env: Readonly<Record<string, string | undefined>>): PluginMode {
  const text = env["DPO_BENCH_PLUGIN_MODE"] ?? "process";
  if (text !== "process" && text !== "processless") {
    throw new Error(`DPO_BENCH_PLUGIN_MODE: want process or processless, got ${JSON.stringify(text)}`);
  }
  return text;
}

const env = process.env;
export const NODE_COUNT = intKnob(env, "DPO_BENCH_NODES", 100, 1);
/** Nodes in flight at once, for dpo (spec.upgrade.maxUnavailable) and the baseline's RollingUpdate. */
export const MAX_UNAVAILABLE = maxUnavailableKnob(env, NODE_COUNT);
export const PLUGIN_MODE = pluginModeKnob(env);
/** Admissions in flight at once, each on its own node, round-robin over every node. */
export const WORKERS = intKnob(env, "DPO_BENCH_WORKERS", 2, 1);
/**
 * At most one admission per node per this many ms, so that a failure (which comes back at once) is not
 * retried in a tight loop: failed admissions are then about a node's time without devices / this.
 */
export const ADMISSION_INTERVAL_MS = intKnob(env, "DPO_BENCH_ADMISSION_INTERVAL_MS", 100);
/**
 * Pods a second that ask for one device through the API and the real scheduler (0: none), each deleted
 * SCHEDULED_HOLD_MS after it runs; the kubelet simulator admits or rejects them on their node.
 */
export const SCHEDULED_PODS_PER_S = intKnob(env, "DPO_BENCH_SCHEDULED_PODS_PER_S", 10);
export const SCHEDULED_HOLD_MS = intKnob(env, "DPO_BENCH_SCHEDULED_HOLD_MS", 1_000);
/** The scenarios a run may name, in the order they run. */
export const SCENARIO_NAMES = ["baseline", "surge", "replace", "standby", "takeover"] as const;

/** DPO_BENCH_SCENARIOS: a comma-separated subset of SCENARIO_NAMES; anything else names the variable. */
export function scenariosKnob(env: Readonly<Record<string, string | undefined>>): string[] {
  const list = (env["DPO_BENCH_SCENARIOS"] ?? "baseline,surge,replace").split(",");
  for (const name of list) {
    if (!(SCENARIO_NAMES as readonly string[]).includes(name)) {
      throw new Error(
        `DPO_BENCH_SCENARIOS: want a subset of ${SCENARIO_NAMES.join(",")}, got ${JSON.stringify(name)}`,
      );
    }
  }
  return list;
}

/**
 * DPO_BENCH_KUBELET_VERSION (default v1.37.0): every simulated kubelet's version. `standby` (strategy Auto,
 * the new plugin standing by) needs one before v1.37.0, which keeps one registration per resource; `takeover`
 * one from v1.37.0, where dpo's plugin registers beside the incumbent's (the incumbent's socket, which a
 * takeover on older kubelets waits for, is not simulated).
 */
export function kubeletVersionKnob(
  env: Readonly<Record<string, string | undefined>>,
  scenarios: readonly string[],
): string {
  const text = env["DPO_BENCH_KUBELET_VERSION"] ?? "v1.37.0";
  const m = /^v1\.(\d+)\.\d+$/.exec(text);
  if (m === null)
    throw new Error(`DPO_BENCH_KUBELET_VERSION: want v1.<minor>.<patch>, got ${JSON.stringify(text)}`);
  if (scenarios.includes("standby") && Number(m[1]) >= 37) {
    throw new Error(
      `DPO_BENCH_KUBELET_VERSION: the standby scenario needs a kubelet before v1.37.0 (one registration per resource), got ${text}`,
    );
  }
  if (scenarios.includes("takeover") && Number(m[1]) < 37) {
    throw new Error(
      `DPO_BENCH_KUBELET_VERSION: the takeover scenario needs a kubelet from v1.37.0 (dpo's plugin registers beside the incumbent), got ${text}`,
    );
  }
  return text;
}

export const SCENARIOS = scenariosKnob(env);
/**
 * dpo's spec.upgrade.progressDeadlineSeconds, per node: with hundreds of nodes in flight on a small machine a
 * wave's last nodes wait longer than the default for the control plane to hand them over.
 */
export const PROGRESS_DEADLINE_S = intKnob(env, "DPO_BENCH_PROGRESS_DEADLINE_S", 300, 30);
export const KUBELET_VERSION = kubeletVersionKnob(env, SCENARIOS);
export const DEVICES = 4;
export const NAMESPACE = "dpo-system";
/** Where the scheduled workload's pods go. */
export const WORKLOAD_NAMESPACE = "default";
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
/**
 * The operator Deployment's memory limit (config/manager/deployment.yaml) in MiB: the operator runs with that
 * Deployment's Node flags here, and its peak RSS over a rollout is held to the limit.
 */
export const OPERATOR_MEMORY_LIMIT_MIB = ((): number | undefined => {
  const manifest = readFileSync(
    join(import.meta.dirname, "..", "..", "config", "manager", "deployment.yaml"),
    "utf8",
  );
  const limit = deploymentMemoryLimit(manifest);
  return limit === undefined ? undefined : memoryBytes(limit) / 2 ** 20;
})();
/** How long the teardown after a failure may take before the process exits anyway. */
export const TEARDOWN_BUDGET_MS = 120_000;
