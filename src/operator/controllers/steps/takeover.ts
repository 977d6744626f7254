// Reconcile step of a takeover (ADR 0012): reads the incumbent DaemonSet, readies it to stand as the base
// revision of the config's rollout (model/takeover.ts), and hands the rollout what it needs to move nodes
// off it: the incumbent as a revision, its pods, and which nodes must wait for running pods to let go of the
// resource. Turns the rollout's writes to the incumbent into the three fields the takeover may change, and
// gives the incumbent back when its config is gone.
import type { V1DaemonSet, V1LabelSelector, V1Node, V1Pod } from "@kubernetes/client-node";
import type { DeviceNodeState } from "../../../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfig } from "../../../api/v1beta1/config.js";
import type { TakeoverStatus } from "../../../api/v1beta1/status.js";
import { configLabelValue } from "../../../contract/names.js";
import { DAEMON_SETS, isForbidden, isNotFound, PODS } from "../../../kube/index.js";
import {
  incumbentAsRevision,
  incumbentIn,
  incumbentRestored,
  INCUMBENT_REVISION,
  LABEL_TAKEOVER,
  parseTakeoverRecord,
  takenOverByOther,
} from "../../model/takeover.js";
import { nodeKeys } from "../../model/targeting.js";
import { extendedResourcesAskedFor } from "../../status/admission-rejections.js";
import { resolveMaxUnavailable } from "../../upgrade/planner.js";
import type { RolloutWrite } from "../../upgrade/rollout.js";
import type { StepDeps } from "../reconciler-deps.js";

/** What the rollout reads besides the config's own objects while the incumbent serves. */
export interface TakeoverInput {
  /** The live incumbent, readied (Serving): the rollout's writes naming its uid go through takeoverWrite. */
  incumbent: V1DaemonSet;
  /** The incumbent as the base revision, for decideRollout's daemonSets. */
  asRevision: V1DaemonSet;
  /** Its pods, for the rollout's pods. */
  pods: V1Pod[];
  /** One report per node where its pod runs and is ready, standing in for the report it does not write. */
  reports: DeviceNodeState[];
  /** deviceIds Different: the nodes that may not start yet, and why (RolloutInput.startHeld). */
  startHeld?: Map<string, string>;
}

export type TakeoverStep =
  /** No takeover, or one that is over: the rollout runs on the config's own DaemonSets. */
  | { kind: "Own"; status?: TakeoverStatus }
  | { kind: "Serving"; input: TakeoverInput; status: TakeoverStatus }
  /** The takeover cannot go on: nothing of the config's is written. */
  | { kind: "Stopped"; status: TakeoverStatus; retryMs?: number };

/** A takeover that failed comes back this often: the incumbent may appear, or a permission be granted. */
const STOPPED_RETRY_MS = 30_000;
/**
 * deviceIds Different: how many untouched nodes a pass asks for the pods on them, per node the rollout may
 * start. The planner takes untouched nodes in name order, so the first ones are the ones that count.
 */
const HOLDER_CHECKS_PER_SLOT = 4;

