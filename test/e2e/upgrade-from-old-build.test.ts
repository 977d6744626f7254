// Real old code to real new code on 20 simulated nodes with mixed kubelet versions, under a steady
// stream of workload pods that ask the scheduler and the kubelet for devices. dpo as it was before
// plugin revisions (built from this repository's history into .local/builds/) runs a config with its
// CRDs, operator and plugins; then the current CRDs and operator take over, adopt the old DaemonSet
// (no pod restarted by the adoption) and move every node to the current plugin: Surge on the v1.37
// kubelets, where not one pod may fail admission, and Replace on the older ones, fenced by a taint
// while they advertise nothing, so not one pod fails admission there either, and both kinds of node
// admit pods during the upgrade; a pod no node ever took counts as a failure. Then the config asks for
// `strategy: Replace` explicitly and moves to another revision under the same workload: every node
// replaced and fenced, none surged, no pod failed or left unscheduled. Then the same
// workload meets a plain RollingUpdate DaemonSet of the same plugin, created by the test: pods fail
// admission with UnexpectedAdmissionError, which is what dpo's gate is for.
//
// The simulated kubelets write device counts into Node status on the kubelet's own 10 s sync, as
// real ones do, so the scheduler keeps placing pods on a node whose plugin just went away.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { readPinnedVersions, simulatedNodeFacts } from "../../tools/cluster/cluster.js";
import { renderSimulatedNode } from "../../tools/cluster/nodes.js";
import { buildAt, type OldBuild } from "../../tools/cluster/old-build.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  kubectl,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";
import {
  configStatus,
  plainPluginRevision,
  podStream,
  rollPlainPluginTo,
  RolloutWatch,
  type PodStreamResult,
} from "./upgrade-support.js";

/** The last commit before plugin revisions: one DaemonSet per config, RollingUpdate, no revision label. */
const OLD_COMMIT = "a69fb52";
const OLD_IMAGE = "dpo:before-revisions";

const NODE_COUNT = 20;
const MAX_UNAVAILABLE = 4;
/** The kubelet's nodeStatusUpdateFrequency. */
const NODE_STATUS_SYNC_MS = 10_000;
/** Kubelets per node, round robin: two of five keep one endpoint per socket (Surge), the rest Replace. */
const KUBELETS = ["v1.37.0", "v1.36.4", "v1.37.2+k3s1", "v1.34.4", "v1.33.4-eks-1234"] as const;
const DEVICES = 2;
const WORKLOAD = { perSecond: 8, holdMs: 1_500 };
/** Longer than the waits inside a test added up, so a slow run ends with what the wait last saw. */
const TEST_BUDGET_MS = 900_000;

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-old");
const RESOURCE = `old.example/${NAME}`;
const BASELINE = uniqueName("e2e-plain");
const BASELINE_RESOURCE = `plain.example/${BASELINE}`;
const WORKLOAD_NAMESPACE = uniqueName("e2e-workload");

const kc = kubeConfigFromInjected();
const core = kc.makeApiClient(CoreV1Api);
const apps = kc.makeApiClient(AppsV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const run = promisify(execFile);

let nodes: string[] = [];
/** Nodes this file added to the shared cluster, deleted at the end. */
const addedNodes: string[] = [];
let surgeNodes: string[] = [];
let old: OldBuild;
let sim: KubeletSimulator;
let operator: OperatorProcess | undefined;

const status = (): Promise<DevicePluginConfigStatus | undefined> => configStatus(custom, NAME);

function kubeletOf(index: number): string {
  return KUBELETS[index % KUBELETS.length]!;
}

/**
 * The CRDs the old build prints (`dpo crds`), applied over the current ones, and waited for: the API
 * server takes a moment to serve a changed CRD schema, and an object created meanwhile would get the
 * current schema's defaults (spec.upgrade), which the old code refuses.
 */
async function applyOldCrds(): Promise<void> {
  const { stdout } = await run(process.execPath, [old.entrypoint, "crds"], { maxBuffer: 16 * 1024 * 1024 });
  await kubectl(["apply", "--server-side", "--force-conflicts", "--field-manager=dpo-e2e-old", "-f", "-"], {
    input: stdout,
  });
  const probe = JSON.stringify({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: `${NAME}-probe` },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 1 } } },
  });
  await waitFor("the API server to serve the old CRD schema", async (observe) => {
    const dry = await kubectl(["create", "--dry-run=server", "-o", "json", "-f", "-"], { input: probe });
    const spec = (JSON.parse(dry.stdout) as { spec: Record<string, unknown> }).spec;
    observe(Object.keys(spec));
    return !("upgrade" in spec);
  });
}

