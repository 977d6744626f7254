// Reconcile step: the plugin's ConfigMap and DaemonSets, moved one rollout step (upgrade/rollout.ts
// decides the writes), or removed while the config yields its resource name to another.
import type { V1Node } from "@kubernetes/client-node";
import { API_VERSION, KIND, type DevicePluginConfig } from "../../../api/v1beta1/config.js";
import {
  CONFIG_MAPS,
  DAEMON_SETS,
  isAlreadyExists,
  isConflict,
  isForbidden,
  isInvalid,
  isNotFound,
  NODES,
  type ApplyObject,
} from "../../../kube/index.js";
import { configLabelValue } from "../../../contract/names.js";
import { containsDesired } from "../../model/drift.js";
import { LABEL_REVISION } from "../../model/names.js";
import { pluginRunsOnNode, type Targeting } from "../../model/targeting.js";
import type { DesiredRevision } from "../../model/rollout.js";
import type { NodePatch } from "../../upgrade/node-labels.js";
import { decideRollout, type RolloutDecision, type RolloutInput } from "../../upgrade/rollout.js";
import { DaemonSetWriteExpectations, NodeWriteExpectations } from "./node-write-expectations.js";
import { CatchUpWaits } from "./cache-catch-up.js";
import { deleteNodeSlices } from "./dra-objects.js";
import { prepareTakeover, takeoverWrite } from "./takeover.js";
import type { TakeoverStatus } from "../../../api/v1beta1/status.js";

import { INDEX_BY_CONFIG, WRITE_CONFLICT_RETRY_MS, type StepDeps } from "../reconciler-deps.js";
import { ownedDaemonSets, ownedConfigMaps } from "../owned-objects.js";

/** What the pass observed besides the config's own objects, for the rollout (RolloutInput). */
export interface WorkloadFacts extends Pick<RolloutInput, "publishedDevices" | "sliceDevices" | "mapping"> {
  /** The config's node selector terms as decided among the configs of its resource name. */
  targeting?: Targeting | undefined;
}

export interface WorkloadOutcome {
  /** Why a write failed for good (Forbidden, Invalid): for the status, not a retry. */
  applyError?: string;
  /** Undefined when nothing was decided (a takeover that cannot go on). */
  decision: RolloutDecision | undefined;
  retryMs?: number;
  /** spec.takeover's progress, when the config has one. */
  takeover?: TakeoverStatus;
}

/**
 * Moves the plugin DaemonSets one step (see upgrade/rollout.ts): the current revision's ConfigMap
 * first, then the rollout's writes in order, then ConfigMaps of revisions that are gone. A write that
 * loses a race (409) stops the pass and comes back soon; Forbidden and Invalid do not heal by retrying
 * and are returned for the status.
 */
