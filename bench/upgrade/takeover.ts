// A takeover measured (ADR 0012, issue 32): a plugin DaemonSet dpo does not own serves the resource on every
// node, with a pod on each node holding one of its devices and the workloads running throughout; a config
// with spec.takeover naming it is created, and the rollout runs from that moment until every node runs dpo's
// plugin alone with every device advertised. The incumbent is played as test/e2e/takeover.test.ts plays it:
// dpo's own plugin for a config that is never created (a processless plugin at scale), in a DaemonSet of
// its own in kube-system with a RollingUpdate, its ids the ones the config gives (deviceIds Same).
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import { join } from "node:path";
import { API_VERSION, KIND } from "../../src/api/v1beta1/config.js";
import { configLabelValue } from "../../src/contract/names.js";
import { createInformer, type Informer } from "../../src/kube/informer.js";
import { DAEMON_SETS, PODS } from "../../src/kube/resources.js";
import { LABEL_REVISION } from "../../src/operator/model/names.js";
import { INCUMBENT_REVISION } from "../../src/operator/model/takeover.js";
import { waitFor } from "../../tools/cluster/wait.js";
import type { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { plainPluginRevision } from "../../tools/upgrade-load/plain-plugin.js";
import {
  DEVICES,
  GROUP,
  MAX_UNAVAILABLE,
  PROGRESS_DEADLINE_S,
  RENDER_CONTEXT,
  WORKLOAD_NAMESPACE,
} from "./knobs.js";
import { formatScaleFigures, startScaleFigures } from "./scale-figures.js";
import {
  measure,
  settledMemAvailable,
  toResult,
  waitAllAdvertise,
  waitPluginsGone,
  type HolderFigures,
  type Result,
} from "./rollout.js";

/** Where the incumbent runs, and the name of the config its plugin was rendered for (never created). */
export const INCUMBENT_NAMESPACE = "kube-system";
const INCUMBENT_CONFIG = "bench-incumbent";
const NAME = "bench-takeover";
const RESOURCE = "upgrade-bench.example/takeover";
/** Both sides give the devices the same ids (Mock `<idPrefix>-<i>`): deviceIds Same. */
const ID_PREFIX = "t";
const HOLDER_LABEL = "dpo.dev/bench-holder";
/** Creations of holder pods in flight at once. */
const HOLDER_CREATIONS_IN_FLIGHT = 16;

type Kubectl = (args: string[], input?: string) => Promise<string>;

/**
 * The takeover of RESOURCE on every node from the incumbent DaemonSet, with strategy Auto (Surge on the
 * v1.37 kubelets the benchmark simulates). `repo` is where config/components/takeover is: the operator gets
 * the takeover's opt-in rights as a user grants them.
 */
export async function takeoverScenario(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodeInformer: Informer<V1Node>,
  nodes: readonly string[],
  operator: { pid: number; log: string },
  kubectl: Kubectl,
  repo: string,
): Promise<Result> {
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const file of ["cluster_role.yaml", "cluster_role_binding.yaml"])
    await kubectl(["apply", "--server-side", "-f", join(repo, "config", "components", "takeover", file)]);

  const incumbent = plainPluginRevision({
    name: INCUMBENT_CONFIG,
    resource: RESOURCE,
    devices: DEVICES,
    idPrefix: ID_PREFIX,
    logLevel: "info",
    maxUnavailable: 1,
    context: { ...RENDER_CONTEXT, namespace: INCUMBENT_NAMESPACE, pluginServiceAccount: "default" },
  });
  // A plugin of its own: no placement of dpo's.
  delete incumbent.daemonSet.spec!.template.spec!.affinity;
  const incumbentName = incumbent.daemonSet.metadata!.name!;
  await core.createNamespacedConfigMap({ namespace: INCUMBENT_NAMESPACE, body: incumbent.configMap });
  await apps.createNamespacedDaemonSet({ namespace: INCUMBENT_NAMESPACE, body: incumbent.daemonSet });
  const incumbentSlot = `${INCUMBENT_NAMESPACE}/${configLabelValue(INCUMBENT_CONFIG)}/${incumbent.revision}`;
  const incumbentPods = createInformer<V1Pod>(kc, {
    resource: PODS,
    namespace: INCUMBENT_NAMESPACE,
    labelSelector: `dpo.dev/config=${configLabelValue(INCUMBENT_CONFIG)}`,
  });
  const daemonSets = createInformer<V1DaemonSet>(kc, {
    resource: DAEMON_SETS,
    namespace: RENDER_CONTEXT.namespace,
    labelSelector: `dpo.dev/config=${configLabelValue(NAME)}`,
  });
  let created = false;
  let result: Result;
  try {
    await waitAllAdvertise(nodeInformer, nodes, RESOURCE, `the incumbent advertising ${DEVICES} devices`);
    // The stand-in registration the rollout reads of the incumbent is its pods' readiness (ADR 0012).
    await waitFor(
      `every pod of the incumbent ${incumbentName} Ready`,
      async (observe) => {
        const ds = await apps.readNamespacedDaemonSet({
          name: incumbentName,
          namespace: INCUMBENT_NAMESPACE,
        });
        observe(ds.status);
        return ds.status?.numberReady === nodes.length;
      },
      { timeoutMs: Math.max(300_000, nodes.length * 3_000), intervalMs: 1_000 },
    );
    const holders = await startHolders(kc, sim, nodes);
    incumbentPods.start();
    daemonSets.start();
    await Promise.all([incumbentPods.waitForSync(), daemonSets.waitForSync()]);

    type Status = {
      takeover?: { phase?: string; message?: string };
      upgrade?: { phase?: string; updated?: number; message?: string };
    };
    const status = async (): Promise<Status | undefined> =>
      ((await custom.getClusterCustomObject({ ...GROUP, name: NAME })) as { status?: Status }).status;
    const complete = (s: Status | undefined): boolean =>
      s?.takeover?.phase === "Complete" &&
      s.upgrade?.phase === "Complete" &&
      s.upgrade.updated === nodes.length;
    let completeMs: number | undefined;
    let lastStatusRead = -Infinity;
    const figures = await startScaleFigures({
      operatorPid: operator.pid,
      operatorLog: operator.log,
      nodeInformer,
      daemonSets,
      nodes,
      config: NAME,
    });
    const m = await measure(
      kc,
      sim,
      nodeInformer,
      nodes,
      NAME,
      RESOURCE,
      INCUMBENT_REVISION,
      async () => {
        created = true;
        await custom.createClusterCustomObject({
          ...GROUP,
          body: {
            apiVersion: API_VERSION,
            kind: KIND,
            metadata: { name: NAME },
            spec: {
              resourceName: RESOURCE,
              backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: ID_PREFIX } },
              takeover: {
                daemonSet: { namespace: INCUMBENT_NAMESPACE, name: incumbentName },
                deviceIds: "Same",
              },
              upgrade: { maxUnavailable: MAX_UNAVAILABLE.dpo, progressDeadlineSeconds: PROGRESS_DEADLINE_S },
            },
          },
        });
      },
      () =>
        daemonSets
          .list()
          .map((ds) => ds.metadata?.labels?.[LABEL_REVISION])
          .find((r) => r !== undefined),
      async (elapsed) => {
        if (completeMs !== undefined || elapsed - lastStatusRead < 500) return;
        lastStatusRead = elapsed;
        const s = await status();
        const phase = s?.upgrade?.phase;
        if (s?.takeover?.phase === "Failed" || phase === "RollingBack" || phase === "RolledBack")
          throw new Error(
            `${NAME}: the operator stopped the takeover (takeover ${s?.takeover?.phase}, upgrade ${phase}): ${s?.takeover?.message ?? s?.upgrade?.message ?? "no message"}`,
          );
        if (complete(s)) completeMs = elapsed;
      },
      { pods: incumbentPods, slot: incumbentSlot },
    );
    if (completeMs === undefined) {
      const done = performance.now();
      await waitFor(`${NAME}: status Complete`, async () => complete(await status()), {
        timeoutMs: 120_000,
        intervalMs: 250,
      });
      completeMs = m.rolloutMs + (performance.now() - done);
    }
    const scale = await figures.stop();
    result = { ...toResult("takeover", m, completeMs), scale, holders: holders.check() };
    console.log(formatScaleFigures(`dpo takeover, ${nodes.length} nodes`, nodes.length, scale));
  } finally {
    await incumbentPods.stop();
    await daemonSets.stop();
    await core
      .deleteCollectionNamespacedPod({
        namespace: WORKLOAD_NAMESPACE,
        labelSelector: HOLDER_LABEL,
        gracePeriodSeconds: 0,
      })
      .catch(() => undefined);
    if (created) {
      await custom.deleteClusterCustomObject({ ...GROUP, name: NAME });
      await waitPluginsGone(sim, NAME);
    }
    await apps.deleteNamespacedDaemonSet({
      name: incumbentName,
      namespace: INCUMBENT_NAMESPACE,
      propagationPolicy: "Foreground",
    });
    await waitPluginsGone(sim, INCUMBENT_CONFIG, INCUMBENT_NAMESPACE);
  }
  return { ...result, memAvailableAfterMiB: await settledMemAvailable() };
}

