// End to end: the operator deletes the DeviceNodeStates of a node that left the cluster and of a node the
// config no longer selects, one an earlier plugin version wrote under plain `<config>-<node>` once the
// current one exists, one under another node's name and those of configs that do not exist (a flood of them
// leaves no per-config state behind), and keeps the current reports of nodes it still targets.
import { CoreV1Api, CustomObjectsApi, type V1NodeSystemInfo } from "@kubernetes/client-node";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deviceNodeStateName } from "../../src/contract/node-state.js";
import {
  apiStatusCode,
  kubeConfigFromInjected,
  kubectl,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { operatorHeapFlags } from "../../tools/manifests/operator-heap-flags.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const REPO = resolve(import.meta.dirname, "../..");
/** The operator Deployment's memory limit (config/manager/deployment.yaml). */
const OPERATOR_MEMORY_LIMIT = 256 * 2 ** 20;

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const REPORTS = { group: "dpo.dev", version: "v1beta1", plural: "devicenodestates" };
const LABEL = "stale.example/dev";
/**
 * Reports of configs that never existed written at once: 2,000 in `make test`; DPO_E2E_GHOST_REPORTS=10000 for
 * issue 33's full measurement (the figures are in docs/security.md).
 */
const GHOST_REPORTS = Number(process.env.DPO_E2E_GHOST_REPORTS ?? "2000");

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
/** The name the current plugin gives a node's report. */
/** The plugin revision the operator renders for the config; current plugins name their report with it. */
let revision = "";
const reportName = (node: string): string => deviceNodeStateName(configName, node, revision);
/** The name plugins gave it before report names were made unique. */
const oldReportName = (node: string): string => `${configName}-${node}`;

let operator: OperatorProcess;
let configUid: string;

async function reportExists(node: string, name = reportName(node)): Promise<boolean> {
  try {
    await custom.getNamespacedCustomObject({ ...REPORTS, namespace: NAMESPACE, name });
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
  // Under the Deployment's heap, so what a flood of reports costs shows as it would in a cluster.
  operator = await startOperator(
    ["--status-write-interval", "500"],
    {},
    { nodeFlags: operatorHeapFlags(REPO) },
  );
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
  configUid = config.metadata.uid;
  revision = await waitFor(`${configName}: the plugin DaemonSet`, async () => {
    const ds = await pluginDaemonSet(kc, NAMESPACE, configName);
    return ds?.metadata?.labels?.["dpo.dev/revision"];
  });
  for (const node of Object.values(nodeNames)) {
    // Plain Node objects (no KWOK, no kubelet): the operator only needs them to exist, be labelled and
    // name a kubelet version it supports (a node whose kubelet is too old is not targeted at all).
    await core.createNode({
      body: {
        metadata: { name: node, labels: { [LABEL]: "true" } },
        status: { nodeInfo: { kubeletVersion: "v1.34.4" } as V1NodeSystemInfo },
      },
    });
    await createReport(node, reportName(node), revision);
  }
}, 120_000);

/** What the plugin on `node` would have written (the operator reads spec; status does not matter). */
async function createReport(
  node: string,
  name: string,
  reportRevision?: string,
  ofConfig = configName,
): Promise<void> {
  await custom.createNamespacedCustomObject({
    ...REPORTS,
    namespace: NAMESPACE,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: {
        name,
        namespace: NAMESPACE,
        ...(ofConfig === configName
          ? {
              ownerReferences: [
                {
                  apiVersion: "dpo.dev/v1beta1",
                  kind: "DevicePluginConfig",
                  name: configName,
                  uid: configUid,
                },
              ],
            }
          : {}),
      },
      spec: {
        configName: ofConfig,
        nodeName: node,
        resourceName,
        ...(reportRevision !== undefined ? { revision: reportRevision } : {}),
      },
    },
  });
}

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

  it("deletes the report an earlier plugin wrote under <config>-<node> and keeps the current one", async () => {
    const old = oldReportName(nodeNames.kept);
    expect(old).not.toBe(reportName(nodeNames.kept));
    // As a plugin of the earlier version left it on a node whose new plugin already writes the new name.
    await createReport(nodeNames.kept, old);
    // The log line follows the DELETE's answer, so wait for both rather than assume their order.
    const line = await waitFor(
      `${old} to be deleted as superseded`,
      async (observe) => {
        const exists = await reportExists(nodeNames.kept, old);
        const logged = operator.logs
          .join("")
          .split("\n")
          .find((l) => l.includes(`"report":"${old}"`));
        observe({ exists, logged });
        return !exists && logged !== undefined ? logged : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(line).toContain('"reason":"Superseded"');
    expect(line).toContain(`"replacedBy":"${reportName(nodeNames.kept)}"`);
    expect(await existingReports()).toEqual({ kept: true, deleted: true, unlabelled: true });
  });

  /** Waits until the report `name` is gone and the operator logged its deletion; returns the log line. */
  async function deletedAndLogged(name: string, why: string): Promise<string> {
    return waitFor(
      `${name} to be deleted ${why}`,
      async (observe) => {
        const exists = await reportExists("", name);
        const logged = operator.logs
          .join("")
          .split("\n")
          .find((l) => l.includes(`"report":"${name}"`));
        observe({ exists, logged });
        return !exists && logged !== undefined ? logged : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }

  it("deletes a report under another node's name (a squat), and keeps the current ones", async () => {
    // Node "elsewhere"'s report name, with a node of the config in the spec: its plugin could never write it.
    const squat = deviceNodeStateName(configName, uniqueName("stale-elsewhere"), revision);
    await createReport(nodeNames.unlabelled, squat, revision);
    const line = await deletedAndLogged(squat, "as superseded by the node's own report");
    // Beside the node's current report a squat is Superseded, as any other name; without one, Misnamed
    // (stale-reports.ts, unit-tested in test/unit/operator/controllers/per-config-state.test.ts).
    expect(line).toContain('"reason":"Superseded"');
    expect(line).toContain(`"replacedBy":"${reportName(nodeNames.unlabelled)}"`);
    expect(await existingReports()).toEqual({ kept: true, deleted: true, unlabelled: true });
  });

  it("deletes a report of a config that does not exist", async () => {
    const ghost = uniqueName("e2e-ghost");
    const name = deviceNodeStateName(ghost, nodeNames.kept);
    await createReport(nodeNames.kept, name, undefined, ghost);
    const line = await deletedAndLogged(name, "with its config gone");
    expect(line).toContain('"reason":"ConfigGone"');
    expect(await existingReports()).toEqual({ kept: true, deleted: true, unlabelled: true });
  });

  it(`deletes ${GHOST_REPORTS} reports of configs that never existed, keeping no state or series for them`, async () => {
    /** Every report in the namespace, counted by the API server (a list of one and what remains). */
    const reportCount = async (): Promise<number> => {
      const list = (await custom.listNamespacedCustomObject({
        ...REPORTS,
        namespace: NAMESPACE,
        limit: 1,
      })) as {
        items: unknown[];
        metadata?: { remainingItemCount?: number };
      };
      return list.items.length + (list.metadata?.remainingItemCount ?? 0);
    };
    const metricsText = async (): Promise<string> =>
      (await fetch(`http://127.0.0.1:${operator.metricsPort}/metrics`)).text();
    const configSeries = (text: string): number =>
      text.split("\n").filter((l) => l.startsWith("dpo_config_")).length;
    const others = await reportCount();
    const seriesBefore = configSeries(await metricsText());
    const rssBefore = await operator.metric("process_resident_memory_bytes");
    const started = performance.now();
    // As a plugin token of one node could write them: each names a config that never existed, under the
    // name that (config, node) gives it, so the admission policy would let a node write every one.
    const prefix = uniqueName("e2e-flood");
    for (let i = 0; i < GHOST_REPORTS; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, GHOST_REPORTS - i) }, (_, j) => {
          const ghost = `${prefix}-${i + j}`;
          return createReport(nodeNames.kept, deviceNodeStateName(ghost, nodeNames.kept), undefined, ghost);
        }),
      );
    }
    const written = performance.now();
    let mostTracked = 0;
    await waitFor(
      `the ${GHOST_REPORTS} reports of configs that never existed to be deleted`,
      async (observe) => {
        const left = (await reportCount()) - others;
        const tracked = await operator.metric("dpo_operator_configs_with_unseen_writes");
        mostTracked = Math.max(mostTracked, tracked);
        observe({ left, tracked });
        return left <= 0;
      },
      { timeoutMs: 600_000, intervalMs: 1_000 },
    );
    const text = await metricsText();
    const rssAfter = await operator.metric("process_resident_memory_bytes");
    console.log(
      `${GHOST_REPORTS} reports of configs that never existed: written in ${((written - started) / 1000).toFixed(1)} s, ` +
        `all deleted ${((performance.now() - written) / 1000).toFixed(1)} s later; configs with unseen writes at most ` +
        `${mostTracked}; operator RSS ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
    );
    // Per-config state is kept only while a config's writes are unseen, and these configs have none left.
    expect(mostTracked).toBeLessThanOrEqual(2);
    expect(await operator.metric("dpo_operator_configs_with_unseen_writes")).toBe(0);
    // No series for a config that does not exist, and the real config's are still there.
    expect(configSeries(text)).toBe(seriesBefore);
    expect(text).not.toContain(prefix);
    expect(rssAfter).toBeLessThan(OPERATOR_MEMORY_LIMIT);
    expect(await existingReports()).toEqual({ kept: true, deleted: true, unlabelled: true });
  }, 900_000);

  it("deletes the reports of a deleted node and of an unlabelled node, and only those", async () => {
    await core.deleteNode({ name: nodeNames.deleted });
    await kubectl(["label", "node", nodeNames.unlabelled, `${LABEL}-`]);
    // The log lines follow the DELETEs' answers, so wait for the reports and the lines together.
    const seen = await waitFor(
      "the reports of the deleted and the unlabelled node to be deleted, and why logged",
      async (observe) => {
        const reports = await existingReports();
        const logs = operator.logs.join("");
        const reasons = {
          nodeGone: logs.includes('"reason":"NodeGone"'),
          nodeNotTargeted: logs.includes('"reason":"NodeNotTargeted"'),
        };
        observe({ reports, reasons });
        return !reports.deleted && !reports.unlabelled && reasons.nodeGone && reasons.nodeNotTargeted
          ? reports
          : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(seen).toEqual({ kept: true, deleted: false, unlabelled: false });
  });
});
