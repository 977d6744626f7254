// The operator and its plugins through a bad network and a bad day of the API server. Their API traffic
// goes through a fault-injecting TCP proxy (test/cluster/fault-proxy.ts: watch connections dropped,
// connections reset mid-request, responses delayed, all from one seed) while the world changes under
// them: devices turn unhealthy and healthy again, a plugin upgrade runs, a competing writer keeps
// changing the configs and their DaemonSets (so the operator's rollout writes meet 409 Conflicts) and
// overwrites a status field now and then, and halfway
// through the API goes away, etcd is compacted and the API server restarts (so watches resume from a
// compacted resourceVersion: 410 Gone). When the faults stop, every config's status must match the
// truth within 10 s, nothing may be lost, no process may have crashed, and the retries must have stayed
// bounded. The simulated kubelets (the truth on the nodes) reach the API server directly.
//
// `make test` runs a 20 s fault window; `make chaos-api` a longer one (DPO_API_FAULT_SECONDS, and
// DPO_API_FAULT_SEED to replay a run).
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { LABEL_CONFIG, configLabelValue } from "../../src/contract/names.js";
import { compactEtcd, restartApiServer } from "../../tools/cluster/cluster.js";
import { serveConversionFromTest, type TestConversionWebhook } from "../cluster/conversion-webhook.js";
import { startFaultProxy, type FaultPlan, type FaultProxy } from "../cluster/fault-proxy.js";
import { injectedCluster, uniqueName, waitFor } from "../cluster/helpers.js";
import { KubeletSimulator } from "../../tools/kubelet-sim/node-simulator.js";
import { samplesOf } from "../metrics/exposition.js";
import {
  deleteConfigsAndWait,
  installDpo,
  NAMESPACE,
  startOperator,
  type OperatorProcess,
} from "./support.js";
import {
  CONFIGS,
  HEALTH_FILE,
  TICK_LABEL,
  kc,
  custom,
  core,
  apps,
  A,
  B,
  SUBJECTS,
  upgradedFrom,
  unhealthyA,
  readConfig,
  differences,
  worldSettled,
  delta,
  total,
} from "./api-faults-support.js";

const FAULT_SECONDS = Number(process.env.DPO_API_FAULT_SECONDS ?? "20");
const SEED = Number(process.env.DPO_API_FAULT_SEED ?? "20261123");
/** What the acceptance asks: the status is the truth again this soon after the faults stop. */
const CONVERGE_MS = 10_000;
const PLAN: FaultPlan = {
  resetPerChunk: 0.05,
  delayPerChunk: 0.2,
  maxDelayMs: 400,
  dropAfterMs: [1_000, 4_000],
};

let nodes: string[] = [];
let proxy: FaultProxy | undefined;
let sim: KubeletSimulator | undefined;
let operator: OperatorProcess | undefined;
let conversion: TestConversionWebhook | undefined;

function writeHealth(node: string): void {
  const content = Object.fromEntries(
    (unhealthyA.get(node) ?? []).map((id) => [id, { health: "Unhealthy", reason: "XidError" }]),
  );
  sim!.writeHostFile(node, HEALTH_FILE, JSON.stringify(content));
}

function setUnhealthy(node: string, ids: string[]): void {
  unhealthyA.set(node, ids);
  writeHealth(node);
}

async function converged(label: string, timeoutMs: number): Promise<number> {
  const started = Date.now();
  await waitForTruth(label, timeoutMs).catch((err: unknown) => {
    // What the operator was doing is the first thing to read when it did not get there.
    console.log(`operator log, last lines:\n${operator?.logs.join("").split("\n").slice(-80).join("\n")}`);
    throw err;
  });
  return Date.now() - started;
}

