// End to end: the operator deletes the DeviceNodeStates of a node that left the cluster and of a node the
// config no longer selects, and keeps those of nodes it still targets.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiStatusCode, kubeConfigFromInjected, kubectl, uniqueName, waitFor } from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const REPORTS = { group: "dpo.dev", version: "v1beta1", plural: "devicenodestates" };
const LABEL = "stale.example/dev";

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const core = kc.makeApiClient(CoreV1Api);

const configName = uniqueName("e2e-stale");
const resourceName = `stale.example/${configName}`;
/** kept: stays selected; deleted: the Node object goes; unlabelled: loses the selector's label. */
const nodeNames = {
  kept: uniqueName("stale-kept"),
  deleted: uniqueName("stale-deleted"),
  unlabelled: uniqueName("stale-unlabelled"),
};
const reportName = (node: string): string => `${configName}-${node}`.slice(0, 253);

let operator: OperatorProcess;

async function reportExists(node: string): Promise<boolean> {
  try {
    await custom.getNamespacedCustomObject({ ...REPORTS, namespace: NAMESPACE, name: reportName(node) });
    return true;
  } catch (err) {
    if (apiStatusCode(err) === 404) return false;
    throw err;
  }
}

async function existingReports(): Promise<Record<string, boolean>> {
  const seen: Record<string, boolean> = {};
  for (const [role, node] of Object.entries(nodeNames)) seen[role] = await reportExists(node);
  return seen;
}

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", "500"]);
  const config = (await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: configName },
      spec: {
        resourceName,
        backend: { type: "Mock", mock: { devices: 1 } },
        nodeSelector: { [LABEL]: "true" },
      },
    },
  })) as { metadata: { uid: string } };
  for (const node of Object.values(nodeNames)) {
    // Plain Node objects (no KWOK, no kubelet): the operator only needs them to exist and be labelled.
    await core.createNode({ body: { metadata: { name: node, labels: { [LABEL]: "true" } } } });
    // What the plugin on that node would have written (the operator reads spec; status does not matter).
    await custom.createNamespacedCustomObject({
      ...REPORTS,
      namespace: NAMESPACE,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: {
          name: reportName(node),
          namespace: NAMESPACE,
          ownerReferences: [
            {
              apiVersion: "dpo.dev/v1beta1",
              kind: "DevicePluginConfig",
              name: configName,
              uid: config.metadata.uid,
            },
          ],
        },
        spec: { configName, nodeName: node, resourceName },
      },
    });
  }
}, 120_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...CONFIGS, name: configName }).catch(() => undefined);
  for (const node of Object.values(nodeNames)) await core.deleteNode({ name: node }).catch(() => undefined);
  await operator?.stop();
}, 60_000);

describe("stale DeviceNodeStates", () => {
  it("keeps every report while its node is still selected", async () => {
    // Once the operator has written the config's status it has reconciled it with all three nodes present.
    await waitFor(
      `${configName}: a status from the operator`,
      async (observe) => {
        const c = (await custom.getClusterCustomObject({ ...CONFIGS, name: configName })) as {
          status?: { nodes?: { desired?: number } };
        };
        observe(c.status);
        return c.status?.nodes?.desired === 3;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(await existingReports()).toEqual({ kept: true, deleted: true, unlabelled: true });
  });

  it("deletes the reports of a deleted node and of an unlabelled node, and only those", async () => {
    await core.deleteNode({ name: nodeNames.deleted });
    await kubectl(["label", "node", nodeNames.unlabelled, `${LABEL}-`]);
    const seen = await waitFor(
      "the reports of the deleted and the unlabelled node to be deleted",
      async (observe) => {
        const reports = await existingReports();
        observe(reports);
        return !reports.deleted && !reports.unlabelled ? reports : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(seen).toEqual({ kept: true, deleted: false, unlabelled: false });
    const logs = operator.logs.join("");
    expect(logs).toContain('"reason":"NodeGone"');
    expect(logs).toContain('"reason":"NodeNotTargeted"');
  });
});
