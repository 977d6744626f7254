// What the operator owns stays as it renders it: a plugin DaemonSet or ConfigMap edited by hand (image,
// args, securityContext, volumes, tolerations, placement, the plugin's config) is put back by the next
// reconcile, with no pod restarted by the correction (OnDelete). The config selects every simulated node,
// so its DaemonSet has a pod on each (no kubelet simulator runs them: they stay Pending, which is enough to
// see one replaced); each edit is checked to have been stored before the test waits for it to be undone.
// The DeviceClass of a DRA config is covered in test/unit/operator/controllers/dra.test.ts ("puts an
// edited class back").
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type V1DaemonSet,
  type V1Pod,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SIMULATED_NODE_LABEL } from "../../tools/cluster/nodes.js";
import {
  apiStatusCode,
  injectedCluster,
  kubeConfigFromInjected,
  pluginConfigMap,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-drift");

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const apps = kc.makeApiClient(AppsV1Api);
const core = kc.makeApiClient(CoreV1Api);
let operator: OperatorProcess | undefined;
let rendered: V1DaemonSet;

beforeAll(async () => {
  await installDpo();
  operator = await startOperator();
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: "drift.example/foo",
        backend: { type: "Mock", mock: { devices: 2 } },
        // Every simulated node: a pod on each, which a correction that restarted pods would replace.
        nodeSelector: { [SIMULATED_NODE_LABEL]: "true" },
      },
    },
  });
  rendered = await waitFor("the plugin DaemonSet", async () => pluginDaemonSet(kc, NAMESPACE, NAME), {
    timeoutMs: 60_000,
  });
}, 180_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await operator?.stop();
}, 60_000);

/** A hand edit of the DaemonSet, and which of podFields' fields it changes. */
type Edit = { field: string; key: keyof ReturnType<typeof podFields>; edit: (ds: V1DaemonSet) => void };
const edits: Edit[] = [
  {
    field: "image",
    key: "image",
    edit: (ds) => (ds.spec!.template.spec!.containers[0]!.image = "registry.example/evil:1"),
  },
  {
    field: "args",
    key: "args",
    edit: (ds) => (ds.spec!.template.spec!.containers[0]!.args = ["--log-level=trace"]),
  },
  {
    field: "securityContext",
    key: "securityContext",
    edit: (ds) => (ds.spec!.template.spec!.containers[0]!.securityContext = { privileged: true }),
  },
  {
    field: "volumes",
    key: "volumes",
    edit: (ds) => ds.spec!.template.spec!.volumes!.push({ name: "root", hostPath: { path: "/" } }),
  },
  {
    field: "tolerations",
    key: "tolerations",
    edit: (ds) => (ds.spec!.template.spec!.tolerations = [{ operator: "Exists" }]),
  },
  { field: "placement", key: "affinity", edit: (ds) => delete ds.spec!.template.spec!.affinity },
];