export async function prepareTakeover(
  deps: StepDeps,
  config: DevicePluginConfig,
  nodes: readonly V1Node[],
  ownedCount: number,
): Promise<TakeoverStep> {
  const takeover = config.spec.takeover;
  if (takeover === undefined) return { kind: "Own" };
  const { namespace, name } = takeover.daemonSet;
  const incumbentName = `${namespace}/${name}`;
  const configName = config.metadata.name;
  const previous = (config as { status?: { takeover?: TakeoverStatus } }).status?.takeover;
  const complete = (message?: string): TakeoverStep => ({
    kind: "Own",
    status: {
      incumbent: incumbentName,
      phase: "Complete",
      ...((message ?? previous?.message) !== undefined ? { message: message ?? previous!.message! } : {}),
    },
  });
  const stopped = (message: string): TakeoverStep => ({
    kind: "Stopped",
    status: { incumbent: incumbentName, phase: "Failed", message },
    retryMs: STOPPED_RETRY_MS,
  });
  let live: V1DaemonSet;
  try {
    live = await deps.objects.get<V1DaemonSet>(DAEMON_SETS, { name, namespace });
  } catch (err) {
    if (isNotFound(err)) {
      // Gone after the takeover started (or finished): the nodes it still ran lost it already, and dpo's
      // plugin is the one to serve them now. Never started: a wrong name, which must not put two plugins on
      // every node.
      if (previous?.phase === "Complete") return complete();
      if (ownedCount > 0)
        return complete(`the incumbent DaemonSet ${incumbentName} was deleted before the takeover ended`);
      return stopped(
        `the incumbent DaemonSet ${incumbentName} does not exist; no plugin of this config runs until it does`,
      );
    }
    if (isForbidden(err))
      return stopped(
        `the operator may not read the incumbent DaemonSet ${incumbentName}: grant it get and update on it (docs/takeover.md#permissions): ${(err as Error).message}`,
      );
    throw err;
  }
  const other = takenOverByOther(live, configName);
  if (other !== undefined)
    return stopped(
      `the incumbent DaemonSet ${incumbentName} is being taken over by DevicePluginConfig ${other}`,
    );

  const parked = parseTakeoverRecord(live)?.phase === "Parked" || previous?.phase === "Complete";
  const wanted = incumbentIn(live, configName, parked ? "Parked" : "Serving");
  if (wanted !== undefined) {
    try {
      live = await deps.objects.update(DAEMON_SETS, wanted);
    } catch (err) {
      if (isForbidden(err))
        return stopped(
          `the operator may not update the incumbent DaemonSet ${incumbentName}: grant it update on it (docs/takeover.md#permissions): ${(err as Error).message}`,
        );
      throw err;
    }
    deps.metrics.applies.inc({ kind: "DaemonSet" });
    deps.logger.info(
      { config: configName, daemonSet: incumbentName, phase: parked ? "Parked" : "Serving" },
      "incumbent DaemonSet readied for the takeover",
    );
  }
  if (parked) return complete();

  const pods = await listIncumbentPods(deps, live);
  const startHeld =
    takeover.deviceIds === "Different" ? await nodesHeld(deps, config, nodes, live, pods) : undefined;
  return {
    kind: "Serving",
    input: {
      incumbent: live,
      asRevision: incumbentAsRevision(live),
      pods,
      reports: pods.flatMap((p) => standInReport(p, configName, config.spec.resourceName)),
      ...(startHeld !== undefined ? { startHeld } : {}),
    },
    status: { incumbent: incumbentName, phase: "Progressing" },
  };
}

/**
 * A write of the rollout to the incumbent, as the takeover makes it: an update (a role or placement the
 * rollout would put back) is already what incumbentIn made it, so nothing; the delete that ends an upgrade
 * parks it instead. Returns undefined for writes to the config's own DaemonSets.
 */
export function takeoverWrite(
  write: RolloutWrite,
  input: TakeoverInput | undefined,
  configName: string,
): { kind: "Skip" } | { kind: "Park"; daemonSet: V1DaemonSet } | undefined {
  const uid = input?.incumbent.metadata?.uid;
  if (input === undefined || uid === undefined) return undefined;
  if (write.kind === "Update" && write.daemonSet.metadata?.uid === uid) return { kind: "Skip" };
  if (write.kind === "Delete" && write.uid === uid) {
    const parked = incumbentIn(input.incumbent, configName, "Parked");
    return parked === undefined ? { kind: "Skip" } : { kind: "Park", daemonSet: parked };
  }
  return undefined;
}

/**
 * The config is gone: every DaemonSet it took over gets its own fields back, and its pods come back on the
 * nodes dpo's plugin served. Returns when to come back if a write failed.
 */
export async function giveIncumbentsBack(deps: StepDeps, configName: string): Promise<number | undefined> {
  if (deps.objects.list === undefined) return undefined;
  let incumbents: V1DaemonSet[];
  try {
    incumbents = await deps.objects.list<V1DaemonSet>(DAEMON_SETS, undefined, {
      labelSelector: `${LABEL_TAKEOVER}=${configLabelValue(configName)}`,
    });
  } catch (err) {
    // Without the cluster-wide read the takeover's permissions grant, there is nothing to give back.
    if (isForbidden(err)) return undefined;
    throw err;
  }
  let retryMs: number | undefined;
  for (const ds of incumbents) {
    const restored = incumbentRestored(ds, configName);
    if (restored === undefined) continue;
    try {
      await deps.objects.update(DAEMON_SETS, restored);
      deps.logger.info(
        { config: configName, daemonSet: `${ds.metadata?.namespace}/${ds.metadata?.name}` },
        "incumbent DaemonSet given back: its config is gone",
      );
    } catch (err) {
      if (isNotFound(err)) continue;
      deps.logger.warn(
        { config: configName, daemonSet: ds.metadata?.name, err: String(err) },
        "cannot give the incumbent DaemonSet back yet",
      );
      retryMs = 1_000;
    }
  }
  return retryMs;
}

