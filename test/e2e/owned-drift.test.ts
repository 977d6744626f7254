// What the operator owns stays as it renders it: a plugin DaemonSet or ConfigMap edited by hand (image,
// args, securityContext, volumes, tolerations, placement, the plugin's config) is put back by the next
// reconcile, with no pod restarted by the correction (OnDelete). The DeviceClass of a DRA config is
// covered in test/unit/operator/controllers/dra.test.ts ("puts an edited class back").
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type V1DaemonSet } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  apiStatusCode,
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
        // No node carries it: the objects are rendered, no plugin runs, nothing else moves.
        nodeSelector: { "drift.example/none": "true" },
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

type Edit = { field: string; edit: (ds: V1DaemonSet) => void };
const edits: Edit[] = [
  {
    field: "image",
    edit: (ds) => (ds.spec!.template.spec!.containers[0]!.image = "registry.example/evil:1"),
  },
  { field: "args", edit: (ds) => (ds.spec!.template.spec!.containers[0]!.args = ["--log-level=trace"]) },
  {
    field: "securityContext",
    edit: (ds) => (ds.spec!.template.spec!.containers[0]!.securityContext = { privileged: true }),
  },
  {
    field: "volumes",
    edit: (ds) => ds.spec!.template.spec!.volumes!.push({ name: "root", hostPath: { path: "/" } }),
  },
  { field: "tolerations", edit: (ds) => (ds.spec!.template.spec!.tolerations = [{ operator: "Exists" }]) },
  { field: "placement", edit: (ds) => delete ds.spec!.template.spec!.affinity },
];

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
  it.each(edits)("a DaemonSet whose $field was edited by hand is put back", async ({ edit }) => {
    // Read, edit, replace; again on a conflict (the DaemonSet controller writes its status meanwhile).
    await waitFor("the hand edit to be written", async (observe) => {
      const live = (await pluginDaemonSet(kc, NAMESPACE, NAME))!;
      edit(live);
      try {
        await apps.replaceNamespacedDaemonSet({
          name: live.metadata!.name!,
          namespace: NAMESPACE,
          body: live,
        });
        return true;
      } catch (err) {
        if (apiStatusCode(err) !== 409) throw err;
        observe(String(err));
        return undefined;
      }
    });
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
    expect(now.spec?.updateStrategy?.type).toBe("OnDelete");
  });

  it("a plugin ConfigMap whose config was edited by hand is put back", async () => {
    const cm = (await pluginConfigMap(kc, NAMESPACE, NAME))!;
    const original = { ...cm.data };
    const key = Object.keys(original)[0]!;
    cm.data = { ...original, [key]: "{}" };
    await core.replaceNamespacedConfigMap({ name: cm.metadata!.name!, namespace: NAMESPACE, body: cm });
    await waitFor(
      "the ConfigMap back as rendered",
      async (observe) => {
        const now = await pluginConfigMap(kc, NAMESPACE, NAME);
        observe(now?.data);
        return now?.data?.[key] === original[key] ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });
});