export async function applyPluginWorkloads(
  deps: StepDeps,
  config: DevicePluginConfig,
  desired: DesiredRevision,
  nodes: readonly V1Node[],
  facts: WorkloadFacts = {},
): Promise<WorkloadOutcome> {
  const { targeting, publishedDevices, ...switchFacts } = facts;
  const name = config.metadata.name;
  const ns = deps.render.namespace;
  const pending = expectations.pending(deps, name).size;
  const targeted = nodes.filter((n) => pluginRunsOnNode(n, config.spec, targeting));
  const owned = ownedDaemonSets(deps, name);
  const takeover = await prepareTakeover(deps, config, targeted, owned.length);
  if (takeover.kind === "Stopped")
    return {
      decision: undefined,
      takeover: takeover.status,
      ...(takeover.retryMs !== undefined ? { retryMs: takeover.retryMs } : {}),
    };
  const serving = takeover.kind === "Serving" ? takeover.input : undefined;
  const decision = decideRollout({
    desired,
    daemonSets: serving === undefined ? owned : [serving.asRevision, ...owned],
    nodes: targeted,
    pods: [...deps.pods.byIndex(INDEX_BY_CONFIG, configLabelValue(name)), ...(serving?.pods ?? [])],
    reports: [...deps.reports.byIndex(INDEX_BY_CONFIG, name), ...(serving?.reports ?? [])],
    ...(serving?.startHeld !== undefined ? { startHeld: serving.startHeld } : {}),
    publishedDevices,
    ...switchFacts,
    ...(deps.fenceSettleMs !== undefined ? { fenceSettleMs: deps.fenceSettleMs } : {}),
    now: deps.now().getTime(),
    recordTimes: deps.recordClock.forPass(name),
  });
  let takeoverStatus = takeover.status;
  const out = (o: Omit<WorkloadOutcome, "takeover">): WorkloadOutcome => ({
    ...o,
    ...(takeoverStatus !== undefined ? { takeover: takeoverStatus } : {}),
  });
  const configMap = desired.configMap as ApplyObject;
  const fail = (kind: string, objectName: string, err: unknown) => {
    deps.metrics.applyErrors.inc({ kind });
    return `${kind} ${ns}/${objectName}: ${(err as Error).message}`;
  };
  try {
    if (!containsDesired(configMap, deps.configMaps.get(configMap.metadata.name, ns))) {
      await deps.applier.apply(configMap);
      deps.metrics.applies.inc({ kind: "ConfigMap" });
      deps.logger.info({ config: name, kind: "ConfigMap", name: configMap.metadata.name }, "applied");
    }
  } catch (err) {
    if (isForbidden(err) || isInvalid(err)) {
      return out({ applyError: fail("ConfigMap", configMap.metadata.name, err), decision });
    }
    throw err;
  }
  const conflicted = conflicts.pending(deps, name);
  const behind =
    // The cache has not yet shown every Node this config's last pass wrote: a plan from it could start a
    // node twice or count fewer nodes in flight than there are.
    (pending > 0 && decision.writes.some((w) => w.kind === "PatchNode")) ||
    // A DaemonSet write met a 409 and the cache still shows the version it was planned from: the same
    // write would meet the same 409.
    (conflicted.size > 0 &&
      decision.writes.some((w) => w.kind === "Update" && conflicted.has(w.daemonSet.metadata?.name ?? "")));
  // Wait for the watch to catch up, longer with each pass that finds it still behind (it may be down).
  const catchUpMs = catchUp.next(deps, name, behind);
  if (catchUpMs !== undefined) return out({ decision, retryMs: catchUpMs });
  const patched = await patchNodes(
    deps,
    name,
    decision.writes.flatMap((w) => (w.kind === "PatchNode" ? [w] : [])),
  );
  if (patched !== undefined) return out({ decision, ...patched });
  for (const write of decision.writes) {
    if (write.kind === "PatchNode") continue;
    if (write.kind === "DeleteSlices") {
      await deleteNodeSlices(deps, name, write.node);
      continue;
    }
    const dsName = write.kind === "Delete" ? write.name : (write.daemonSet.metadata?.name ?? "");
    const incumbentWrite = takeoverWrite(write, serving, name);
    try {
      if (incumbentWrite?.kind === "Skip") continue;
      if (incumbentWrite?.kind === "Park") {
        await deps.objects.update(DAEMON_SETS, incumbentWrite.daemonSet);
        deps.metrics.applies.inc({ kind: "DaemonSet" });
        deps.logger.info(
          { config: name, daemonSet: dsName },
          "takeover complete: the incumbent runs no node",
        );
        if (takeoverStatus !== undefined) takeoverStatus = { ...takeoverStatus, phase: "Complete" };
        continue;
      }
      if (write.kind === "Create") {
        await deps.objects.create(DAEMON_SETS, write.daemonSet);
      } else if (write.kind === "Update") {
        await deps.objects.update(DAEMON_SETS, write.daemonSet);
      } else {
        await deps.objects.delete(DAEMON_SETS, { name: dsName, namespace: ns }, { uid: write.uid });
      }
      deps.metrics.applies.inc({ kind: "DaemonSet" });
      deps.logger.info({ config: name, daemonSet: dsName, write: write.kind }, "plugin DaemonSet written");
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err) || isNotFound(err)) {
        const plannedFrom = write.kind === "Update" ? write.daemonSet.metadata?.resourceVersion : undefined;
        if (isConflict(err) && plannedFrom !== undefined) conflicts.expect(deps, name, dsName, plannedFrom);
        deps.logger.debug(
          { config: name, daemonSet: dsName, write: write.kind, err: String(err) },
          "lost a race writing a plugin DaemonSet; planning again from the cache",
        );
        return out({ decision, retryMs: WRITE_CONFLICT_RETRY_MS });
      }
      if (isForbidden(err) || isInvalid(err))
        return out({ applyError: fail("DaemonSet", dsName, err), decision });
      throw err;
    }
  }
  const involved = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name, uid: config.metadata.uid },
  };
  for (const e of decision.events) void deps.events.record(involved, e.type, e.reason, e.message);
  await deleteUnusedConfigMaps(deps, name, decision.liveRevisions, decision.writes);
  return out({
    decision,
    ...(decision.requeueAfterMs !== undefined ? { retryMs: decision.requeueAfterMs } : {}),
  });
}

/** How long each config's passes wait for the caches to show this operator's own writes. */
const catchUp = new CatchUpWaits();

/**
 * The Nodes each config's rollout passes wrote, or met a 409 on (client-go's expectations): either way
 * the next plan waits until the cache shows a newer version of them.
 */
const expectations = new NodeWriteExpectations();
/** The DaemonSets each config's passes met a 409 on, with the version the write was planned from. */
const conflicts = new DaemonSetWriteExpectations();

/** Drops what the rollout keeps of a config that is gone: no pass of it will come to prune it. */
export function forgetRolloutWrites(deps: StepDeps, name: string): void {
  expectations.forget(deps, name);
  conflicts.forget(deps, name);
  deps.recordClock.forget(name);
}

/** Configs whose rollout writes the caches have yet to show (the state kept per config, for its bound). */
export function rolloutWritesPending(deps: StepDeps): number {
  return expectations.configs(deps) + conflicts.configs(deps);
}

/** Node patches of one pass in flight at once. */
export const NODE_PATCH_CONCURRENCY = 16;

