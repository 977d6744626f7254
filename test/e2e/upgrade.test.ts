// Plugin upgrades end to end: the operator moves a config's plugin node by node between revisions on
// simulated nodes whose kubelets differ in version: Surge where the kubelet keeps one endpoint per
// socket (v1.37.0 and later), Replace elsewhere, and not at all where the kubelet is too old. A workload
// keeps asking the kubelet for devices on the Surge nodes throughout, and not one request may fail.
import { AppsV1Api, CustomObjectsApi, Watch, type V1DaemonSet } from "@kubernetes/client-node";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { placementOfDaemonSet } from "../../src/operator/upgrade/rollout.js";
import { injectedCluster, kubeConfigFromInjected, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../kubelet-sim/node-simulator.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

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
/** Node → kubelet version; the last node's is below dpo's minimum (v1.29.0). */
let versions: Record<string, string> = {};

async function status(): Promise<DevicePluginConfigStatus | undefined> {
  const c = (await custom.getClusterCustomObject({ ...GROUP, name: NAME })) as {
    status?: DevicePluginConfigStatus;
  };
  return c.status;
}

async function statusWhere(
  what: string,
  pred: (s: DevicePluginConfigStatus) => boolean,
  timeoutMs = 120_000,
): Promise<DevicePluginConfigStatus> {
  return waitFor(
    `${NAME}: ${what}`,
    async (observe) => {
      const s = await status();
      observe(s);
      return s !== undefined && pred(s) ? s : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * Nodes the rollout holds between revisions, computed from the DaemonSets alone (not from anything
 * the operator says about itself): on the revision being moved to but still on the base (a surge in
 * progress), or off the base but not yet on the new one (a replace in progress).
 */
function nodesBetween(
  daemonSets: Iterable<V1DaemonSet>,
  modes?: { surge: Set<string>; replace: Set<string> },
): string[] {
  let exceptBase: string[] | undefined;
  let onlyNew: string[] = [];
  for (const ds of daemonSets) {
    const p = placementOfDaemonSet(ds);
    if ("except" in p) exceptBase = [...p.except];
    else onlyNew = [...onlyNew, ...p.only];
  }
  // Without a base (it is deleted once every node moved) no node is between two revisions.
  if (exceptBase === undefined) return [];
  const a = new Set(exceptBase);
  const b = new Set(onlyNew);
  // How each node was moved: on the new revision while still on the base is a surge; off the base
  // before it is on the new revision is a replace.
  for (const n of b) if (!a.has(n)) modes?.surge.add(n);
  for (const n of a) if (!b.has(n)) modes?.replace.add(n);
  return [...new Set([...a, ...b])].filter(
    (n) => a.has(n) !== b.has(n) && versions[n] !== undefined && !versions[n].startsWith("v1.28"),
  );
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(3);
  // Two Surge nodes (one with a vendor suffix), a Replace node; a fourth node, if any, too old.
  versions = { [nodes[0]!]: "v1.37.0", [nodes[1]!]: "v1.37.2+k3s1", [nodes[2]!]: "v1.34.4" };
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

    // Watch the config's DaemonSets for the whole rollout.
    const seen = new Map<string, V1DaemonSet>();
    let maxBetween = 0;
    const modes = { surge: new Set<string>(), replace: new Set<string>() };
    const watch = await new Watch(kc).watch(
      `/apis/apps/v1/namespaces/${NAMESPACE}/daemonsets`,
      { labelSelector: `dpo.dev/config=${NAME}` },
      (type, ds: V1DaemonSet) => {
        if (type === "DELETED") seen.delete(ds.metadata!.name!);
        else seen.set(ds.metadata!.name!, ds);
        maxBetween = Math.max(maxBetween, nodesBetween(seen.values(), modes).length);
      },
      () => undefined,
    );

    // A workload on the Surge nodes: one device at a time, as pods admitted one after another.
    const surgeNodes = [nodes[0]!, nodes[1]!];
    const failures: string[] = [];
    let admissions = 0;
    let stop = false;
    const workload = (async () => {
      while (!stop) {
        for (const node of surgeNodes) {
          try {
            await sim.allocate(node, RESOURCE, 1);
            admissions++;
          } catch (err) {
            failures.push(`${node}: ${(err as Error).message}`);
          }
          // The simulated device manager keeps what it handed out; give it back like a finished pod.
          const r = sim.deviceManager(node).resources.get(RESOURCE);
          r?.allocated.clear();
        }
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    })();

    try {
      await custom.patchClusterCustomObject({
        ...GROUP,
        name: NAME,
        body: [{ op: "add", path: "/spec/plugin", value: { logLevel: "debug" } }],
      });
      const done = await statusWhere(
        "the new revision on every node, Complete",
        (s) =>
          s.upgrade?.phase === "Complete" && s.upgrade.updateRevision !== from && s.upgrade.updated === 3,
        240_000,
      );
      expect(done.upgrade).toMatchObject({
        currentRevision: done.upgrade!.updateRevision,
        total: 3,
        summary: "3/3",
      });
      await waitFor("one DaemonSet left, the new revision's", () =>
        seen.size === 1 &&
        [...seen.values()][0]!.metadata?.labels?.["dpo.dev/revision"] === done.upgrade!.updateRevision
          ? true
          : undefined,
      );
    } finally {
      stop = true;
      await workload;
      watch.abort();
    }
    expect(maxBetween, "nodes between revisions at once").toBeLessThanOrEqual(1);
    expect(maxBetween, "the watch saw the rollout move").toBe(1);
    // Auto: Surge where the kubelet keeps an endpoint per socket, Replace on the older kubelet.
    expect([...modes.surge].sort()).toEqual([nodes[0]!, nodes[1]!].sort());
    expect([...modes.replace]).toEqual([nodes[2]!]);
    expect(admissions).toBeGreaterThan(0);
    expect(failures).toEqual([]);
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
    expect(base && placementOfDaemonSet(base)).toEqual({ except: [] });
  });
});
