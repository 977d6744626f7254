// The operator's latencies: a config's creation to its DaemonSet, and a node's capacity change to the
// config's status, the report writers started in between.
import {
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type CustomObjectsApi,
  type KubeConfig,
} from "@kubernetes/client-node";
import { kubeRequest } from "../../src/kube/request.js";
import type { ReportFleet } from "../../tools/cluster/report-fleet.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { percentile } from "../../tools/stats.js";
import { CAPACITY_CHANGES, CREATES, DEVICE_SHAPE, DEVICES_PER_NODE, GROUP, RESOURCE } from "./knobs.js";
import { capacityDaemonSet, startReportFleet } from "./report-fleet.js";
import { OPERATOR_TARGETS, p99Target, type Row } from "./targets.js";
import type { BenchClients, RunState } from "./under-test.js";

/** How long one create's DaemonSet is waited for: far past the target, short of a stuck run's hour. */
export const CREATE_DEADLINE_MS = 60_000;

/** Step 1: config create → DaemonSet exists, for CREATES configs one after another. */
export async function measureCreates(
  kc: KubeConfig,
  custom: CustomObjectsApi,
  nodeCount: number,
  rows: Row[],
): Promise<void> {
  // 1. Config create → DaemonSet exists. The API server sets a custom resource's storage up on its
  // first write (about 2 s here): the cluster's cost, not the operator's, so a throwaway config goes first.
  // The operator has just patched the CRD (its conversion webhook's caBundle): the API server swaps the
  // resource's storage, and a request that reaches the old one is answered 503 "apiserver is shutting
  // down" with Retry-After: 1 (apiextensions-apiserver drains it). client-go retries those; so does this.
  const warmupStarted = performance.now();
  const warmup = await waitFor(
    "the first DevicePluginConfig write (retried on 503 while the CRD's storage is swapped)",
    async (observe) => {
      try {
        await custom.createClusterCustomObject({
          ...GROUP,
          body: {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            metadata: { name: "bench-warmup" },
            spec: {
              resourceName: "warmup.example/dev",
              backend: { type: "Mock", mock: { devices: 1 } },
              nodeSelector: { "bench.example/none": "true" },
            },
          },
        });
        return { failed: undefined as Error | undefined };
      } catch (error) {
        // waitFor retries what a probe throws: any other error ends the wait here and is thrown below.
        if ((error as { code?: number }).code !== 503) {
          return { failed: error instanceof Error ? error : new Error(String(error)) };
        }
        observe(String(error).split("\n")[0]);
        return false;
      }
    },
    { timeoutMs: 30_000, intervalMs: 1_000 },
  );
  if (warmup.failed !== undefined) throw warmup.failed;
  console.error(
    `bench-operator: first DevicePluginConfig write took ${(performance.now() - warmupStarted).toFixed(0)} ms`,
  );
  await custom.deleteClusterCustomObject({ ...GROUP, name: "bench-warmup" });
  const createLatencies: number[] = [];
  for (let i = 0; i < CREATES; i++) {
    const name = `bench-create-${i}`;
    let seenAt: number | undefined;
    let lastEvent = "no DaemonSet event";
    const watch = await new Watch(kc).watch(
      "/apis/apps/v1/namespaces/dpo-system/daemonsets",
      { labelSelector: `dpo.dev/config=${name}` },
      (type, obj: { metadata?: { name?: string } }) => {
        lastEvent = `${type} ${obj.metadata?.name ?? "?"}`;
        if (type === "ADDED") seenAt ??= performance.now();
      },
      (err: unknown) => {
        if (err !== undefined && err !== null)
          lastEvent = `the DaemonSet watch ended: ${err instanceof Error ? err.message : JSON.stringify(err)}`;
      },
    );
    try {
      const t0 = performance.now();
      await custom.createClusterCustomObject({
        ...GROUP,
        body: {
          apiVersion: "dpo.dev/v1beta1",
          kind: "DevicePluginConfig",
          metadata: { name },
          spec: {
            resourceName: `create-${i}.example/dev`,
            backend: { type: "Mock", mock: { devices: 1 } },
            nodeSelector: { "bench.example/none": "true" },
          },
        },
      });
      const created = performance.now();
      // The watch times the DaemonSet; this wait only notices it, and gives up at a deadline saying what it
      // saw last: the watch's last event and the config's conditions (an operator that exited writes none).
      let lastStatusRead = 0;
      let conditions: unknown = "not read yet";
      const seen = await waitFor(
        `the DaemonSet of config ${name}`,
        async (observe) => {
          if (seenAt !== undefined) return seenAt;
          if (performance.now() - lastStatusRead > 2_000) {
            lastStatusRead = performance.now();
            const config = (await custom.getClusterCustomObject({ ...GROUP, name })) as {
              status?: { conditions?: { type?: string; status?: string; reason?: string }[] };
            };
            conditions =
              config.status?.conditions?.map((c) => `${c.type}=${c.status} (${c.reason})`) ?? "no status";
          }
          observe({ watch: lastEvent, conditions });
          return undefined;
        },
        { timeoutMs: CREATE_DEADLINE_MS, intervalMs: 20 },
      );
      createLatencies.push(seen - t0);
      if (process.env["BENCH_VERBOSE"]) {
        const total = (createLatencies.at(-1) ?? 0).toFixed(0);
        console.error(`create ${i}: ${total} ms (the create call ${(created - t0).toFixed(0)} ms)`);
      }
    } finally {
      watch.abort();
    }
  }
  rows.push({
    metric: `${nodeCount} nodes: config create → DaemonSet exists (${CREATES} configs)`,
    value: `p50 ${percentile(createLatencies, 50).toFixed(0)} ms, p99 ${percentile(createLatencies, 99).toFixed(0)} ms`,
    target: p99Target(OPERATOR_TARGETS.createP99Ms(nodeCount)),
    checks: [{ value: percentile(createLatencies, 99), bound: OPERATOR_TARGETS.createP99Ms(nodeCount) }],
  });
}