/** Simulated nodes up to NODE_COUNT, next to the cluster's own, Ready. */
async function addNodes(): Promise<void> {
  const facts = simulatedNodeFacts(await readPinnedVersions());
  const have = injectedCluster().nodeNames;
  for (let i = have.length; i < NODE_COUNT; i++) {
    const node = renderSimulatedNode(i, facts);
    await core.createNode({ body: node });
    addedNodes.push(node.metadata!.name!);
  }
  nodes = [...have.slice(0, NODE_COUNT), ...addedNodes];
  await waitFor(`${nodes.length} nodes Ready`, async (observe) => {
    const ready = (await core.listNode()).items.filter(
      (n) =>
        nodes.includes(n.metadata?.name ?? "") &&
        n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    observe(ready.length);
    return ready.length === nodes.length;
  });
}

/** Waits until every node's Node status advertises `devices` of `resource` as allocatable. */
async function everyNodeAdvertises(resource: string, devices: number): Promise<void> {
  await waitFor(
    `every node to advertise ${devices} ${resource}`,
    async (observe) => {
      const list = await core.listNode();
      const short = list.items
        .filter((n) => nodes.includes(n.metadata?.name ?? ""))
        .filter((n) => n.status?.allocatable?.[resource] !== String(devices))
        .map((n) => [n.metadata?.name, n.status?.allocatable?.[resource]]);
      observe(short);
      return short.length === 0;
    },
    { timeoutMs: 120_000, intervalMs: 500 },
  );
}

function summary(result: PodStreamResult, on: readonly string[]): { admitted: number; rejected: string[] } {
  return {
    admitted: on.reduce((sum, n) => sum + (result.admitted.get(n) ?? 0), 0),
    rejected: result.rejected
      .filter((r) => on.includes(r.node))
      .map((r) => `${r.node}: ${r.reason}: ${r.message}`),
  };
}

beforeAll(async () => {
  old = await buildAt(OLD_COMMIT);
  await addNodes();
  surgeNodes = nodes.filter((_, i) => kubeletOf(i).startsWith("v1.37"));
  await core.createNamespace({ body: { metadata: { name: WORKLOAD_NAMESPACE } } });
  await installDpo();
  await applyOldCrds();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n, i) => [n, kubeletOf(i)])),
    images: { [OLD_IMAGE]: old.entrypoint },
    nodeStatusUpdateIntervalMs: NODE_STATUS_SYNC_MS,
  });
  operator = await startOperator([], {}, { entrypoint: old.entrypoint, pluginImage: OLD_IMAGE });
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: DEVICES } } },
    },
  });
}, 900_000);

afterAll(async () => {
  await operator?.stop();
  // Whatever happened, the next file finds the current CRDs and the cluster's own nodes only.
  await installDpo().catch(() => undefined);
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await apps
    .deleteNamespacedDaemonSet({ name: `dpo-${BASELINE}`, namespace: NAMESPACE })
    .catch(() => undefined);
  await core.deleteNamespace({ name: WORKLOAD_NAMESPACE }).catch(() => undefined);
  await sim?.stop();
  for (const name of addedNodes) await core.deleteNode({ name }).catch(() => undefined);
}, 180_000);

