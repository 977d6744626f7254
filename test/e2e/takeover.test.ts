// A takeover end to end (ADR 0012): a plugin DaemonSet dpo does not own serves a resource on every simulated
// node, with a workload asking for its devices throughout; a config with spec.takeover hands the nodes over
// one at a time (Surge: kubelets v1.37), and deleting the config gives them back. The incumbent here is a
// `dpo plugin` run from a DaemonSet of its own in kube-system (the simulator runs only dpo's plugin; the real
// node's test takes over from the upstream sample device plugin), with the same device ids as the config.
import {
  AppsV1Api,
  CustomObjectsApi,
  type V1DaemonSet,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DevicePluginConfigSchema } from "../../src/api/v1beta1/config.js";
import { ANNOTATION_TAKEOVER, parseTakeoverRecord } from "../../src/operator/model/takeover.js";
import { renderRevision } from "../../src/operator/render/index.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { LiveWatch } from "../../tools/upgrade-load/live-watch.js";
import { injectedCluster, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { deleteConfigsAndWait, installDpo, repo, startOperator, type OperatorProcess } from "./support.js";
import { allocateWorkload, configStatusWhere } from "./upgrade-support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-takeover");
const INCUMBENT = `legacy-${NAME}`.slice(0, 63);
const RESOURCE = `takeover.example/${NAME}`;
const IDS = ["Dev-1", "Dev-2"];

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const apps = kc.makeApiClient(AppsV1Api);

let nodes: string[] = [];
let sim: KubeletSimulator;
let operator: OperatorProcess | undefined;

/** The plugin already serving RESOURCE: a DaemonSet with a rolling update, as charts make them. */
function incumbentObjects(): { daemonSet: V1DaemonSet; configMap: object } {
  const phantom = DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: INCUMBENT, uid: "uid-none" },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 2, ids: IDS } } },
  });
  const desired = renderRevision(phantom, {
    namespace: "kube-system",
    operatorImage: "dpo:e2e",
    pluginServiceAccount: "default",
    registrationMode: "kubelet",
  });
  const daemonSet = structuredClone(desired.daemonSets.base);
  daemonSet.metadata = { name: INCUMBENT, namespace: "kube-system", labels: { app: INCUMBENT } };
  daemonSet.spec!.updateStrategy = { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } };
  delete daemonSet.spec!.template.spec!.affinity;
  const configMap = structuredClone(desired.configMap);
  delete configMap.metadata!.ownerReferences;
  return { daemonSet, configMap };
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames.slice(0, 3);
  expect(nodes.length).toBe(3);
  await installDpo();
  // The takeover's rights, as the opt-in component grants them.
  for (const file of ["cluster_role.yaml", "cluster_role_binding.yaml"])
    await kubectl(["apply", "--server-side", "-f", `${repo}/config/components/takeover/${file}`]);
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: Object.fromEntries(nodes.map((n) => [n, "v1.37.0"])),
  });
  const { daemonSet, configMap } = incumbentObjects();
  await kubectl(["apply", "--server-side", "-f", "-"], { input: JSON.stringify(configMap) });
  await apps.createNamespacedDaemonSet({ namespace: "kube-system", body: daemonSet });
  for (const node of nodes)
    await waitFor(
      `the incumbent to advertise ${IDS.length} devices on ${node}`,
      () => {
        const seen = sim.capacity(node, RESOURCE);
        return seen?.allocatable === IDS.length ? true : undefined;
      },
      { timeoutMs: 120_000 },
    );
}, 240_000);

