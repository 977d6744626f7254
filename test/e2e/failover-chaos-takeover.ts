// The takeover rounds of the failover chaos test (issue 32 item 3, ADR 0012): an incumbent plugin DaemonSet
// dpo does not own, serving the round's resource on every simulated node (a `dpo plugin` run from a
// DaemonSet of its own in kube-system, as test/e2e/takeover.test.ts makes it, with a rolling update as
// charts make them), the steps of a takeover as the incumbent and the Nodes show them, and the end states
// from the API alone: the incumbent given back (its own three fields, no record, one pod of it on every node)
// or parked (no pod of it left) with dpo's plugin on every node.
import type { AppsV1Api, CoreV1Api, V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { DevicePluginConfigSchema } from "../../src/api/v1beta1/config.js";
import {
  ANNOTATION_TAKEOVER,
  INCUMBENT_REVISION,
  LABEL_TAKEOVER,
  parseTakeoverRecord,
} from "../../src/operator/model/takeover.js";
import { nodeKeys } from "../../src/operator/model/targeting.js";
import { renderRevision } from "../../src/operator/render/index.js";

export const INCUMBENT_NAMESPACE = "kube-system";
export const INCUMBENT_IDS = ["Dev-1", "Dev-2"];

/** The three fields of the incumbent a takeover changes (ADR 0012), as JSON: given back, they read the same. */
export function ownFields(ds: V1DaemonSet): string {
  const pod = ds.spec?.template.spec;
  return JSON.stringify({
    updateStrategy: ds.spec?.updateStrategy ?? null,
    affinity: pod?.affinity ?? null,
    tolerations: pod?.tolerations ?? null,
  });
}

/** The incumbent plugin of `resource`: its DaemonSet and its ConfigMap, both named `name`. */
export function incumbentObjects(
  name: string,
  resource: string,
): { daemonSet: V1DaemonSet; configMap: object } {
  const phantom = DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-none" },
    spec: { resourceName: resource, backend: { type: "Mock", mock: { devices: 2, ids: INCUMBENT_IDS } } },
  });
  const desired = renderRevision(phantom, {
    namespace: INCUMBENT_NAMESPACE,
    operatorImage: "dpo:e2e",
    pluginServiceAccount: "default",
    registrationMode: "kubelet",
  });
  const daemonSet = structuredClone(desired.daemonSets.base);
  daemonSet.metadata = { name, namespace: INCUMBENT_NAMESPACE, labels: { app: name } };
  daemonSet.spec!.updateStrategy = { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } };
  delete daemonSet.spec!.template.spec!.affinity;
  const configMap = structuredClone(desired.configMap);
  delete configMap.metadata!.ownerReferences;
  return { daemonSet, configMap };
}

/** The config's spec.takeover for the incumbent `name`. */
export function takeoverSpec(name: string): Record<string, unknown> {
  return { daemonSet: { namespace: INCUMBENT_NAMESPACE, name }, deviceIds: "Same" };
}

/**
 * The step of a takeover (Surge on v1.37 kubelets) the incumbent and one node show: readied (the incumbent
 * carries the takeover's record, serving), surged (dpo's plugin beside the incumbent's on the node), moved
 * (the node is dpo's, the incumbent's pod gone there), parked (every node dpo's, the incumbent runs none).
 */
export const TAKEOVER_STEPS = ["readied", "surged", "moved", "parked"] as const;

export function takeoverStepOf(node: V1Node, config: string, incumbent: V1DaemonSet | undefined): number {
  const record = parseTakeoverRecord(incumbent);
  if (record === undefined || record.config !== config) return -1;
  if (record.phase === "Parked") return 3;
  const keys = nodeKeys(config);
  const labels = node.metadata?.labels ?? {};
  if (labels[keys.surge] !== undefined) return 1;
  const revision = labels[keys.revision];
  if (revision !== undefined && revision !== INCUMBENT_REVISION) return 2;
  return 0;
}

export async function readIncumbent(apps: AppsV1Api, name: string): Promise<V1DaemonSet | undefined> {
  return apps.readNamespacedDaemonSet({ name, namespace: INCUMBENT_NAMESPACE }).catch(() => undefined);
}

/** Per node, the incumbent's pods there: how many run and are not being deleted, of how many. */
async function incumbentPodsPerNode(
  core: CoreV1Api,
  name: string,
  nodes: readonly string[],
): Promise<Map<string, { running: number; all: number }>> {
  // Its pods by their owner: the template's labels are the rendered plugin's, not the DaemonSet's own.
  const pods = (await core.listNamespacedPod({ namespace: INCUMBENT_NAMESPACE })).items.filter((p) =>
    (p.metadata?.ownerReferences ?? []).some((o) => o.kind === "DaemonSet" && o.name === name),
  );
  return new Map(
    nodes.map((node) => {
      const on = pods.filter((p) => p.spec?.nodeName === node);
      const running = on.filter((p) => p.status?.phase === "Running" && !p.metadata?.deletionTimestamp);
      return [node, { running: running.length, all: on.length }];
    }),
  );
}

/**
 * Why the incumbent is not given back as ADR 0012 says a deleted config leaves it: its three fields not
 * `own` (ownFields as it was created), the record or label still on, or not exactly one running pod of it
 * on a node. Empty when it is.
 */
export async function incumbentNotGivenBack(
  core: CoreV1Api,
  apps: AppsV1Api,
  name: string,
  own: string,
  nodes: readonly string[],
): Promise<string[]> {
  const ds = await readIncumbent(apps, name);
  if (ds === undefined) return [`the incumbent ${name} is gone`];
  const problems: string[] = [];
  if (ds.metadata?.annotations?.[ANNOTATION_TAKEOVER] !== undefined)
    problems.push("its takeover record is on");
  if (ds.metadata?.labels?.[LABEL_TAKEOVER] !== undefined) problems.push("its takeover label is on");
  if (ownFields(ds) !== own) problems.push(`its fields are ${ownFields(ds)}, not its own ${own}`);
  for (const [node, { running, all }] of await incumbentPodsPerNode(core, name, nodes))
    if (running !== 1 || all !== 1) problems.push(`${node}: ${running} running incumbent pods of ${all}`);
  return problems;
}

/** Why the incumbent is not parked after a takeover that completed: its record, or a pod of it left. */
export async function incumbentNotParked(
  core: CoreV1Api,
  apps: AppsV1Api,
  name: string,
  config: string,
  nodes: readonly string[],
): Promise<string[]> {
  const record = parseTakeoverRecord(await readIncumbent(apps, name));
  const problems: string[] = [];
  if (record?.config !== config || record.phase !== "Parked")
    problems.push(`its record is ${JSON.stringify(record)}`);
  for (const [node, { all }] of await incumbentPodsPerNode(core, name, nodes))
    if (all !== 0) problems.push(`${node}: ${all} incumbent pods`);
  return problems;
}