type PatchOutcome = { retryMs: number } | { applyError: string } | undefined;

/**
 * The pass's Node patches, before any DaemonSet write: the ordered ones (failure marks) one by one, then
 * the rest NODE_PATCH_CONCURRENCY at a time (each is one node's whole step, atomic on its own). At 500
 * nodes in flight one at a time would take most of a minute per step. The first patch that fails ends
 * the pass once the patches in flight with it are answered; a refusal for good wins over a lost race.
 */
async function patchNodes(
  deps: StepDeps,
  config: string,
  writes: readonly { patch: NodePatch; ordered?: true }[],
): Promise<PatchOutcome> {
  for (const w of writes.filter((x) => x.ordered === true)) {
    const outcome = await patchNode(deps, config, w.patch);
    if (outcome !== undefined) return outcome;
  }
  const rest = writes.filter((x) => x.ordered !== true);
  for (let i = 0; i < rest.length; i += NODE_PATCH_CONCURRENCY) {
    const batch = rest.slice(i, i + NODE_PATCH_CONCURRENCY);
    const outcomes = await Promise.all(batch.map((w) => patchNode(deps, config, w.patch)));
    const failed = outcomes.find((o) => o !== undefined && "applyError" in o) ?? outcomes.find((o) => o);
    if (failed !== undefined) return failed;
  }
  return undefined;
}

/**
 * One Node patch of the rollout: its revision labels and upgrade record. A conflict (the Node changed
 * since the cache showed it) stops the pass and comes back soon; the patch is planned again from a
 * fresh view. Forbidden (the RBAC or the admission policy that limits the operator's Node writes) is
 * for the status.
 */
async function patchNode(deps: StepDeps, config: string, patch: NodePatch): Promise<PatchOutcome> {
  try {
    await deps.objects.patch(NODES, { name: patch.node }, "merge", patch.body);
    if (patch.resourceVersion !== undefined)
      expectations.expect(deps, config, patch.node, patch.resourceVersion);
    deps.metrics.applies.inc({ kind: "Node" });
    deps.logger.info(
      {
        config,
        node: patch.node,
        labels: patch.body.metadata.labels,
        // What else the patch changed, so the writes of one node's upgrade can be told apart in the log.
        ...(patch.body.metadata.annotations !== undefined ? { record: true } : {}),
        ...(patch.body.spec !== undefined ? { taints: patch.body.spec.taints?.length ?? 0 } : {}),
      },
      "node labels for the plugin's revisions written",
    );
    return undefined;
  } catch (err) {
    if (isConflict(err) || isNotFound(err)) {
      if (isConflict(err) && patch.resourceVersion !== undefined)
        expectations.expect(deps, config, patch.node, patch.resourceVersion);
      deps.logger.debug(
        { config, node: patch.node, err: String(err) },
        "lost a race writing a node's revision labels; planning again from the cache",
      );
      return { retryMs: WRITE_CONFLICT_RETRY_MS };
    }
    if (isForbidden(err) || isInvalid(err)) {
      deps.metrics.applyErrors.inc({ kind: "Node" });
      return { applyError: `Node ${patch.node}: ${(err as Error).message}` };
    }
    throw err;
  }
}

/** ConfigMaps of revisions no DaemonSet runs any more (deleted by this pass, or earlier). */
async function deleteUnusedConfigMaps(
  deps: StepDeps,
  name: string,
  live: ReadonlySet<string>,
  writes: RolloutDecision["writes"],
): Promise<void> {
  const deleted = new Set(writes.flatMap((w) => (w.kind === "Delete" ? [w.revision] : [])));
  for (const cm of ownedConfigMaps(deps, name)) {
    const revision = cm.metadata?.labels?.[LABEL_REVISION] ?? "";
    if (live.has(revision) && !deleted.has(revision)) continue;
    const cmName = cm.metadata?.name ?? "";
    try {
      await deps.objects.delete(
        CONFIG_MAPS,
        { name: cmName, namespace: deps.render.namespace },
        { uid: cm.metadata?.uid || undefined },
      );
      deps.logger.info(
        { config: name, configMap: cmName },
        "deleted the ConfigMap of a revision that is gone",
      );
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }
}

/** A config that lost a resource-name conflict must not run: delete its DaemonSets and ConfigMaps. */
export async function removePluginWorkloads(deps: StepDeps, name: string): Promise<void> {
  const namespace = deps.render.namespace;
  const targets = [
    ...ownedDaemonSets(deps, name).map((ds) => ({
      ref: DAEMON_SETS,
      kind: "DaemonSet",
      name: ds.metadata?.name ?? "",
    })),
    ...ownedConfigMaps(deps, name).map((cm) => ({
      ref: CONFIG_MAPS,
      kind: "ConfigMap",
      name: cm.metadata?.name ?? "",
    })),
  ];
  for (const target of targets) {
    try {
      await deps.objects.delete(target.ref, { name: target.name, namespace });
      deps.logger.info(
        { config: name, kind: target.kind, name: target.name },
        "deleted: the config yields to an older one for its resource name",
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
}