afterAll(async () => {
  await deleteConfigsAndWait(kc, [NAME]).catch(() => undefined);
  await apps.deleteNamespacedDaemonSet({ name: INCUMBENT, namespace: "kube-system" }).catch(() => undefined);
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("a takeover from a plugin dpo does not own", () => {
  it("hands every node over with no failed allocation and never zero devices, then gives them back when the config goes", async () => {
    // Every Node update and every incumbent pod, from before the config exists.
    const lowest = new Map<string, number>();
    const nodeWatch = new LiveWatch<V1Node>(kc, "/api/v1/nodes", {}, (type, node) => {
      const name = node.metadata?.name ?? "";
      if (type === "DELETED" || !nodes.includes(name)) return;
      const count = Number(node.status?.allocatable?.[RESOURCE] ?? "0");
      lowest.set(name, Math.min(lowest.get(name) ?? Infinity, count));
    });
    const started: string[] = [];
    // The incumbent's pods by their owner: its pod template carries the labels its chart gave it, not the
    // DaemonSet's own.
    const podWatch = new LiveWatch<V1Pod>(kc, "/api/v1/namespaces/kube-system/pods", {}, (type, pod) => {
      const owned = pod.metadata?.ownerReferences?.some(
        (o) => o.kind === "DaemonSet" && o.name === INCUMBENT,
      );
      if (type === "ADDED" && owned === true) started.push(`${pod.spec?.nodeName}:${pod.metadata?.uid}`);
    });
    await Promise.all([nodeWatch.start(), podWatch.start()]);
    // A watch opens with an ADDED event for each pod there is, which may come after it opened: the
    // incumbent's pod on every node, before the config exists.
    await waitFor(
      "the pod watch to list the incumbent's pod on every node",
      () => (started.length >= nodes.length ? true : undefined),
      { timeoutMs: 30_000 },
    );
    const before = started.length;
    expect(before, "incumbent pods the watch listed before the config").toBe(nodes.length);
    const workload = allocateWorkload(sim, nodes, RESOURCE);
    let result: { admissions: number; failures: string[] } | undefined;
    try {
      operator = await startOperator(["--status-write-interval", "250"]);
      await custom.createClusterCustomObject({
        ...GROUP,
        body: {
          apiVersion: "dpo.dev/v1beta1",
          kind: "DevicePluginConfig",
          metadata: { name: NAME },
          spec: {
            resourceName: RESOURCE,
            backend: { type: "Mock", mock: { devices: 2, ids: IDS } },
            takeover: { daemonSet: { namespace: "kube-system", name: INCUMBENT }, deviceIds: "Same" },
            upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 60 },
          },
        },
      });
      const done = await configStatusWhere(
        custom,
        NAME,
        "the takeover Complete on every node",
        (s) => s.takeover?.phase === "Complete" && s.upgrade?.phase === "Complete" && s.upgrade.updated === 3,
        240_000,
      );
      expect(done.takeover).toEqual({ incumbent: `kube-system/${INCUMBENT}`, phase: "Complete" });
      await waitFor("no incumbent pod left", async () => {
        const ds = await apps.readNamespacedDaemonSet({ name: INCUMBENT, namespace: "kube-system" });
        return ds.status?.desiredNumberScheduled === 0 && (ds.status.currentNumberScheduled ?? 0) === 0
          ? true
          : undefined;
      });
    } finally {
      result = await workload.stop();
    }
    const parked = await apps.readNamespacedDaemonSet({ name: INCUMBENT, namespace: "kube-system" });
    expect(parked.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(parseTakeoverRecord(parked)?.phase).toBe("Parked");
    // Nothing restarted the incumbent's pods: it never started one after the config came (a change of its
    // template under its rolling update would have replaced them all).
    expect(started.slice(before), "incumbent pods started during the takeover").toEqual([]);
    expect(result?.admissions).toBeGreaterThan(0);
    expect(result?.failures).toEqual([]);
    for (const node of nodes) {
      expect(lowest.get(node), `${node}: the lowest allocatable a Node update showed`).toBe(IDS.length);
      expect(sim.capacity(node, RESOURCE)?.allocatable).toBe(IDS.length);
    }

    // The config goes: the incumbent gets its own fields back and its pods return to every node.
    await deleteConfigsAndWait(kc, [NAME]);
    const restored = await waitFor(
      "the incumbent given back and running on every node",
      async () => {
        const ds = await apps.readNamespacedDaemonSet({ name: INCUMBENT, namespace: "kube-system" });
        return ds.metadata?.annotations?.[ANNOTATION_TAKEOVER] === undefined && ds.status?.numberReady === 3
          ? ds
          : undefined;
      },
      { timeoutMs: 120_000 },
    );
    expect(restored.spec?.updateStrategy).toMatchObject({ type: "RollingUpdate" });
    expect(restored.spec?.template.spec?.affinity).toBeUndefined();
    for (const node of nodes)
      await waitFor(`${node} advertising the incumbent's devices again`, () =>
        sim.capacity(node, RESOURCE)?.allocatable === IDS.length ? true : undefined,
      );
    nodeWatch.stop();
    podWatch.stop();
    expect(nodeWatch.health().gaps, "the Node watch was alive").toEqual([]);
    expect(nodeWatch.events).toBeGreaterThan(0);
  });
});