describe(`upgrading from dpo ${OLD_COMMIT} (before plugin revisions) on ${NODE_COUNT} nodes under a pod workload`, () => {
  it(
    "adopts the old DaemonSet and moves every node to the current plugin, with no failed admission on Surge nodes",
    async () => {
      await waitFor(
        `${NAME}: Ready under the old operator on ${NODE_COUNT} nodes`,
        async (observe) => {
          const s = await status();
          observe({ nodes: s?.nodes, problems: s?.problems?.slice(0, 5) });
          return (
            s?.conditions?.some((c) => c.type === "Ready" && c.status === "True") &&
            s.nodes?.desired === NODE_COUNT
          );
        },
        { timeoutMs: 240_000, intervalMs: 500 },
      );
      await everyNodeAdvertises(RESOURCE, DEVICES);
      const legacy = await pluginDaemonSet(kc, NAMESPACE, NAME);
      expect(legacy?.metadata?.name).toBe(`dpo-${NAME}`);
      expect(legacy?.metadata?.labels?.["dpo.dev/revision"]).toBeUndefined();
      await operator!.stop();
      operator = undefined;

      // What a user does: the current CRDs and RBAC, the pace of the upgrade, then the current operator.
      await installDpo();
      await custom.patchClusterCustomObject(
        { ...GROUP, name: NAME, body: { spec: { upgrade: { maxUnavailable: MAX_UNAVAILABLE } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      const watch = new RolloutWatch(MAX_UNAVAILABLE);
      await watch.start(kc, NAMESPACE, NAME);
      const workload = podStream(kc, WORKLOAD_NAMESPACE, RESOURCE, { ...WORKLOAD, name: "dpo" });
      let result: PodStreamResult | undefined;
      try {
        operator = await startOperator();
        const done = await waitFor(
          `${NAME}: the current revision on every node`,
          async (observe) => {
            const s = await status();
            observe(s?.upgrade);
            return s?.upgrade?.phase === "Complete" &&
              s.upgrade.currentRevision === s.upgrade.updateRevision &&
              s.upgrade.updated === NODE_COUNT
              ? s
              : undefined;
          },
          { timeoutMs: 480_000, intervalMs: 500 },
        );
        expect(done.upgrade?.currentRevision).not.toBe("legacy");
        await waitFor("the old DaemonSet to be gone", () =>
          watch.daemonSets.has(`dpo-${NAME}`) ? undefined : true,
        );
      } finally {
        result = await workload.stop();
        watch.stop();
      }
      const replaceNodes = nodes.filter((n) => !surgeNodes.includes(n));
      const onSurge = summary(result, surgeNodes);
      const onReplace = summary(result, replaceNodes);
      const fenced = [...watch.fencedMs.values()].sort((a, b) => a - b);
      console.log(
        `dpo upgrade under the workload: ${result.created} pods; Surge nodes ${onSurge.admitted} admitted, ` +
          `${onSurge.rejected.length} rejected; Replace nodes ${onReplace.admitted} admitted, ` +
          `${onReplace.rejected.length} rejected; ${result.unscheduled.length} never scheduled; Replace nodes ` +
          `fenced (no new pod of any kind) ${fenced.map((ms) => (ms / 1000).toFixed(1)).join(", ")} s; ` +
          `rollout watches ${JSON.stringify(watch.health())}`,
      );
      // What the workload met, first: a pod no node took is a failure, not one fewer pod counted.
      expect(result.unscheduled, "pods never scheduled during the upgrade").toEqual([]);
      expect(onReplace.admitted, "pods admitted on Replace nodes during the upgrade").toBeGreaterThan(0);
      expect(watch.liveness(nodes), "the rollout's watches were alive").toEqual([]);
      expect(watch.violations).toEqual([]);
      expect(watch.maxBetween, "nodes between the old and the new plugin at once").toBeLessThanOrEqual(
        MAX_UNAVAILABLE,
      );
      expect([...watch.surged].sort()).toEqual([...surgeNodes].sort());
      // Under Auto the older kubelets are replaced with the new plugin started ahead, standing by.
      expect([...watch.stoodBy].sort()).toEqual([...replaceNodes].sort());
      expect([...watch.replaced]).toEqual([]);
      expect(onSurge.admitted, "pods admitted on Surge nodes during the upgrade").toBeGreaterThan(0);
      expect(onSurge.rejected).toEqual([]);
      // Replace nodes are fenced (tainted) before their old plugin stops and until the Node advertises the
      // new one's devices: the scheduler places no pod there that the kubelet would then reject.
      expect(onReplace.rejected).toEqual([]);
      expect([...watch.fencedMs.keys()].sort()).toEqual([...replaceNodes].sort());
      await everyNodeAdvertises(RESOURCE, DEVICES);
    },
    TEST_BUDGET_MS,
  );

  it(
    "an explicit strategy: Replace under the same workload replaces and fences every node, with no failed admission",
    async () => {
      const before = await status();
      const from = before?.upgrade?.updateRevision;
      expect(before?.upgrade?.phase, "the previous upgrade Complete").toBe("Complete");
      const watch = new RolloutWatch(MAX_UNAVAILABLE);
      await watch.start(kc, NAMESPACE, NAME);
      const workload = podStream(kc, WORKLOAD_NAMESPACE, RESOURCE, { ...WORKLOAD, name: "replace" });
      const startedMs = performance.now();
      let result: PodStreamResult | undefined;
      try {
        await custom.patchClusterCustomObject(
          {
            ...GROUP,
            name: NAME,
            body: { spec: { upgrade: { strategy: "Replace" }, plugin: { logLevel: "debug" } } },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
        await waitFor(
          `${NAME}: the Replace to a new revision Complete on every node`,
          async (observe) => {
            const s = await status();
            observe(s?.upgrade);
            return (
              s?.upgrade?.phase === "Complete" &&
              s.upgrade.updateRevision !== from &&
              s.upgrade.currentRevision === s.upgrade.updateRevision &&
              s.upgrade.updated === NODE_COUNT
            );
          },
          { timeoutMs: 480_000, intervalMs: 500 },
        );
      } finally {
        result = await workload.stop();
        watch.stop();
      }
      const seconds = (performance.now() - startedMs) / 1000;
      const all = summary(result, nodes);
      const onReplace = summary(
        result,
        nodes.filter((n) => !surgeNodes.includes(n)),
      );
      const onSurge = summary(result, surgeNodes);
      console.log(
        `strategy: Replace under the workload on ${NODE_COUNT} nodes in ${seconds.toFixed(1)} s: ` +
          `${result.created} pods, ${all.admitted} admitted (${onSurge.admitted} on the v1.37 kubelets), ` +
          `${all.rejected.length} rejected, ${result.unscheduled.length} never scheduled; ` +
          `rollout watches ${JSON.stringify(watch.health())}`,
      );
      expect(result.unscheduled, "pods never scheduled during the Replace").toEqual([]);
      expect(all.rejected, "pods rejected at admission during the Replace").toEqual([]);
      expect(onSurge.admitted, "pods admitted on the v1.37 kubelets during the Replace").toBeGreaterThan(0);
      expect(onReplace.admitted, "pods admitted on the older kubelets during the Replace").toBeGreaterThan(0);
      expect(watch.liveness(nodes), "the rollout's watches were alive").toEqual([]);
      expect(watch.violations).toEqual([]);
      expect(watch.maxBetween, "nodes between revisions at once").toBeLessThanOrEqual(MAX_UNAVAILABLE);
      expect([...watch.surged], "strategy: Replace never surges").toEqual([]);
      expect([...new Set([...watch.stoodBy, ...watch.replaced])].sort()).toEqual([...nodes].sort());
      expect([...watch.fencedMs.keys()].sort(), "every node fenced while replaced").toEqual(
        [...nodes].sort(),
      );
      await everyNodeAdvertises(RESOURCE, DEVICES);
    },
    TEST_BUDGET_MS,
  );

  it(
    "the same workload against a plain RollingUpdate DaemonSet of the same plugin fails admissions",
    async () => {
      // Nothing of dpo acts here: no operator, and the config is gone with its plugins.
      await operator?.stop();
      operator = undefined;
      await custom.deleteClusterCustomObject({ ...GROUP, name: NAME });
      await waitFor(`the plugins of ${NAME} to stop`, (observe) => {
        const left = sim.plugins().filter((p) => p.slot.startsWith(`${NAMESPACE}/${NAME}`) && p.running);
        observe(left.map((p) => p.node));
        return left.length === 0;
      });
      const render = (logLevel: "info" | "debug") =>
        plainPluginRevision({
          name: BASELINE,
          resource: BASELINE_RESOURCE,
          devices: DEVICES,
          idPrefix: "p",
          logLevel,
          maxUnavailable: MAX_UNAVAILABLE,
          context: {
            namespace: NAMESPACE,
            operatorImage: "dpo:e2e",
            pluginServiceAccount: "dpo-plugin",
            registrationMode: "kubelet",
          },
        });
      const before = render("info");
      const after = render("debug");
      for (const r of [before, after]) {
        await core.createNamespacedConfigMap({ namespace: NAMESPACE, body: r.configMap });
      }
      await apps.createNamespacedDaemonSet({ namespace: NAMESPACE, body: before.daemonSet });
      await everyNodeAdvertises(BASELINE_RESOURCE, DEVICES);

      const workload = podStream(kc, WORKLOAD_NAMESPACE, BASELINE_RESOURCE, { ...WORKLOAD, name: "plain" });
      let result: PodStreamResult | undefined;
      const dsName = before.daemonSet.metadata!.name!;
      try {
        // Whether a pod lands in a node's window is a race: most rollouts fail some, one now and then
        // fails none. Rolled again (back and forth, at most three times) until one does, so the test
        // shows what a plain rollout does to pods without depending on one run's luck.
        for (const [i, target] of [after, before, after].entries()) {
          await rollPlainPluginTo(apps, target);
          await waitFor(
            `${dsName}: rollout ${i + 1} on every node`,
            async (observe) => {
              const ds = await apps.readNamespacedDaemonSet({ name: dsName, namespace: NAMESPACE });
              observe(ds.status);
              return (
                (ds.status?.observedGeneration ?? 0) >= (ds.metadata?.generation ?? 1) &&
                ds.status?.updatedNumberScheduled === NODE_COUNT &&
                ds.status.numberAvailable === NODE_COUNT
              );
            },
            { timeoutMs: 480_000, intervalMs: 500 },
          );
          await everyNodeAdvertises(BASELINE_RESOURCE, DEVICES);
          if (workload.rejected() > 0) break;
        }
      } finally {
        result = await workload.stop();
      }
      const all = summary(result, nodes);
      console.log(
        `plain RollingUpdate under the workload: ${result.created} pods, ${all.admitted} admitted, ` +
          `${all.rejected.length} rejected (${summary(result, surgeNodes).rejected.length} on v1.37 nodes)`,
      );
      expect(all.admitted).toBeGreaterThan(0);
      expect(all.rejected.length, "pods rejected at admission during the plain rollout").toBeGreaterThan(0);
      expect(result.rejected.every((r) => r.reason === "UnexpectedAdmissionError")).toBe(true);
      await apps.deleteNamespacedDaemonSet({ name: dsName, namespace: NAMESPACE });
      for (const r of [before, after]) {
        await core
          .deleteNamespacedConfigMap({ name: r.configMap.metadata!.name!, namespace: NAMESPACE })
          .catch(() => undefined);
      }
    },
    TEST_BUDGET_MS,
  );
});