/**
 * Step 2: one config on every node, its report writers started (set in `state.fleet`, which it returns),
 * then CAPACITY_CHANGES node capacity changes → CR status.
 */
export async function measureCapacityChanges(
  state: RunState,
  { kubeconfigPath, kc, core, apps, custom, kubectl }: BenchClients,
  nodeCount: number,
  rows: Row[],
): Promise<ReportFleet> {
  // 2. Node capacity change → CR status. One config targeting every node.
  await custom.createClusterCustomObject({
    ...GROUP,
    body: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: "bench-capacity" },
      spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: DEVICES_PER_NODE } } },
    },
  });
  const nodeNames = (await core.listNode()).items.map((n) => n.metadata!.name!);
  const devices = String(DEVICES_PER_NODE);
  let total = 0;
  for (let i = 0; i < nodeNames.length; i += 50) {
    await Promise.all(
      nodeNames.slice(i, i + 50).map((name) =>
        core.patchNodeStatus(
          {
            name,
            body: { status: { capacity: { [RESOURCE]: devices }, allocatable: { [RESOURCE]: devices } } },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        ),
      ),
    );
  }
  total = nodeNames.length * DEVICES_PER_NODE;
  const capacityOf = async (): Promise<number | undefined> => {
    const c = (await custom.getClusterCustomObject({ ...GROUP, name: "bench-capacity" })) as {
      status?: { devices?: { capacity?: number } };
    };
    return c.status?.devices?.capacity;
  };
  await waitFor(
    `status to count ${total} devices`,
    async (observe) => {
      const cap = await capacityOf();
      observe(cap);
      return cap === total;
    },
    { timeoutMs: 300_000, intervalMs: 500 },
  );

  // The plugins: the DaemonSet's pods Running on every node (KWOK), then a report writer per node with
  // a token bound to that pod, under the plugin's Role and the own-node admission policy (config/).
  await waitFor(
    "the DaemonSet pods to settle",
    async (observe) => {
      const ds = await capacityDaemonSet(apps);
      observe(`${ds.status?.numberReady}/${ds.status?.desiredNumberScheduled} ready`);
      return ds.status?.numberReady === nodeCount;
    },
    { timeoutMs: 600_000, intervalMs: 2_000 },
  );
  const fleetStarted = Date.now();
  const fleet = await startReportFleet(kc, kubeconfigPath, kubectl, core, apps);
  state.fleet = fleet;
  const fleetStart = Date.now() - fleetStarted;
  await waitFor(
    `status to show ${nodeCount} nodes ready`,
    async (observe) => {
      const c = (await custom.getClusterCustomObject({ ...GROUP, name: "bench-capacity" })) as {
        status?: { nodes?: { ready?: number; desired?: number }; problemsOmitted?: number };
      };
      observe({ nodes: c.status?.nodes, problemsOmitted: c.status?.problemsOmitted });
      return c.status?.nodes?.ready === nodeCount;
    },
    { timeoutMs: 300_000, intervalMs: 1_000 },
  );
  rows.push({
    metric: `${nodeCount} nodes: report writers started (pod-bound tokens, first reports written)`,
    value: `${fleet.nodes.length} writers, ${fleet.requests()} requests, ${fleet.failures()} failed, in ${(fleetStart / 1000).toFixed(0)} s`,
    target: "(reported)",
  });
  const oneReport = await kubeRequest<{ items: unknown[] }>(kc, {
    method: "GET",
    path: "/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates?limit=1",
  });
  rows.push({
    metric: `${nodeCount} nodes: one node's report (${DEVICES_PER_NODE} devices, attributes: ${DEVICE_SHAPE})`,
    value: `${Buffer.byteLength(JSON.stringify(oneReport.items[0] ?? {}))} B as the API serves it`,
    target: "(reported)",
  });

  const changeLatencies: number[] = [];
  const perNode = new Map<string, number>();
  for (let i = 0; i < CAPACITY_CHANGES; i++) {
    const node = nodeNames[(i * 7919) % nodeNames.length]!;
    const current = perNode.get(node) ?? DEVICES_PER_NODE;
    const next = current === DEVICES_PER_NODE ? DEVICES_PER_NODE + 1 : DEVICES_PER_NODE;
    const want = total + (next - current);
    perNode.set(node, next);
    let resolveSeen: (t: number) => void = () => undefined;
    const seen = new Promise<number>((resolve) => (resolveSeen = resolve));
    const watch = await new Watch(kc).watch(
      "/apis/dpo.dev/v1beta1/devicepluginconfigs",
      { fieldSelector: "metadata.name=bench-capacity" },
      (_type, obj: { status?: { devices?: { capacity?: number } } }) => {
        if (obj.status?.devices?.capacity === want) resolveSeen(performance.now());
      },
      () => undefined,
    );
    const t0 = performance.now();
    await core.patchNodeStatus(
      {
        name: node,
        body: {
          status: { capacity: { [RESOURCE]: String(next) }, allocatable: { [RESOURCE]: String(next) } },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    changeLatencies.push((await seen) - t0);
    watch.abort();
    total = want;
    // Changes are spaced beyond the 500 ms status coalescing window, as kubelet updates of one node are.
    await new Promise((r) => setTimeout(r, 600));
  }
  // Up to 1000 nodes within 1 s and 2 s; beyond, the 5 s.
  const target = OPERATOR_TARGETS.capacityP99Ms(nodeCount);
  rows.push({
    metric: `${nodeCount} nodes: node capacity change → CR status (${CAPACITY_CHANGES} changes)`,
    value: `p50 ${percentile(changeLatencies, 50).toFixed(0)} ms, p99 ${percentile(changeLatencies, 99).toFixed(0)} ms`,
    target: p99Target(target),
    checks: [{ value: percentile(changeLatencies, 99), bound: target }],
  });
  return fleet;
}
