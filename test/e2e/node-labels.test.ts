// End to end: the operator labels the node an NVIDIA config serves from the plugin's report (a recorded
// H100 report, published as the plugin would), with GPU Feature Discovery's keys and dpo's own; writes
// them again when the report changes and not when it changes nothing they say; leaves a key another
// field manager owns alone; takes them off when the config turns them off and when the config is deleted
// (ADR 0011). The field's conversion to and from v1alpha1 is the unit tier's (convert.property.test.ts).
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1NodeSystemInfo,
} from "@kubernetes/client-node";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeviceNodeStateStatus } from "../../src/api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../src/contract/node-state.js";
import { kubeConfigFromInjected, kubectl, pluginDaemonSet, uniqueName, waitFor } from "../cluster/helpers.js";
import { NVIDIA_FIXTURES } from "../fixtures/nvidia/fake-node.js";
import {
  deleteConfigsAndWait,
  installDpo,
  NAMESPACE,
  startOperator,
  type OperatorProcess,
} from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const REPORTS = { group: "dpo.dev", version: "v1beta1", plural: "devicenodestates" };
const SELECT = "labels.example/gpu";
/** A key GFD writes, owned on the node by another labeller before dpo comes. */
const FOREIGN_KEY = "nvidia.com/cuda.driver.major";
const OTHER_MANAGER = "other-labeller";
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

const H100 = JSON.parse(
  readFileSync(join(NVIDIA_FIXTURES, "reports", "eight-h100.json"), "utf8"),
) as DeviceNodeStateStatus;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

const configName = uniqueName("e2e-labels");
const nodeName = uniqueName("labels-node");
const manager = `dpo-node-labels/${configName}`;
let reportName = "";
let reportRevision = "";
let operator: OperatorProcess;

/** What the operator writes for the H100 report, less the key another manager owns. */
const expected = (count: number): Record<string, string> => ({
  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
  "nvidia.com/gpu.count": String(count),
  "nvidia.com/gpu.memory": "81559",
  "nvidia.com/gpu.replicas": "1",
  "nvidia.com/gpu.sharing-strategy": "none",
  "nvidia.com/gpu.family": "hopper",
  "nvidia.com/gpu.compute.major": "9",
  "nvidia.com/gpu.compute.minor": "0",
  "nvidia.com/mps.capable": "false",
  "nvidia.com/mig.capable": "true",
  "nvidia.com/cuda.driver.minor": "90",
  "nvidia.com/cuda.driver.rev": "07",
  "nvidia.com/cuda.driver-version.major": "550",
  "nvidia.com/cuda.driver-version.minor": "90",
  "nvidia.com/cuda.driver-version.revision": "07",
  "nvidia.com/cuda.driver-version.full": "550.90.07",
  "nvidia.com/cuda.runtime.major": "12",
  "nvidia.com/cuda.runtime.minor": "4",
  "nvidia.com/cuda.runtime-version.major": "12",
  "nvidia.com/cuda.runtime-version.minor": "4",
  "nvidia.com/cuda.runtime-version.full": "12.4",
  [`count.device.dpo.dev/${configName}`]: String(count),
  [`replicas.device.dpo.dev/${configName}`]: "1",
  [`product.device.dpo.dev/${configName}`]: "NVIDIA-H100-80GB-HBM3",
});

/** The node's labels the operator may write (GFD's and dpo's), and which of them its manager owns. */
async function deviceLabels(): Promise<{ labels: Record<string, string>; owned: string[] }> {
  const node: V1Node = await core.readNode({ name: nodeName });
  const labels = Object.fromEntries(
    Object.entries(node.metadata?.labels ?? {}).filter(
      ([k]) => k.startsWith("nvidia.com/") || k.includes(".device.dpo.dev/"),
    ),
  );
  const entry = (node.metadata?.managedFields ?? []).find((e) => e.manager === manager);
  const fields = (entry?.fieldsV1 as { "f:metadata"?: { "f:labels"?: object } } | undefined)?.["f:metadata"];
  const owned = Object.keys(fields?.["f:labels"] ?? {}).map((k) => k.slice(2));
  return { labels, owned: owned.sort() };
}

async function labelsBecome(what: string, want: Record<string, string>): Promise<void> {
  await waitFor(
    `${nodeName}: ${what}`,
    async (observe) => {
      const seen = await deviceLabels();
      observe(seen.labels);
      return JSON.stringify(seen.labels) === JSON.stringify(sorted(want));
    },
    { timeoutMs: 60_000 },
  );
}

function sorted(labels: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
}

async function publish(status: DeviceNodeStateStatus): Promise<void> {
  await custom.patchNamespacedCustomObjectStatus(
    { ...REPORTS, namespace: NAMESPACE, name: reportName, body: { status } },
    // A merge patch: the status replaces the last one (its device list whole).
    MERGE,
  );
}

/** The node's report, as the plugin creates it before it writes a status. */
async function createReport(): Promise<void> {
  await custom.createNamespacedCustomObject({
    ...REPORTS,
    namespace: NAMESPACE,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: { name: reportName, namespace: NAMESPACE },
      spec: { configName, nodeName, resourceName: "nvidia.com/gpu", revision: reportRevision },
    },
  });
}