/** The plugin pods of the config's DaemonSet, by the DaemonSet's own selector. */
async function pluginPods(): Promise<V1Pod[]> {
  const labels = rendered.spec!.selector.matchLabels ?? {};
  const list = await core.listNamespacedPod({
    namespace: NAMESPACE,
    labelSelector: Object.entries(labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(","),
  });
  return list.items.filter((p) => p.metadata?.deletionTimestamp === undefined);
}

/** What identifies a pod's run: its uid, its node and its containers' restarts. */
function podRuns(pods: V1Pod[]): string[] {
  return pods
    .map(
      (p) =>
        `${p.metadata?.name} uid=${p.metadata?.uid} node=${p.spec?.nodeName} restarts=${(p.status?.containerStatuses ?? []).map((c) => c.restartCount).join(",")}`,
    )
    .sort();
}

/** The selection is not empty: one pod per simulated node, each scheduled, before anything is edited. */
async function podsOnEveryNode(): Promise<V1Pod[]> {
  const nodes = injectedCluster().nodeNames;
  expect(nodes.length, "the cluster's simulated nodes").toBeGreaterThan(0);
  return waitFor(
    `a plugin pod of ${NAME} on each of ${nodes.length} nodes`,
    async (observe) => {
      const pods = await pluginPods();
      observe(pods.map((p) => [p.metadata?.name, p.spec?.nodeName]));
      const on = new Set(pods.map((p) => p.spec?.nodeName));
      return nodes.every((n) => on.has(n)) ? pods : undefined;
    },
    { timeoutMs: 60_000 },
  );
}

/** What the test compares: the fields a hand edit changed, as the API server returns them. */
function podFields(ds: V1DaemonSet | undefined) {
  const spec = ds?.spec?.template.spec;
  const c = spec?.containers[0];
  return {
    image: c?.image,
    args: c?.args,
    securityContext: c?.securityContext,
    volumes: spec?.volumes,
    tolerations: spec?.tolerations,
    affinity: spec?.affinity,
  };
}

describe("the objects the operator owns", () => {
  it("selects a plugin pod on every simulated node", async () => {
    const pods = await podsOnEveryNode();
    expect(pods.length, "plugin pods the config selects").toBeGreaterThan(0);
  });

  it.each(edits)("a DaemonSet whose $field was edited by hand is put back", async ({ key, edit }) => {
    const before = podRuns(await podsOnEveryNode());
    // Read, edit, replace; again on a conflict (the DaemonSet controller writes its status meanwhile).
    // The replace's answer is the object as the API server stored it: the edit read back, before the
    // operator can have undone it.
    const stored = await waitFor("the hand edit to be written", async (observe) => {
      const live = (await pluginDaemonSet(kc, NAMESPACE, NAME))!;
      edit(live);
      try {
        return await apps.replaceNamespacedDaemonSet({
          name: live.metadata!.name!,
          namespace: NAMESPACE,
          body: live,
        });
      } catch (err) {
        if (apiStatusCode(err) !== 409) throw err;
        observe(String(err));
        return undefined;
      }
    });
    expect(
      JSON.stringify(podFields(stored)[key]),
      `the hand edit of ${key} as stored, against the rendered ${JSON.stringify(podFields(rendered)[key])}`,
    ).not.toBe(JSON.stringify(podFields(rendered)[key]));
    await waitFor(
      "the DaemonSet back as rendered",
      async (observe) => {
        const now = await pluginDaemonSet(kc, NAMESPACE, NAME);
        observe(podFields(now));
        return JSON.stringify(podFields(now)) === JSON.stringify(podFields(rendered)) ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const now = (await pluginDaemonSet(kc, NAMESPACE, NAME))!;
    expect(now.metadata?.uid).toBe(rendered.metadata?.uid);
    // No pod restarted: every pod from before the edit is still there, on its node, never restarted. (A
    // pod the edit's wider placement added meanwhile is not one of them.)
    const after = podRuns(await pluginPods());
    expect(
      before.filter((p) => !after.includes(p)),
      `pods from before the edit gone or restarted; now: ${JSON.stringify(after)}`,
    ).toEqual([]);
    expect(now.spec?.updateStrategy?.type).toBe("OnDelete");
  });

  it("a plugin ConfigMap whose config was edited by hand is put back", async () => {
    const before = podRuns(await podsOnEveryNode());
    const cm = (await pluginConfigMap(kc, NAMESPACE, NAME))!;
    const original = { ...cm.data };
    const key = Object.keys(original)[0]!;
    cm.data = { ...original, [key]: "{}" };
    const stored = await core.replaceNamespacedConfigMap({
      name: cm.metadata!.name!,
      namespace: NAMESPACE,
      body: cm,
    });
    expect(stored.data?.[key], "the hand edit as stored").toBe("{}");
    await waitFor(
      "the ConfigMap back as rendered",
      async (observe) => {
        const now = await pluginConfigMap(kc, NAMESPACE, NAME);
        observe(now?.data);
        return now?.data?.[key] === original[key] ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const after = podRuns(await pluginPods());
    expect(
      before.filter((p) => !after.includes(p)),
      `pods gone or restarted; now: ${JSON.stringify(after)}`,
    ).toEqual([]);
  });
});
