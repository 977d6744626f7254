// The three ways a plugin upgrade is measured: dpo with Surge, dpo with Replace, and a plain DaemonSet's
// RollingUpdate with no operator.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1DaemonSet,
  type V1Node,
} from "@kubernetes/client-node";
import { API_VERSION, KIND } from "../../src/api/v1beta1/config.js";
import { configLabelValue } from "../../src/contract/names.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { DAEMON_SETS } from "../../src/kube/resources.js";
import { LABEL_REVISION, pluginObjectName } from "../../src/operator/model/names.js";
import { waitFor } from "../../tools/cluster/wait.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { isConflict } from "../../src/kube/errors.js";
import { plainPluginRevision, type PlainPluginRevision } from "../../tools/upgrade-load/plain-plugin.js";
import { DEVICES, GROUP, MAX_UNAVAILABLE, NAMESPACE, PROGRESS_DEADLINE_S, RENDER_CONTEXT } from "./knobs.js";
import { formatScaleFigures, startScaleFigures } from "./scale-figures.js";
import {
  allOnRevision,
  measure,
  settledMemAvailable,
  toResult,
  waitAllAdvertise,
  waitPluginsGone,
  type Result,
} from "./rollout.js";

/** dpo moves the config's nodes to a new revision (spec.plugin.logLevel changes) with `strategy`. */
export async function dpoScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  scenario: "surge" | "replace" | "standby",
  operator: { pid: number; log: string },
): Promise<Result> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  // standby: Auto on kubelets before v1.37.0, where a node is replaced with the new plugin standing by.
  const strategy = scenario === "surge" ? "Surge" : scenario === "replace" ? "Replace" : "Auto";
  const name = `bench-${scenario}`;
  const resource = `upgrade-bench.example/${scenario}`;
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name },
      spec: {
        resourceName: resource,
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "b" } },
        upgrade: {
          strategy,
          maxUnavailable: MAX_UNAVAILABLE.dpo,
          progressDeadlineSeconds: PROGRESS_DEADLINE_S,
        },
      },
    },
  });
  type Status = {
    upgrade?: {
      phase?: string;
      updateRevision?: string;
      updated?: number;
      message?: string;
      failedOmitted?: number;
      failed?: string[];
    };
  };
  const status = async (): Promise<Status | undefined> =>
    ((await custom.getClusterCustomObject({ ...GROUP, name })) as { status?: Status }).status;
  const first = await waitFor(
    `${name}: the first revision Complete on every node`,
    async (observe) => {
      const s = await status();
      observe(s?.upgrade);
      return s?.upgrade?.phase === "Complete" && s.upgrade.updated === nodes.length ? s : undefined;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 1_000 },
  );
  await waitAllAdvertise(nodeInformer, nodes, resource, `${name}: every node advertising ${DEVICES} devices`);
  const from = first.upgrade!.updateRevision!;

  // The new revision: the DaemonSet of the config that is not `from` (the operator creates it).
  const daemonSets = createInformer<V1DaemonSet>(kc, {
    resource: DAEMON_SETS,
    namespace: NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(name)}`,
  });
  daemonSets.start();
  await daemonSets.waitForSync();
  let completeMs: number | undefined;
  let lastStatusRead = -Infinity;
  let result: Result;
  const figures = await startScaleFigures({
    operatorPid: operator.pid,
    operatorLog: operator.log,
    nodeInformer,
    daemonSets,
    nodes,
    config: name,
  });
  try {
    const m = await measure(
      kc,
      sim,
      nodeInformer,
      nodes,
      name,
      resource,
      from,
      async () => {
        await custom.patchClusterCustomObject({
          ...GROUP,
          name,
          body: [{ op: "add", path: "/spec/plugin/logLevel", value: "debug" }],
        });
      },
      () =>
        daemonSets
          .list()
          .map((ds) => ds.metadata?.labels?.[LABEL_REVISION])
          .find((r) => r !== undefined && r !== from),
      async (elapsed) => {
        if (completeMs !== undefined || elapsed - lastStatusRead < 500) return;
        lastStatusRead = elapsed;
        const s = await status();
        // An upgrade the operator gave up on never completes: the run fails now, saying why, rather than
        // waiting out its deadline.
        const phase = s?.upgrade?.phase;
        if (phase === "RollingBack" || phase === "RolledBack" || phase === "Failed") {
          const failed = (s?.upgrade?.failed?.length ?? 0) + (s?.upgrade?.failedOmitted ?? 0);
          throw new Error(
            `${name}: the operator stopped the upgrade (${phase}, ${failed} nodes failed): ${s?.upgrade?.message ?? "no message"}`,
          );
        }
        if (
          s?.upgrade?.phase === "Complete" &&
          s.upgrade.updateRevision !== from &&
          s.upgrade.updated === nodes.length
        )
          completeMs = elapsed;
      },
    );
    if (completeMs === undefined) {
      const done = performance.now();
      await waitFor(
        `${name}: status Complete`,
        async () => {
          const s = await status();
          return s?.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== from;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      completeMs = m.rolloutMs + (performance.now() - done);
    }
    const scale = await figures.stop();
    result = { ...toResult(scenario, m, completeMs), scale };
    console.log(formatScaleFigures(`dpo ${strategy}, ${nodes.length} nodes`, nodes.length, scale));
  } finally {
    await daemonSets.stop();
    await custom.deleteClusterCustomObject({ ...GROUP, name });
    await waitPluginsGone(sim, name);
  }
  return { ...result, memAvailableAfterMiB: await settledMemAvailable() };
}

/**
 * The baseline: the plugin DaemonSet dpo renders, made into one plain DaemonSet (fixed name, a selector
 * without the revision, RollingUpdate), created and updated here with no operator running. This is
 * what a device plugin shipped as a DaemonSet does on an upgrade.
 */
export async function baselineScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
): Promise<Result> {
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const name = "bench-baseline";
  const resource = "upgrade-bench.example/baseline";
  const dsName = pluginObjectName(name);
  const render = (logLevel: "info" | "debug"): PlainPluginRevision =>
    plainPluginRevision({
      name,
      resource,
      devices: DEVICES,
      idPrefix: "b",
      logLevel,
      maxUnavailable: MAX_UNAVAILABLE.nodes,
      context: RENDER_CONTEXT,
    });
  const before = render("info");
  const after = render("debug");
  for (const r of [before, after])
    await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: r.configMap });
  await apps.createNamespacedDaemonSet({ namespace: NAMESPACE, body: before.daemonSet });
  let result: Result;
  await waitFor(
    `${name}: the first revision's plugin on every node`,
    (observe) => {
      const state = allOnRevision(sim, nodeInformer, nodes, name, resource, before.revision);
      observe({ moved: state.moved, pending: state.pending });
      return state.done;
    },
    { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 500 },
  );
  // RollingUpdate counts a pod not Ready yet as unavailable already and replaces it freely: the update
  // starts once every plugin pod passed its readiness probe, or maxUnavailable would not hold.
  await waitFor(
    `${name}: every plugin pod Ready`,
    async (observe) => {
      const ds = await apps.readNamespacedDaemonSet({ name: dsName, namespace: NAMESPACE });
      observe(ds.status);
      return ds.status?.numberReady === nodes.length;
    },
    { timeoutMs: 120_000, intervalMs: 1_000 },
  );
  try {
    const m = await measure(
      kc,
      sim,
      nodeInformer,
      nodes,
      name,
      resource,
      before.revision,
      () => replaceDaemonSet(apps, after.daemonSet),
      () => after.revision,
    );
    result = toResult("baseline", m, undefined);
  } finally {
    await apps.deleteNamespacedDaemonSet({
      name: dsName,
      namespace: NAMESPACE,
      propagationPolicy: "Foreground",
    });
    await waitPluginsGone(sim, name);
  }
  return { ...result, memAvailableAfterMiB: await settledMemAvailable() };
}

/** Attempts at replacing the baseline's DaemonSet before a conflict is taken for a real failure. */
const REPLACE_ATTEMPTS = 10;

/**
 * Replaces a DaemonSet with `body`, read-modify-write: the DaemonSet controller writes its status all
 * the time, so the resourceVersion just read may be stale by the time the replace arrives (409); each
 * conflict reads the object again and retries.
 */
export async function replaceDaemonSet(apps: AppsV1Api, body: V1DaemonSet): Promise<void> {
  const { name, namespace } = body.metadata as { name: string; namespace: string };
  for (let attempt = 1; ; attempt++) {
    const current = await apps.readNamespacedDaemonSet({ name, namespace });
    try {
      await apps.replaceNamespacedDaemonSet({
        name,
        namespace,
        body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion } },
      });
      return;
    } catch (err) {
      if (!isConflict(err) || attempt >= REPLACE_ATTEMPTS) {
        throw new Error(
          `replacing DaemonSet ${namespace}/${name} (attempt ${attempt}): ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
  }
}