async function waitForTruth(label: string, timeoutMs: number): Promise<void> {
  await waitFor(
    label,
    async (observe) => {
      const all = await Promise.all(
        SUBJECTS.map(async (s): Promise<[string, string[]]> => [s.name, await differences(s, nodes)]),
      );
      const diffs = all.filter(([, d]) => d.length > 0);
      observe(diffs);
      return diffs.length === 0;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

async function operatorCounts(): Promise<{
  requests: Record<string, number>;
  /** The same requests by verb and code ("DELETE 404"), to say what a failing count was made of. */
  byVerb: Record<string, number>;
  restarts: Record<string, number>;
}> {
  const text = await (await fetch(`http://127.0.0.1:${operator!.metricsPort}/metrics`)).text();
  const requests: Record<string, number> = {};
  const byVerb: Record<string, number> = {};
  for (const s of samplesOf(text, "dpo_operator_api_requests_total")) {
    requests[s.labels.code!] = (requests[s.labels.code!] ?? 0) + s.value;
    const key = `${s.labels.verb} ${s.labels.code}`;
    byVerb[key] = (byVerb[key] ?? 0) + s.value;
  }
  const restarts: Record<string, number> = {};
  for (const s of samplesOf(text, "dpo_operator_watch_restarts_total")) {
    restarts[s.labels.reason!] = (restarts[s.labels.reason!] ?? 0) + s.value;
  }
  return { requests, byVerb, restarts };
}

async function pluginReportErrors(): Promise<number> {
  let sum = 0;
  for (const p of sim!.plugins().filter((p) => p.running && p.metricsUrl !== undefined)) {
    const text = await (await fetch(p.metricsUrl!)).text();
    for (const s of samplesOf(text, "dpo_plugin_report_writes_total", { result: "error" })) sum += s.value;
  }
  return sum;
}

beforeAll(async () => {
  nodes = injectedCluster().nodeNames;
  expect(nodes.length).toBeGreaterThanOrEqual(2);
  expect(
    injectedCluster().stateDir,
    "the test restarts the API server: it needs a cluster it started",
  ).not.toBe("");
  await installDpo();
  conversion = await serveConversionFromTest();
  const server = new URL(kc.getCurrentCluster()!.server);
  proxy = await startFaultProxy({ host: server.hostname, port: Number(server.port) }, SEED);
  sim = await KubeletSimulator.start({
    kubeconfig: kc,
    nodes,
    gracePeriodMs: 60_000,
    pluginMetrics: true,
    pluginApiServer: proxy.url,
  });
  for (const node of nodes) setUnhealthy(node, []);
  // Leader election on, as the Deployment runs it, with a renew deadline longer than the outage below:
  // the Lease renewals go through the faults too.
  operator = await startOperator(
    [
      "--status-write-interval",
      "500",
      "--leader-elect",
      "true",
      "--leader-election-id",
      uniqueName("e2e-faults"),
      "--lease-duration",
      "40",
      "--renew-deadline",
      "30",
      "--retry-period",
      "2",
    ],
    { DPO_LOG_LEVEL: process.env.DPO_API_FAULT_LOG_LEVEL ?? "info" },
    { apiServer: proxy.url },
  );
  for (const s of SUBJECTS) {
    await custom.createClusterCustomObject({
      ...CONFIGS,
      body: {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DevicePluginConfig",
        metadata: { name: s.name },
        spec: {
          resourceName: s.resource,
          backend: {
            type: "Mock",
            mock: {
              devices: s.devices,
              idPrefix: s.idPrefix,
              ...(s.healthFile ? { healthFile: s.healthFile } : {}),
            },
          },
        },
      },
    });
  }
}, 300_000);

afterAll(async () => {
  proxy?.setFaults(undefined);
  proxy?.setRefusing(false);
  // The next file's simulator must not find this file's plugin pods still on the shared nodes.
  await deleteConfigsAndWait(
    kc,
    SUBJECTS.map((s) => s.name),
  ).finally(async () => {
    await operator?.stop();
    await sim?.stop();
  });
  await proxy?.close();
  await conversion?.stop();
}, 120_000);

describe("API faults", () => {
  it(`puts the truth back within ${CONVERGE_MS / 1000} s when someone else writes a config's status, with nothing else changing`, async () => {
    await converged("both configs at the truth", 120_000);
    // What the write left (its answer): the operator may have put the truth back before a read could see it.
    const overwritten = (await custom.patchClusterCustomObjectStatus(
      { ...CONFIGS, name: A.name, body: { status: { nodes: { ready: 0 }, devices: { unhealthy: 1 } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as { status?: DevicePluginConfigStatus };
    expect(overwritten.status?.nodes?.ready).toBe(0);
    await converged("the operator to put A's status right again", CONVERGE_MS);
  }, 180_000);

  it(`after ${FAULT_SECONDS} s of dropped, reset and delayed API connections, 409s, an etcd compaction and an API server restart, every status is the truth within ${CONVERGE_MS / 1000} s`, async () => {
    await converged("both configs at the truth before any fault", 120_000);
    const operatorPid = operator!.child.pid;
    const pluginPids = new Map(
      sim!
        .plugins()
        .filter((p) => p.running)
        .map((p) => [p.podUid, p.pid]),
    );
    expect(pluginPids.size).toBe(nodes.length * SUBJECTS.length);
    const aPods = new Set(
      sim!
        .plugins()
        .filter((p) => p.running && p.slot.startsWith(`${NAMESPACE}/${configLabelValue(A.name)}/`))
        .map((p) => p.podUid),
    );
    expect(aPods.size).toBe(nodes.length);
    const before = await operatorCounts();
    const reportErrorsBefore = await pluginReportErrors();

    // A competing writer, as another controller or a GitOps tool would be: it labels the configs,
    // annotates B's plugin DaemonSets and the Nodes (node-feature-discovery and autoscalers write Nodes
    // all the time), and now and then writes a wrong status field, which the operator must put right.
    // The operator writes DaemonSets with PUTs and a rollout's Node patches with the resourceVersion it
    // planned from, so its rollout writes meet 409 Conflicts.
    let ticks = 0;
    let writerFailures = 0;
    let writing = true;
    const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    const writer = (async () => {
      while (writing) {
        ticks++;
        const tick = String(ticks);
        for (const s of SUBJECTS) {
          await custom
            .patchClusterCustomObject(
              { ...CONFIGS, name: s.name, body: { metadata: { labels: { [TICK_LABEL]: tick } } } },
              merge,
            )
            .catch(() => writerFailures++);
          if (ticks % 4 === 0) {
            await custom
              .patchClusterCustomObjectStatus(
                { ...CONFIGS, name: s.name, body: { status: { nodes: { ready: 0 } } } },
                merge,
              )
              .catch(() => writerFailures++);
          }
        }
        const owned = await apps
          .listNamespacedDaemonSet({
            namespace: NAMESPACE,
            labelSelector: `${LABEL_CONFIG}=${configLabelValue(B.name)}`,
          })
          .catch(() => ({ items: [] }));
        for (const ds of owned.items) {
          await apps
            .patchNamespacedDaemonSet(
              {
                name: ds.metadata!.name!,
                namespace: NAMESPACE,
                body: { metadata: { annotations: { [TICK_LABEL]: tick } } },
              },
              merge,
            )
            .catch(() => writerFailures++);
        }
        await Promise.all(
          nodes.map((node) =>
            core
              .patchNode({ name: node, body: { metadata: { annotations: { [TICK_LABEL]: tick } } } }, merge)
              .catch(() => writerFailures++),
          ),
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();

    upgradedFrom.set(B.name, (await readConfig(B.name)).status!.upgrade!.currentRevision);
    const faultsFrom = Date.now();
    proxy!.setFaults(PLAN);
    /** Time spent in the outage, which does not count towards the fault window. */
    let shifted = 0;
    const at = (fraction: number) =>
      new Promise((resolve) =>
        setTimeout(resolve, Math.max(0, faultsFrom + shifted + fraction * FAULT_SECONDS * 1000 - Date.now())),
      );
    let outage: { heldMs: number; compactedTo: number } | undefined;
    try {
      await at(0.05);
      // A plugin upgrade of B (a new revision on every node, two at a time) runs through the faults.
      await custom.patchClusterCustomObject(
        {
          ...CONFIGS,
          name: B.name,
          body: { spec: { plugin: { logLevel: "debug" }, upgrade: { maxUnavailable: 2 } } },
        },
        merge,
      );
      await at(0.15);
      setUnhealthy(nodes[0]!, [`${A.idPrefix}-1`]);
      await at(0.4);
      // The API goes away for the operator and the plugins: their connections close, and the ones they
      // open wait in the proxy. Meanwhile the world moves on, etcd's history is compacted and the API
      // server restarts with an empty watch cache; the informers then resume their watches from
      // resourceVersions the new API server no longer has (410 Gone) and relist.
      const heldAt = Date.now();
      proxy!.setHolding(true);
      setUnhealthy(nodes[1]!, [`${A.idPrefix}-0`, `${A.idPrefix}-1`]);
      await waitFor("the simulated kubelet to advertise the unhealthy devices", async () => {
        const n = await core.readNode({ name: nodes[1]! });
        return n.status?.allocatable?.[A.resource] === "0";
      });
      const compactedTo = await compactEtcd(injectedCluster().stateDir);
      await restartApiServer(injectedCluster().stateDir, injectedCluster().kubeconfigPath);
      proxy!.setHolding(false);
      outage = { heldMs: Date.now() - heldAt, compactedTo };
      shifted = outage.heldMs;
      await at(0.75);
      setUnhealthy(nodes[0]!, []);
      await at(1);
    } finally {
      proxy!.setFaults(undefined);
      writing = false;
      await writer;
    }
    const faultMs = Date.now() - faultsFrom;
    console.log(
      `API faults over: ${(faultMs / 1000).toFixed(1)} s, proxy ${JSON.stringify(proxy!.counts())}, ` +
        `outage ${outage?.heldMs} ms`,
    );
    // The world itself may still be moving when the faults stop: B's upgrade goes on at its own pace
    // (the gate, the kubelet's readiness probes). The status must follow the truth within 10 s of the
    // later of the last fault and the world's last change, read from the API, not from the status.
    const settledAt = await worldSettled(nodes);
    const faultsEndedAt = faultsFrom + faultMs;
    const convergeStart = Math.max(faultsEndedAt, settledAt);
    await converged(
      `every status at the truth within ${CONVERGE_MS} ms of the last fault and of the last change`,
      Math.max(1_000, convergeStart + CONVERGE_MS - Date.now()),
    );
    const convergedMs = Date.now() - convergeStart;
    console.log(
      `world settled ${Math.max(0, settledAt - faultsEndedAt)} ms after the last fault; status right ${convergedMs} ms after that`,
    );

    const after = await operatorCounts();
    const requests = delta(after.requests, before.requests);
    const restarts = delta(after.restarts, before.restarts);
    const reportErrors = (await pluginReportErrors()) - reportErrorsBefore;
    const faults = proxy!.counts();
    console.log(
      `API faults (seed ${SEED}, ${(faultMs / 1000).toFixed(1)} s): proxy ${JSON.stringify(faults)}; ` +
        `outage ${outage?.heldMs} ms, etcd compacted to ${outage?.compactedTo}; competing writer ${ticks} rounds ` +
        `(${writerFailures} failed); operator requests by code ${JSON.stringify(requests)}, ` +
        `informer restarts ${JSON.stringify(restarts)}; plugin report write errors ${reportErrors}; converged in ${convergedMs} ms`,
    );

    // The faults happened: otherwise this proves nothing.
    expect(faults.resets, "connections reset").toBeGreaterThan(0);
    expect(faults.drops, "connections dropped").toBeGreaterThan(0);
    expect(faults.delayedChunks, "chunks delayed").toBeGreaterThan(0);
    expect(faults.held, "connections that waited out the outage").toBeGreaterThan(0);
    expect(
      requests["409"] ?? 0,
      "DaemonSet and Node writes that met the competing writer (409)",
    ).toBeGreaterThan(0);
    expect(
      restarts.expired ?? 0,
      "watches that resumed from a compacted resourceVersion (410)",
    ).toBeGreaterThan(0);

    // Nothing crashed: the same operator process; A's plugins the same processes, still running; every
    // plugin process that ended (B's, replaced by its upgrade) ended cleanly when its pod went.
    expect(operator!.child.exitCode).toBeNull();
    expect(operator!.child.pid).toBe(operatorPid);
    const slotOf = (name: string) => `${NAMESPACE}/${configLabelValue(name)}`;
    const aNow = new Map(
      sim!
        .plugins()
        .filter((p) => p.running && p.slot.startsWith(`${slotOf(A.name)}/`))
        .map((p) => [p.podUid, p.pid]),
    );
    const aBefore = new Map([...pluginPids].filter(([uid]) => aPods.has(uid)));
    expect(aNow).toEqual(aBefore);
    const ended = sim!.plugins().filter((p) => !p.running);
    expect(ended.filter((p) => p.exit?.code !== 0).map((p) => `${p.pod} ${JSON.stringify(p.exit)}`)).toEqual(
      [],
    );
    expect(sim!.plugins().filter((p) => p.running && p.slot.startsWith(`${slotOf(B.name)}/`))).toHaveLength(
      nodes.length,
    );

    // Nothing lost: the specs and the competing writer's last label, one DaemonSet per config, one current
    // report per config and node.
    for (const s of SUBJECTS) {
      const config = await readConfig(s.name);
      expect(config.metadata.labels?.[TICK_LABEL]).toBe(String(ticks));
      expect(config.spec).toMatchObject({
        resourceName: s.resource,
        backend: { mock: { devices: s.devices } },
      });
    }
    expect((await readConfig(B.name)).spec).toMatchObject({
      plugin: { logLevel: "debug" },
      upgrade: { maxUnavailable: 2 },
    });
    const daemonSets = await apps.listNamespacedDaemonSet({ namespace: NAMESPACE });
    for (const s of SUBJECTS) {
      const owned = daemonSets.items.filter(
        (d) => d.metadata?.labels?.[LABEL_CONFIG] === configLabelValue(s.name),
      );
      expect(
        owned.map((d) => d.metadata?.name),
        `DaemonSets of ${s.name}`,
      ).toHaveLength(1);
    }
    // The competing writer's last annotation is still on B's DaemonSet: no operator write clobbered it.
    const bSet = daemonSets.items.find(
      (d) => d.metadata?.labels?.[LABEL_CONFIG] === configLabelValue(B.name),
    );
    expect(bSet?.metadata?.annotations?.[TICK_LABEL]).toBe(String(ticks));
    // And on the Nodes, whose labels the rollout patched meanwhile.
    for (const node of nodes) {
      const n = await core.readNode({ name: node });
      expect(n.metadata?.annotations?.[TICK_LABEL], `${node}'s annotation`).toBe(String(ticks));
    }
    const reports = (await custom.listNamespacedCustomObject({
      group: "dpo.dev",
      version: "v1beta1",
      namespace: NAMESPACE,
      plural: "devicenodestates",
    })) as { items: { spec: { configName: string; nodeName: string; revision?: string } }[] };
    for (const s of SUBJECTS) {
      // Reports of the revision each config runs now; those of B's previous revision are deleted by the
      // operator a grace period after they were written (REVISION_GONE_GRACE_MS), not lost.
      const current = (await readConfig(s.name)).status?.upgrade?.currentRevision;
      const mine = reports.items
        .filter((r) => r.spec.configName === s.name && r.spec.revision === current)
        .map((r) => r.spec.nodeName);
      expect(mine.sort(), `reports of ${s.name} at revision ${current}`).toEqual([...nodes].sort());
    }

    // Retries stayed bounded: a client without backoff retries hundreds of times a second when every
    // request fails; with backoff, the operator's requests over the whole window stay at a few per second
    // (the quiet operator makes none, the Lease renewals one every 2 s), and each of its six informers
    // restarts at most once per initial backoff (500 ms) or 410.
    const perSecond = total(requests) / (faultMs / 1000);
    expect(
      perSecond,
      `operator requests per second during the faults: ${JSON.stringify(requests)}`,
    ).toBeLessThan(40);
    expect(total(restarts), "informer restarts").toBeLessThanOrEqual(6 * Math.ceil(faultMs / 500));
    // And once it has recovered, quiet: no request but the Lease renewals (one per retry period). The
    // statuses are right before the operator is done recovering: informers whose watch failed during the
    // faults resume it after their backoff (up to 5 s), and until the DaemonSet watch is back a write
    // planned from its cache can meet a 409 once more. So the operator must go quiet within 30 s, and a
    // loop that keeps it busy never does.
    await waitFor(
      "5 s in which the operator makes no request but its Lease renewals",
      async (observe) => {
        const from = await operatorCounts();
        // A measuring window, not a wait for anything.
        await new Promise((resolve) => setTimeout(resolve, 5_000));
        const quiet = delta((await operatorCounts()).byVerb, from.byVerb);
        observe({ requestsIn5s: Object.fromEntries(Object.entries(quiet).filter(([, n]) => n > 0)) });
        return total(quiet) <= 6;
      },
      { timeoutMs: 36_000, intervalMs: 0 },
    ).catch((err: unknown) => {
      console.log(`operator log, last lines:\n${operator?.logs.join("").split("\n").slice(-80).join("\n")}`);
      throw err;
    });
  }, 600_000);
});
