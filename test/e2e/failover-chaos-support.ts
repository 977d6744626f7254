// What the failover chaos test is made of: the rollouts it interrupts (a scenario: the spec, and the steps a
// node goes through as its Node object shows them), the seeded list of cases (a step to SIGKILL the leader
// at, a point to delete the config at), and the end states it checks from the API alone: a deleted config's
// marks, then its DaemonSets, plugin pods and reports, all gone; a live one's rollout finished, every node unfenced and served
// by exactly one plugin pod (ADR 0009).
import type { AppsV1Api, CoreV1Api, CustomObjectsApi, V1Node } from "@kubernetes/client-node";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import { parseNodeRecordText } from "../../src/contract/node-upgrade.js";
import { configLabelValue, LABEL_CONFIG } from "../../src/contract/names.js";
import { NO_REVISION, nodeKeys } from "../../src/operator/model/targeting.js";
import { marksOf } from "../../src/operator/upgrade/node-marks.js";
import { mulberry32 } from "../fuzz/rng.js";

/**
 * The rollouts a leader is killed in. A takeover of an incumbent plugin (issue 32 item 1) is the next
 * scenario: its spec, its steps (as the Nodes and the incumbent's DaemonSet show them) and its cases join
 * this table, and the end-state checks gain the incumbent's side.
 */
export type ScenarioName = "Replace" | "Surge";

export interface Scenario {
  name: ScenarioName;
  /** The spec's `upgrade`. */
  upgrade: Record<string, unknown>;
  /** The steps a node goes through, in order. */
  steps: readonly string[];
  /** The index in `steps` of the step a node is at in the upgrade under way, or -1 before the first. */
  stepOf(node: V1Node, config: string): number;
}

function nodeState(node: V1Node, config: string) {
  const keys = nodeKeys(config);
  const labels = node.metadata?.labels ?? {};
  return {
    revision: labels[keys.revision],
    surge: labels[keys.surge],
    fenced: (node.spec?.taints ?? []).some((t) => t.key === keys.replace),
    // Each round's config is new, and upgraded once: any record is of that upgrade.
    record: parseNodeRecordText(node.metadata?.annotations?.[keys.upgrade]),
  };
}

export const SCENARIOS: Readonly<Record<ScenarioName, Scenario>> = {
  Replace: {
    name: "Replace",
    upgrade: { strategy: "Replace", maxUnavailable: 1, progressDeadlineSeconds: 120 },
    // Fence and record on; the old plugin off (no revision runs); the new one on, still fenced; fence off.
    steps: ["fenced", "stopped", "started", "unfenced"],
    stepOf(node, config) {
      const s = nodeState(node, config);
      if (s.record === undefined) return -1;
      if (s.revision === s.record.to) return s.fenced ? 2 : 3;
      if (s.revision === NO_REVISION) return 1;
      return s.fenced ? 0 : -1;
    },
  },
  Surge: {
    name: "Surge",
    upgrade: { strategy: "Surge", maxUnavailable: 1, progressDeadlineSeconds: 120 },
    // The new plugin beside the old one; the old one gone.
    steps: ["surged", "moved"],
    stepOf(node, config) {
      const s = nodeState(node, config);
      if (s.record === undefined) return -1;
      if (s.surge === s.record.to || (s.revision === s.record.to && s.surge !== undefined)) return 0;
      return s.revision === s.record.to ? 1 : -1;
    },
  },
};

/**
 * When the config is deleted: not at all (the rollout must finish, then it is deleted with a leader
 * running), just before the leader is killed, after the kill while the standby waits out the lease, once a
 * replica leads again, or with every replica down (an operator upgrade that replaces all its pods): the
 * config is deleted and garbage collection removes what it owned (DaemonSets, pods, reports) before any
 * replica starts again, so no operator ever sees the config or the delete.
 */
export const DELETE_POINTS = ["never", "beforeKill", "leaderless", "afterRestart", "operatorDown"] as const;
export type DeletePoint = (typeof DELETE_POINTS)[number];

export interface FailoverCase {
  scenario: ScenarioName;
  /** The step the leader is killed at: the first node event at it or past it. */
  step: string;
  deleteAt: DeletePoint;
}

