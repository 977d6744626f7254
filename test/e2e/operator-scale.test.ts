// End to end, the small version of `make bench-operator`'s scale figures: KWOK nodes, each with the
// plugin's own report writer (tools/cluster/report-fleet.ts) writing its DeviceNodeState with a token
// bound to its plugin pod. Nothing changes → no writer writes and no status write; a health flap storm
// → the operator writes the config's status at most once per 500 ms, and the status ends up right.
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { parseAuditLog } from "../../tools/cluster/audit.js";
import { auditLogPath, readPinnedVersions, simulatedNodeFacts } from "../../tools/cluster/cluster.js";
import { NODE_INDEX_LABEL, renderSimulatedNode, TEST_FEATURE_LABEL } from "../../tools/cluster/nodes.js";
import { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { maxInWindow, minGap } from "../../tools/stats.js";
import { LiveWatch } from "../../tools/upgrade-load/live-watch.js";
import { loadKubeconfig, type ApiCredentials } from "../../src/plugin-runtime/report/api-client.js";
import {
  injectedCluster,
  kubeConfigFromInjected,
  pluginDaemonSet,
  uniqueName,
  waitFor,
} from "../cluster/helpers.js";
import { installDpo, NAMESPACE, startOperator, type OperatorProcess } from "./support.js";

const CONFIGS = { group: "dpo.dev", version: "v1beta1", plural: "devicepluginconfigs" };
const NODES = 60;
/** 10% of the nodes flip one device's health once a second, for STORM_SECONDS. */
const FLAPPERS = 6;
const STORM_SECONDS = 8;
const IDLE_SECONDS = 10;
const INTERVAL_MS = 500;
const DEVICES = 4;

const kc = kubeConfigFromInjected();
const core = kc.makeApiClient(CoreV1Api);
const custom = kc.makeApiClient(CustomObjectsApi);
const configName = uniqueName("e2e-scale");
const label = `scale.example/${configName}`;
const nodeNames = Array.from({ length: NODES }, (_, i) => `${configName}-n${i}`);

let operator: OperatorProcess;
let fleet: ReportFleet | undefined;

interface ConfigStatus {
  devices?: { unhealthy?: number };
  nodes?: { desired?: number };
}

async function status(): Promise<ConfigStatus | undefined> {
  const c = (await custom.getClusterCustomObject({ ...CONFIGS, name: configName })) as {
    status?: ConfigStatus;
  };
  return c.status;
}

/** When the API server received each status write of this config between two wall-clock times (its audit log). */
function statusWriteArrivals(fromMs: number, toMs: number): number[] {
  const { stateDir } = injectedCluster();
  if (stateDir === "")
    throw new Error("the flap storm is timed from the audit log of a cluster this run started");
  return parseAuditLog(readFileSync(auditLogPath(stateDir), "utf8"))
    .filter(
      (r) => r.name === configName && r.subresource === "status" && r.code !== undefined && r.code < 300,
    )
    .map((r) => r.receivedMs)
    .filter((ms) => ms >= fromMs && ms <= toMs)
    .sort((a, b) => a - b);
}

/**
 * Watches the config and records when each status write (a new resourceVersion) arrives. `gaps` says
 * where the watch may have missed one (see LiveWatch): "no change seen" means something only without.
 */
async function watchWrites(): Promise<{ times: number[]; gaps: () => string[]; stop(): void }> {
  const times: number[] = [];
  let last: string | undefined;
  const watch = new LiveWatch(
    kc,
    "/apis/dpo.dev/v1beta1/devicepluginconfigs",
    { fieldSelector: `metadata.name=${configName}` },
    (type, obj: { metadata?: { resourceVersion?: string } }) => {
      const rv = obj.metadata?.resourceVersion;
      if (type === "MODIFIED" && rv !== last) times.push(performance.now());
      last = rv;
    },
  );
  await watch.start();
  return { times, gaps: () => [...watch.gaps], stop: () => watch.stop() };
}

beforeAll(async () => {
  await installDpo();
  operator = await startOperator(["--status-write-interval", String(INTERVAL_MS)]);
  const facts = {
    ...simulatedNodeFacts(await readPinnedVersions()),
    kubernetesVersion: injectedCluster().kubernetesVersion,
  };
  // KWOK nodes of this file only: the simulated node template under another name and label.
  await Promise.all(
    nodeNames.map((name, i) => {
      const node = renderSimulatedNode(200 + i, facts);
      const labels = { ...node.metadata!.labels, "kubernetes.io/hostname": name, [label]: "true" };
      delete labels[TEST_FEATURE_LABEL];
      delete labels[NODE_INDEX_LABEL];
      return core.createNode({ body: { ...node, metadata: { name, labels } } });
    }),
  );
  await waitFor(
    `${NODES} nodes Ready`,
    async (observe) => {
      const list = await core.listNode({ labelSelector: `${label}=true` });
      const ready = list.items.filter((n) =>
        n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      ).length;
      observe(`${ready}/${list.items.length}`);
      return ready === NODES;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const config = (await custom.createClusterCustomObject({
    ...CONFIGS,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: configName },
      spec: {
        resourceName: `scale.example/${configName}`,
        backend: { type: "Mock", mock: { devices: DEVICES } },
        nodeSelector: { [label]: "true" },
      },
    },
  })) as { metadata: { uid: string } };
  const revision = await waitFor(`${configName}: the plugin DaemonSet`, async () => {
    const ds = await pluginDaemonSet(kc, NAMESPACE, configName);
    return ds?.metadata?.labels?.["dpo.dev/revision"];
  });
  // Each node's plugin pod, scheduled (its token then names the node, which the own-node policy wants).
  const pods = await waitFor(
    `a plugin pod scheduled on each of the ${NODES} nodes`,
    async (observe) => {
      const list = await core.listNamespacedPod({
        namespace: NAMESPACE,
        labelSelector: `dpo.dev/config=${configName}`,
      });
      const scheduled = list.items.filter((p) => p.spec?.nodeName && !p.metadata?.deletionTimestamp);
      observe(`${scheduled.length} scheduled of ${list.items.length}`);
      return scheduled.length === NODES ? scheduled : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const base = await loadKubeconfig(injectedCluster().kubeconfigPath);
  const credentials = new Map<string, ApiCredentials>();
  await Promise.all(
    pods.map(async (pod) => {
      const answer = await core.createNamespacedServiceAccountToken({
        name: "dpo-plugin",
        namespace: NAMESPACE,
        body: {
          spec: {
            audiences: [],
            expirationSeconds: 3600,
            boundObjectRef: {
              apiVersion: "v1",
              kind: "Pod",
              name: pod.metadata!.name,
              uid: pod.metadata!.uid,
            },
          },
        },
      });
      credentials.set(pod.spec!.nodeName!, {
        server: base.server,
        ...(base.ca === undefined ? {} : { ca: base.ca }),
        token: answer.status!.token,
      });
    }),
  );
  fleet = new ReportFleet({
    namespace: NAMESPACE,
    config: { name: configName, uid: config.metadata.uid },
    resourceName: `scale.example/${configName}`,
    revision,
    devices: DEVICES,
    credentials,
  });
  await fleet.start(NODES, 60_000);
  // The operator has every report once one flip shows in the status and the flip back does too.
  const probe = nodeNames[0]!;
  for (const want of [1, 0]) {
    fleet.flip(probe);
    await waitFor(
      `the status to count ${want} unhealthy devices`,
      async (observe) => {
        const s = await status();
        observe({ status: s, writersSettled: fleet!.settled() });
        return fleet!.settled() && s?.nodes?.desired === NODES && s.devices?.unhealthy === want;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
  }
}, 240_000);

afterAll(async () => {
  await fleet?.stop();
  await custom.deleteClusterCustomObject({ ...CONFIGS, name: configName }).catch(() => undefined);
  await Promise.all(nodeNames.map((name) => core.deleteNode({ name }).catch(() => undefined)));
  await operator?.stop();
});

describe(`${NODES} report writers and the operator`, () => {
  it(`make no write in ${IDLE_SECONDS} s when nothing changes`, async () => {
    const writes = await watchWrites();
    const requests = fleet!.requests();
    // The operator counts a status write when the API server's answer reaches it, which can be after
    // beforeAll read the stored status: take the count once it has held through one status interval.
    let seen: { count: number; since: number } | undefined;
    const statusWrites = await waitFor("the status write count to hold for one interval", async (observe) => {
      const count = await operator.metric("dpo_operator_status_writes_total");
      const now = performance.now();
      if (seen?.count !== count) seen = { count, since: now };
      observe(seen);
      return now - seen.since >= INTERVAL_MS ? count : undefined;
    });
    // A fixed observation window: what is measured is that nothing happens in it.
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1_000));
    writes.stop();
    expect(writes.gaps(), "the watch of the config was open throughout").toEqual([]);
    expect({
      writerRequests: fleet!.requests() - requests,
      statusWrites: (await operator.metric("dpo_operator_status_writes_total")) - statusWrites,
      configChanges: writes.times.length,
    }).toEqual({ writerRequests: 0, statusWrites: 0, configChanges: 0 });
  });

  it(`write the status at most once per ${INTERVAL_MS} ms while ${FLAPPERS} nodes flap a device every second`, async () => {
    const writes = await watchWrites();
    const requests = fleet!.requests();
    const flappers = nodeNames.filter((_, i) => i % Math.floor(NODES / FLAPPERS) === 0).slice(0, FLAPPERS);
    const started = performance.now();
    const startedWallMs = Date.now();
    await fleet!.flapStorm(flappers, STORM_SECONDS);
    const stormMs = performance.now() - started;
    // An even number of flips: every device is healthy again, and the status must say so.
    await waitFor(
      "the writers and the status to show every device healthy again",
      async (observe) => {
        const s = await status();
        observe({ unhealthy: s?.devices?.unhealthy, writersSettled: fleet!.settled() });
        return fleet!.settled() && s?.devices?.unhealthy === 0;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // A coalesced write may still be due; it belongs to the storm.
    await new Promise((r) => setTimeout(r, 2 * INTERVAL_MS));
    writes.stop();
    // The spacing as the API server received the writes (its audit log): a watch on a loaded machine delivers
    // some events later than others, which moves two writes 500 ms apart closer together than they were.
    const arrivals = statusWriteArrivals(startedWallMs, Date.now());
    const flips = flappers.length * STORM_SECONDS;
    const seen = {
      writerRequests: fleet!.requests() - requests,
      statusWrites: arrivals.length,
      maxIn500ms: maxInWindow(arrivals, INTERVAL_MS),
      closestMs: Math.round(minGap(arrivals)),
      stormMs: Math.round(stormMs),
      watchedWrites: writes.times.length,
    };
    console.log(`flap storm: ${JSON.stringify(seen)}`);
    // The watch saw writes the audit log has, with no gap.
    expect(writes.gaps(), JSON.stringify(seen)).toEqual([]);
    expect(seen.watchedWrites, JSON.stringify(seen)).toBeGreaterThan(0);
    // The writers wrote no more than there were flips (one status apply each, at most), the storm did
    // reach the API server, and it made the operator write (it is not quiet because it missed them) ...
    expect(seen.writerRequests, JSON.stringify(seen)).toBeLessThanOrEqual(flips);
    expect(seen.writerRequests, JSON.stringify(seen)).toBeGreaterThanOrEqual(flips / 2);
    expect(seen.statusWrites, JSON.stringify(seen)).toBeGreaterThan(2);
    // ... but never more than once per interval, however the flips fall.
    expect(seen.maxIn500ms, JSON.stringify(seen)).toBe(1);
    expect(seen.statusWrites, JSON.stringify(seen)).toBeLessThanOrEqual(
      Math.ceil((stormMs + 3 * INTERVAL_MS) / INTERVAL_MS),
    );
  });
});
