// The truth the API-fault test holds the operator to: its two configs (A with a health file, B upgraded midway),
// every way a config's status can differ from what the nodes and the test know, and the wait until the plugin
// DaemonSets and pods stop moving.
import { AppsV1Api, CustomObjectsApi, CoreV1Api, type V1Node } from "@kubernetes/client-node";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { LABEL_CONFIG, configLabelValue } from "../../src/contract/names.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";
import { kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { NAMESPACE } from "./support.js";

export const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
export const HEALTH_FILE = "/run/dpo/e2e-faults-health.json";
export const TICK_LABEL = "e2e.dpo.dev/competing-writer";

export const kc = kubeConfigFromInjected();
export const custom = kc.makeApiClient(CustomObjectsApi);
export const core = kc.makeApiClient(CoreV1Api);
export const apps = kc.makeApiClient(AppsV1Api);

export interface Subject {
  name: string;
  resource: string;
  devices: number;
  idPrefix: string;
  healthFile?: string;
}
export const A: Subject = {
  name: uniqueName("e2e-faults-a"),
  resource: "faults.example/a",
  devices: 2,
  idPrefix: "fa",
  healthFile: HEALTH_FILE,
};
export const B: Subject = {
  name: uniqueName("e2e-faults-b"),
  resource: "faults.example/b",
  devices: 3,
  idPrefix: "fb",
};
export const SUBJECTS = [A, B];

/** Configs whose plugin the test upgrades, with the revision they ran before. */
export const upgradedFrom = new Map<string, string>();
/** The truth the test keeps: unhealthy device ids of config A per node (B has no health file). */
export const unhealthyA = new Map<string, string[]>();

export async function readConfig(name: string): Promise<{
  metadata: { generation: number; labels?: Record<string, string> };
  spec: Record<string, unknown>;
  status?: DevicePluginConfigStatus;
}> {
  return (await custom.getClusterCustomObject({ ...CONFIGS, name })) as never;
}

/** Every way a config's status can differ from the truth, empty when it matches. */
export async function differences(s: Subject, nodes: readonly string[]): Promise<string[]> {
  const config = await readConfig(s.name);
  const status = config.status;
  const out: string[] = [];
  const want = (what: string, got: unknown, expected: unknown): void => {
    if (JSON.stringify(got) !== JSON.stringify(expected))
      out.push(`${what}: ${JSON.stringify(got)}, want ${JSON.stringify(expected)}`);
  };
  const unhealthy = s === A ? [...unhealthyA.values()].reduce((n, ids) => n + ids.length, 0) : 0;
  const capacity = nodes.length * s.devices;
  want("observedGeneration", status?.observedGeneration, config.metadata.generation);
  want("nodes", status?.nodes && { ...status.nodes, summary: undefined }, {
    // In the order the API server gives the keys back (sorted).
    available: nodes.length,
    desired: nodes.length,
    ready: nodes.length,
    updated: nodes.length,
    summary: undefined,
  });
  want(
    "devices",
    status?.devices && {
      capacity: status.devices.capacity,
      allocatable: status.devices.allocatable,
      unhealthy: status.devices.unhealthy,
    },
    { capacity, allocatable: capacity - unhealthy, unhealthy },
  );
  const problems = (status?.problems ?? []).map(
    (p) => `${p.node} ${p.reason} ${(p.devices ?? []).join(",")}`,
  );
  const expectedProblems =
    s === A
      ? [...unhealthyA.entries()]
          .filter(([, ids]) => ids.length > 0)
          .sort(([a], [b]) => a.localeCompare(b))
          .map(([node, ids]) => `${node} UnhealthyDevices ${[...ids].sort().join(",")}`)
      : [];
  want("problems", problems, expectedProblems);
  // Every plugin upgrade finished: the current revision is the one the spec asks for, and for a config
  // whose plugin changed, not the one it ran before.
  want(
    "upgrade",
    status?.upgrade && [
      status.upgrade.phase,
      status.upgrade.currentRevision === status.upgrade.updateRevision,
    ],
    ["Complete", true],
  );
  const movedFrom = upgradedFrom.get(s.name);
  if (movedFrom !== undefined && status?.upgrade?.currentRevision === movedFrom)
    out.push(`upgrade: still on revision ${movedFrom}`);
  const condition = (type: string) => status?.conditions?.find((c) => c.type === type);
  want("Ready", condition("Ready")?.status, "True");
  want("Ready.observedGeneration", condition("Ready")?.observedGeneration, config.metadata.generation);
  want("Reconciling", condition("Reconciling")?.status, "False");
  want("Degraded", condition("Degraded")?.status, unhealthy > 0 ? "True" : "False");
  // The kubelets' side: what each node advertises (written by the simulator, not through the proxy).
  for (const node of nodes) {
    const n: V1Node = await core.readNode({ name: node });
    const bad = s === A ? (unhealthyA.get(node) ?? []).length : 0;
    want(`${node} allocatable`, n.status?.allocatable?.[s.resource], String(s.devices - bad));
  }
  return out;
}

/**
 * Waits until the world stops moving and returns when it last changed: every config runs a single
 * DaemonSet, B's of the new revision, and each of them has a Ready pod on every node (as the kubelets
 * wrote it, read from the API).
 */
export async function worldSettled(nodes: readonly string[]): Promise<number> {
  let lastChange = Date.now();
  let lastSeen = "";
  await waitFor(
    "the plugin DaemonSets and pods to settle",
    async (observe) => {
      const pods = await core.listNamespacedPod({ namespace: NAMESPACE, labelSelector: LABEL_CONFIG });
      const sets = await apps.listNamespacedDaemonSet({ namespace: NAMESPACE, labelSelector: LABEL_CONFIG });
      const view = SUBJECTS.map((s) => {
        const label = configLabelValue(s.name);
        const revisions = sets.items
          .filter((d) => d.metadata?.labels?.[LABEL_CONFIG] === label)
          .map((d) => d.metadata?.labels?.[LABEL_REVISION] ?? "");
        const ready = pods.items.filter(
          (p) =>
            p.metadata?.labels?.[LABEL_CONFIG] === label &&
            p.metadata?.deletionTimestamp === undefined &&
            (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True"),
        ).length;
        return { config: s.name, revisions, ready };
      });
      const seen = JSON.stringify(view);
      if (seen !== lastSeen) {
        lastSeen = seen;
        lastChange = Date.now();
      }
      observe(view);
      return view.every(
        (v) =>
          v.revisions.length === 1 &&
          v.ready === nodes.length &&
          (v.config !== B.name || v.revisions[0] !== upgradedFrom.get(B.name)),
      );
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );
  return lastChange;
}

export const delta = (
  after: Record<string, number>,
  before: Record<string, number>,
): Record<string, number> =>
  Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
export const total = (counts: Record<string, number>): number =>
  Object.values(counts).reduce((a, b) => a + b, 0);