/** The case issue 32 names: a config deleted, while no operator runs, after the first step of a Replace. */
export const FENCE_LEFT_BEHIND: FailoverCase = {
  scenario: "Replace",
  step: "fenced",
  deleteAt: "operatorDown",
};

/**
 * `rounds` cases for `seed`: the case first, then every combination of scenario, step and delete
 * point in the seed's order, over again as often as `rounds` needs. The same seed gives the same cases.
 */
export function failoverCases(seed: number, rounds: number): FailoverCase[] {
  const all: FailoverCase[] = Object.values(SCENARIOS).flatMap((s) =>
    s.steps.flatMap((step) => DELETE_POINTS.map((deleteAt) => ({ scenario: s.name, step, deleteAt }))),
  );
  const random = mulberry32(seed);
  const cases: FailoverCase[] = [FENCE_LEFT_BEHIND];
  while (cases.length < rounds) {
    const order = [...all];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    cases.push(...order);
  }
  return cases.slice(0, rounds);
}

export function describeCase(c: FailoverCase): string {
  return `${c.scenario}, leader killed at ${c.step}, config deleted ${c.deleteAt}`;
}

/** The marks (NODE_MARKS) a config has on Nodes, as `node: place key`. Empty once every one is off. */
export async function marksLeft(core: CoreV1Api, config: string): Promise<string[]> {
  const nodes = await core.listNode();
  return nodes.items.flatMap((n) =>
    marksOf(n, config).map((m) => `${n.metadata?.name}: ${m.place} ${m.key}`),
  );
}

/**
 * A deleted config's plugin DaemonSets, pods and reports, which garbage collection removes (the DaemonSets
 * and reports are owned by the config, the pods by their DaemonSet). Empty once they are gone.
 */
export async function pluginObjectsLeft(
  core: CoreV1Api,
  apps: AppsV1Api,
  custom: CustomObjectsApi,
  namespace: string,
  config: string,
): Promise<string[]> {
  const selector = `${LABEL_CONFIG}=${configLabelValue(config)}`;
  const [sets, pods, reports] = await Promise.all([
    apps.listNamespacedDaemonSet({ namespace, labelSelector: selector }),
    core.listNamespacedPod({ namespace, labelSelector: selector }),
    custom.listNamespacedCustomObject({
      group: "dpo.dev",
      version: "v1beta1",
      plural: "devicenodestates",
      namespace,
    }) as Promise<{ items: DeviceNodeState[] }>,
  ]);
  return [
    ...sets.items.map((ds) => `DaemonSet ${ds.metadata?.name}`),
    ...pods.items.map((p) => `pod ${p.metadata?.name} on ${p.spec?.nodeName}`),
    ...reports.items.filter((r) => r.spec.configName === config).map((r) => `report ${r.metadata?.name}`),
  ];
}

/**
 * Why a live config's nodes are not served as they should be after its rollout: a node still fenced, or
 * not exactly one running plugin pod of the config (none being deleted) on it. Empty when every node is.
 */
export async function servingProblems(
  core: CoreV1Api,
  namespace: string,
  config: string,
  nodes: readonly string[],
): Promise<string[]> {
  const keys = nodeKeys(config);
  const selector = `${LABEL_CONFIG}=${configLabelValue(config)}`;
  const [nodeList, pods] = await Promise.all([
    core.listNode(),
    core.listNamespacedPod({ namespace, labelSelector: selector }),
  ]);
  const problems: string[] = [];
  for (const name of nodes) {
    const node = nodeList.items.find((n) => n.metadata?.name === name);
    if ((node?.spec?.taints ?? []).some((t) => t.key === keys.replace)) problems.push(`${name}: fenced`);
    const serving = pods.items.filter((p) => p.spec?.nodeName === name);
    const running = serving.filter((p) => p.status?.phase === "Running" && !p.metadata?.deletionTimestamp);
    if (running.length !== 1 || serving.length !== 1)
      problems.push(`${name}: ${running.length} running plugin pods of ${serving.length}`);
  }
  return problems;
}