/** How many label writes the operator logged for the config. */
const labelWrites = (): number =>
  operator.logs.filter((l) => l.includes("wrote the device labels of nodes") && l.includes(configName))
    .length;

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", "500"]);
  await core.createNode({
    body: {
      metadata: { name: nodeName, labels: { [SELECT]: "true" } },
      status: { nodeInfo: { kubeletVersion: "v1.34.4" } as V1NodeSystemInfo },
    },
  });
  // Another labeller (GFD, a user) owns one of GFD's keys before dpo comes.
  await kubectl(["label", "node", nodeName, `${FOREIGN_KEY}=999`, `--field-manager=${OTHER_MANAGER}`]);
  await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: configName },
      spec: {
        resourceName: "nvidia.com/gpu",
        backend: { type: "NVIDIA", nvidia: {} },
        nodeSelector: { [SELECT]: "true" },
      },
    },
  });
  const revision = await waitFor(`${configName}: the plugin DaemonSet`, async () => {
    const ds = await pluginDaemonSet(kc, NAMESPACE, configName);
    return ds?.metadata?.labels?.["dpo.dev/revision"];
  });
  reportRevision = revision;
  reportName = deviceNodeStateName(configName, nodeName, revision);
  await createReport();
  await publish(H100);
}, 120_000);

afterAll(async () => {
  await deleteConfigsAndWait(kc, [configName]).catch(() => undefined);
  await core.deleteNode({ name: nodeName }).catch(() => undefined);
  await operator?.stop();
}, 60_000);

describe("node labels from the plugin's report", () => {
  it("gives the node GFD's labels and dpo's from the H100 report, under the config's field manager", async () => {
    await labelsBecome("the H100 report's labels", { ...expected(8), [FOREIGN_KEY]: "999" });
    const { owned } = await deviceLabels();
    expect(owned).toEqual(Object.keys(expected(8)).sort());
    expect(owned).not.toContain(FOREIGN_KEY);
  });

  it("writes the node again when the report changes what the labels say, and not when it changes nothing", async () => {
    // The API server applies a write before the operator has its answer and logs it, so the H100 labels can
    // show before their write's line does: counted from after that line, or it would show up as a third.
    const before = await waitFor(
      `${configName}: the H100 labels' write logged`,
      () => labelWrites() || false,
    );
    await publish({ ...H100, devices: H100.devices.slice(0, 7), advertised: 7, healthy: 7 });
    await labelsBecome("a GPU fewer", { ...expected(7), [FOREIGN_KEY]: "999" });
    // A refresh that changes no labelled fact (only the update time), then one that does: two passes of
    // the config, one write.
    await publish({
      ...H100,
      devices: H100.devices.slice(0, 7),
      advertised: 7,
      healthy: 7,
      updateTime: "2026-01-01T00:05:00Z",
    });
    await publish({ ...H100, devices: H100.devices.slice(0, 6), advertised: 6, healthy: 6 });
    await labelsBecome("two GPUs fewer", { ...expected(6), [FOREIGN_KEY]: "999" });
    // The operator logs a write once its answer is back: wait for both lines. A write for the refresh would
    // have come before the last one, so it would show here as a third.
    const writes = await waitFor(`${configName}: two label writes logged`, () => {
      const n = labelWrites() - before;
      return n >= 2 ? n : false;
    });
    expect(writes).toBe(2);
  });

  it("takes them off when the config turns them off, and back when it turns them on", async () => {
    await custom.patchClusterCustomObject(
      { ...CONFIGS, name: configName, body: { spec: { nodeLabels: { enabled: false } } } },
      MERGE,
    );
    await labelsBecome("none of dpo's", { [FOREIGN_KEY]: "999" });
    expect((await deviceLabels()).owned).toEqual([]);
    await custom.patchClusterCustomObject(
      { ...CONFIGS, name: configName, body: { spec: { nodeLabels: { enabled: true } } } },
      MERGE,
    );
    await labelsBecome("dpo's again", { ...expected(6), [FOREIGN_KEY]: "999" });
  });

  it("takes them off when the config no longer selects the node, and back when it does again", async () => {
    await kubectl(["label", "node", nodeName, `${SELECT}-`]);
    await labelsBecome("none of dpo's", { [FOREIGN_KEY]: "999" });
    // The operator deletes the report of a node it no longer targets; the plugin that comes back with the
    // selection writes a new one.
    await waitFor(`${reportName}: deleted`, async () => {
      const reports = (await custom.listNamespacedCustomObject({ ...REPORTS, namespace: NAMESPACE })) as {
        items: { metadata: { name: string } }[];
      };
      return !reports.items.some((r) => r.metadata.name === reportName);
    });
    await kubectl(["label", "node", nodeName, `${SELECT}=true`]);
    await createReport();
    await publish({ ...H100, devices: H100.devices.slice(0, 6), advertised: 6, healthy: 6 });
    await labelsBecome("dpo's again", { ...expected(6), [FOREIGN_KEY]: "999" });
  });

  it("takes them off when the config is deleted, and leaves the other labeller's key", async () => {
    await deleteConfigsAndWait(kc, [configName]);
    await labelsBecome("none of dpo's", { [FOREIGN_KEY]: "999" });
    const node: V1Node = await core.readNode({ name: nodeName });
    expect((node.metadata?.managedFields ?? []).map((e) => e.manager)).not.toContain(manager);
    expect(node.metadata?.managedFields?.find((e) => e.manager === OTHER_MANAGER)).toBeDefined();
  });
});