async function listIncumbentPods(deps: StepDeps, ds: V1DaemonSet): Promise<V1Pod[]> {
  if (deps.objects.list === undefined) return [];
  const uid = ds.metadata?.uid;
  const pods = await deps.objects.list<V1Pod>(PODS, ds.metadata?.namespace, {
    labelSelector: selectorText(ds.spec?.selector),
  });
  // The selector may match pods of another controller: only the DaemonSet's own are its plugin.
  return pods.filter((p) => (p.metadata?.ownerReferences ?? []).some((o) => o.uid === uid));
}

/** A label selector as the API's query parameter takes it. */
export function selectorText(selector: V1LabelSelector | undefined): string {
  const parts = Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of selector?.matchExpressions ?? []) {
    const values = (e.values ?? []).join(",");
    if (e.operator === "In") parts.push(`${e.key} in (${values})`);
    else if (e.operator === "NotIn") parts.push(`${e.key} notin (${values})`);
    else if (e.operator === "Exists") parts.push(e.key);
    else if (e.operator === "DoesNotExist") parts.push(`!${e.key}`);
  }
  return parts.join(",");
}

/**
 * The report the incumbent's plugin would write, where its pod runs and is ready: it says Registered, which
 * is what a rollback waits for before dpo's plugin leaves a node. A plugin's readiness is the best sign of
 * its registration the API has (most plugins register within a second of starting).
 */
function standInReport(pod: V1Pod, configName: string, resourceName: string): DeviceNodeState[] {
  const nodeName = pod.spec?.nodeName;
  const ready = (pod.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
  if (nodeName === undefined || pod.metadata?.deletionTimestamp || pod.status?.phase !== "Running" || !ready)
    return [];
  return [
    {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: { name: `${configName}.${nodeName}.incumbent` },
      spec: { configName, nodeName, resourceName, revision: INCUMBENT_REVISION },
      status: {
        registration: { state: "Registered" },
        ...(pod.metadata?.uid !== undefined ? { podUID: pod.metadata.uid } : {}),
        // Its count is not known: the gate keeps to the baseline it recorded.
        advertised: Number.MAX_SAFE_INTEGER,
        devices: [],
      },
    } as unknown as DeviceNodeState,
  ];
}

/**
 * deviceIds Different: the untouched nodes the rollout would start next, in its order (names), asked for
 * the pods on them; those where a pod that has not finished asks for the resource wait, with the pods named.
 * The rest of the untouched nodes are not asked in this pass and wait unreported.
 */
async function nodesHeld(
  deps: StepDeps,
  config: DevicePluginConfig,
  nodes: readonly V1Node[],
  incumbent: V1DaemonSet,
  incumbentPods: readonly V1Pod[],
): Promise<Map<string, string>> {
  const keys = nodeKeys(config.metadata.name);
  const resource = config.spec.resourceName;
  const untouched = nodes
    .filter((n) => {
      const labels = n.metadata?.labels ?? {};
      const revision = labels[keys.revision];
      return (revision === undefined || revision === INCUMBENT_REVISION) && labels[keys.surge] === undefined;
    })
    .map((n) => n.metadata?.name ?? "")
    .sort();
  const held = new Map<string, string>();
  const budget =
    resolveMaxUnavailable(config.spec.upgrade.maxUnavailable as number | `${number}%`, nodes.length) *
    HOLDER_CHECKS_PER_SLOT;
  const own = new Set(incumbentPods.map((p) => p.metadata?.uid));
  for (const [i, node] of untouched.entries()) {
    if (i >= budget || deps.objects.list === undefined) {
      held.set(node, "");
      continue;
    }
    const pods = await deps.objects.list<V1Pod>(PODS, undefined, { fieldSelector: `spec.nodeName=${node}` });
    const holders = pods.filter(
      (p) =>
        !own.has(p.metadata?.uid) &&
        p.status?.phase !== "Succeeded" &&
        p.status?.phase !== "Failed" &&
        extendedResourcesAskedFor(p).includes(resource),
    );
    if (holders.length > 0) {
      const names = holders.slice(0, 3).map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`);
      held.set(
        node,
        `${holders.length} pod(s) hold ${resource} under the ids of ${incumbent.metadata?.name} (${names.join(", ")}${holders.length > 3 ? ", ..." : ""}); with spec.takeover.deviceIds Different the node is handed over once none does`,
      );
    }
  }
  return held;
}