/**
 * One pod per node holding a device of RESOURCE from before the takeover (bound to its node, no scheduler),
 * and at the end what became of them: each must still run, the same pod, and hold devices the node's
 * kubelet lists as healthy, now that dpo's plugin serves them.
 */
async function startHolders(
  kc: KubeConfig,
  sim: KubeletSimulator,
  nodes: readonly string[],
): Promise<{ check: () => HolderFigures }> {
  const core = kc.makeApiClient(CoreV1Api);
  const queue = [...nodes];
  const creator = async (): Promise<void> => {
    for (let node = queue.pop(); node !== undefined; node = queue.pop()) {
      await core.createNamespacedPod({
        namespace: WORKLOAD_NAMESPACE,
        body: {
          metadata: { name: `holder-${node}`, labels: { [HOLDER_LABEL]: "true" } },
          spec: {
            nodeName: node,
            terminationGracePeriodSeconds: 0,
            containers: [
              {
                name: "work",
                image: "registry.example/workload:1",
                resources: { limits: { [RESOURCE]: "1" } },
              },
            ],
          },
        },
      });
    }
  };
  await Promise.all(Array.from({ length: HOLDER_CREATIONS_IN_FLIGHT }, () => creator()));
  const running = async (): Promise<Map<string, V1Pod>> => {
    const list = await core.listNamespacedPod({ namespace: WORKLOAD_NAMESPACE, labelSelector: HOLDER_LABEL });
    return new Map(
      list.items.filter((p) => p.status?.phase === "Running").map((p) => [p.spec?.nodeName ?? "", p]),
    );
  };
  let before = new Map<string, V1Pod>();
  await waitFor(
    `a pod holding a device of ${RESOURCE} running on every node`,
    async (observe) => {
      before = await running();
      observe(`${before.size}/${nodes.length}`);
      return before.size === nodes.length;
    },
    { timeoutMs: Math.max(120_000, nodes.length * 300), intervalMs: 1_000 },
  );
  const held = new Map(
    [...before].map(([node, pod]) => [
      node,
      {
        uid: pod.metadata!.uid!,
        ids: sim.deviceManager(node).allocatedTo(pod.metadata!.uid!).get(RESOURCE) ?? [],
      },
    ]),
  );
  return {
    check: () => {
      const lost: string[] = [];
      for (const node of nodes) {
        const h = held.get(node)!;
        const admitted = sim.admittedPods(node).find((p) => p.uid === h.uid);
        const dm = sim.deviceManager(node);
        const ids = dm.allocatedTo(h.uid).get(RESOURCE) ?? [];
        const unhealthy = ids.filter((id) => dm.deviceHealth(RESOURCE, id) !== "Healthy");
        if (admitted === undefined) lost.push(`${node}: holder-${node} no longer admitted`);
        else if (ids.length === 0 || ids.join() !== h.ids.join())
          lost.push(`${node}: holder-${node} holds [${ids.join(", ")}], held [${h.ids.join(", ")}]`);
        else if (unhealthy.length > 0)
          lost.push(
            `${node}: holder-${node} holds ${unhealthy.join(", ")}, not a healthy device of the node`,
          );
      }
      return { pods: nodes.length, lost: lost.length, samples: lost.slice(0, 3) };
    },
  };
}
