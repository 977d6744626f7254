// Plugin upgrades end to end: the operator moves a config's plugin node by node between revisions on
// simulated nodes whose kubelets differ in version: Surge where the kubelet keeps one endpoint per
// socket (v1.37.0 and later), Replace elsewhere, and not at all where the kubelet is too old. A workload
// keeps asking the kubelet for devices on the Surge nodes throughout, and not one request may fail.
import { AppsV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { roleOfDaemonSet } from "../../src/operator/upgrade/daemonset-state.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";
import { allocateWorkload, configStatusWhere, RolloutWatch } from "./upgrade-support.js";

const GROUP = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NAME = uniqueName("e2e-upg");
const RESOURCE = `upgrade.example/${NAME}`;
const DEVICES = 2;

const kc = kubeConfigFromInjected();
const custom = kc.makeApiClient(CustomObjectsApi);
const apps = kc.makeApiClient(AppsV1Api);

let nodes: string[] = [];
let sim: KubeletSimulator;
let operator: OperatorProcess;

const statusWhere = (
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs?: number,
): Promise<DevicePluginConfigStatus> => configStatusWhere(custom, NAME, what, pred, timeoutMs);

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(3);
  // Two Surge nodes (one with a vendor suffix), a Replace node; a fourth node, if any, too old.
  const versions = { [nodes[0]!]: "v1.37.0", [nodes[1]!]: "v1.37.2+k3s1", [nodes[2]!]: "v1.34.4" };
  await installDpo();
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    kubeletVersions: versions,
  });
  operator = await startOperator(["--status-write-interval", "250"]);
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: NAME },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: DEVICES, idPrefix: "u" } },
        upgrade: { maxUnavailable: 1, progressDeadlineSeconds: 60 },
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await custom.deleteClusterCustomObject({ ...GROUP, name: NAME }).catch(() => undefined);
  await operator?.stop();
  await sim?.stop();
}, 120_000);

describe("a plugin upgrade across kubelets of different versions", () => {
  it("rolls node by node, never more than maxUnavailable in flight, with no failed admission on Surge nodes", async () => {
    const first = await statusWhere(
      "Ready on every node, upgrade Complete",
      (s) =>
        s.conditions?.find((c) => c.type === "Ready")?.status === "True" &&
        s.upgrade?.phase === "Complete" &&
        s.nodes?.desired === 3,
    );
    const from = first.upgrade!.updateRevision;

    // The config's DaemonSets for the whole rollout, and a workload on the Surge nodes.
    const watch = new RolloutWatch(1);
    await watch.start(kc, NAMESPACE, NAME);
    const workload = allocateWorkload(sim, [nodes[0]!, nodes[1]!], RESOURCE);
    let result: { admissions: number; failures: string[] } | undefined;
    const moving: DevicePluginConfigStatus[] = [];
    try {
      await custom.patchClusterCustomObject({
        ...GROUP,
        name: NAME,
        body: [{ op: "add", path: "/spec/plugin", value: { logLevel: "debug" } }],
      });
      const done = await statusWhere(
        "the new revision on every node, Complete",
        (s) => {
          if (s.upgrade?.phase === "Progressing") moving.push(s);
          return (
            s.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== from && s.upgrade.updated === 3
          );
        },
        240_000,
      );
      expect(done.upgrade).toMatchObject({
        currentRevision: done.upgrade!.updateRevision,
        total: 3,
        summary: "3/3",
      });
      await waitFor("one DaemonSet left, the new revision's", () => {
        const left = [...watch.daemonSets.values()];
        return left.length === 1 &&
          left[0]!.metadata?.labels?.["dpo.dev/revision"] === done.upgrade!.updateRevision
          ? true
          : undefined;
      });
    } finally {
      result = await workload.stop();
      watch.stop();
    }
    console.log(`rollout watches: ${JSON.stringify(watch.health())}`);
    expect(watch.liveness(nodes.slice(0, 3)), "the rollout's watches were alive").toEqual([]);
    expect(watch.violations).toEqual([]);
    expect(watch.maxBetween, "nodes between revisions at once").toBeLessThanOrEqual(1);
    expect(watch.maxBetween, "the watch saw the rollout move").toBe(1);
    // Auto: Surge where the kubelet keeps an endpoint per socket; on the older kubelet a Replace with the
    // new plugin started ahead, standing by until the old one has stopped.
    expect([...watch.surged].sort()).toEqual([nodes[0]!, nodes[1]!].sort());
    expect([...watch.stoodBy]).toEqual([nodes[2]!]);
    expect([...watch.reportedStandingBy], "the new plugin's report said StandingBy").toEqual([nodes[2]!]);
    expect([...watch.replaced]).toEqual([]);
    expect(result?.admissions).toBeGreaterThan(0);
    expect(result?.failures).toEqual([]);
    // What `kubectl get dpc` showed while nodes moved: NODES counts the nodes serving devices, which
    // is every node but the one Replace node in its gap (maxUnavailable 1), and Ready is False (the
    // spec is not rolled out yet: kstatus InProgress, Argo CD Progressing) with a message that says so.
    expect(moving.length, "statuses seen while the upgrade was Progressing").toBeGreaterThan(0);
    for (const s of moving) {
      expect(
        s.nodes?.available,
        JSON.stringify({ nodes: s.nodes, upgrade: s.upgrade, problems: s.problems }),
      ).toBeGreaterThanOrEqual(2);
      expect(s.nodes?.summary).toBe(`${s.nodes?.available}/3`);
      expect(s.conditions?.find((c) => c.type === "Ready")).toMatchObject({
        status: "False",
        reason: "UpgradeProgressing",
        message: expect.stringMatching(/; [23]\/3 nodes serve devices$/),
      });
    }
  });

  it("rolls a version that never registers back on the first node and leaves the others untouched", async () => {
    const before = await statusWhere("Complete", (s) => s.upgrade?.phase === "Complete");
    const good = before.upgrade!.updateRevision;
    // A build that starts and runs but never registers with the kubelet (hung before registration).
    const broken = "registry.example/dpo:never-registers";
    const dir = mkdtempSync(join(tmpdir(), "dpo-broken-"));
    const entrypoint = join(dir, "never-registers.mjs");
    writeFileSync(entrypoint, "setInterval(() => undefined, 1 << 30);\n");
    sim.addImage(broken, entrypoint);
    await custom.patchClusterCustomObject({
      ...GROUP,
      name: NAME,
      body: [{ op: "add", path: "/spec/plugin/image", value: broken }],
    });
    const rolledBack = await statusWhere(
      "RolledBack after the first node missed its deadline",
      (s) => s.upgrade?.phase === "RolledBack",
      240_000,
    );
    expect(rolledBack.upgrade?.failed).toHaveLength(1);
    expect(rolledBack.conditions?.find((c) => c.type === "Stalled")).toMatchObject({
      status: "True",
      reason: "UpgradeRolledBack",
    });
    // Every node runs the good revision and advertises its devices.
    for (const node of nodes.slice(0, 3)) {
      await waitFor(
        `${node} to advertise ${DEVICES} devices`,
        () => sim.capacity(node, RESOURCE)?.allocatable === DEVICES,
      );
    }
    const list = await apps.listNamespacedDaemonSet({
      namespace: NAMESPACE,
      labelSelector: `dpo.dev/config=${NAME}`,
    });
    const base = list.items.find((ds) => ds.metadata?.labels?.["dpo.dev/revision"] === good);
    expect(base && roleOfDaemonSet(base)).toBe("base");
  });
});
