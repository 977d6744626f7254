// What one reconcile of a config serving 5000 8-GPU nodes costs the operator's event loop, apart from the
// cluster: the reconciler over in-memory caches holding what its informers would (slim Nodes, plugin Pods
// and reports, built by the plugin's own buildDeviceNodeState from the benchmark's devices), its writes
// answered at once. Each pass follows one report's update, as while 5000 plugins report; the label passes
// write their first 100 Node applies each, as in the cluster. A reconcile runs on the event loop from one
// write to the next, so its CPU time bounds how long it holds the loop (the Lease renewals included).
//   node --import tsx bench/operator/reconcile-cpu.ts [nodes, 5000] [passes, 60]
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import { pino } from "pino";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import type { Informer, ObjectClient } from "../../src/kube/index.js";
import {
  slimNodeForCache,
  slimPodForCache,
  slimReportForCache,
} from "../../src/operator/controllers/cache-transforms.js";
import { ConfigReconciler, type StoredConfig } from "../../src/operator/controllers/config-reconciler.js";
import { OperatorMetrics } from "../../src/operator/metrics.js";
import { renderPluginConfigMap, renderPluginDaemonSet } from "../../src/operator/render/index.js";
import { buildDeviceNodeState } from "../../src/plugin-runtime/report/node-state.js";
import { percentile } from "../../tools/stats.js";
import { simulatedDevice } from "./gpu-devices.js";

const NODES = Number(process.argv[2] ?? 5000);
const PASSES = Number(process.argv[3] ?? 60);
const NS = "dpo-system";
const RESOURCE = "bench.example/dev";
const CONFIG = "bench-capacity";

/** A cache as the reconciler reads an informer: by key, whole, or by an index it filters itself. */
class Cache<T extends KubernetesObject> {
  readonly objects = new Map<string, T>();
  put(obj: T): void {
    const { name, namespace } = obj.metadata ?? {};
    this.objects.set(namespace ? `${namespace}/${name}` : name!, obj);
  }
  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }
  list(): T[] {
    return [...this.objects.values()];
  }
  byIndex(): T[] {
    return this.list();
  }
  hasSynced(): boolean {
    return true;
  }
  asInformer(): Informer<T> {
    return this as unknown as Informer<T>;
  }
}

const render = {
  namespace: NS,
  operatorImage: "dpo:bench",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet" as const,
};
const stored: StoredConfig = {
  apiVersion: "dpo.dev/v1beta1",
  kind: "DevicePluginConfig",
  metadata: { name: CONFIG, uid: "uid-config", generation: 1, resourceVersion: "1" },
  spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 8 } } },
};
const parsed = validateDevicePluginConfig(stored);
if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
const ds = renderPluginDaemonSet(parsed.value, render);
ds.metadata = { ...ds.metadata, uid: "uid-ds", resourceVersion: "2" };
const revision = ds.metadata.labels!["dpo.dev/revision"]!;
const hash = ds.spec!.template.metadata!.annotations!["dpo.dev/config-hash"]!;

const configs = new Cache<StoredConfig>();
const nodes = new Cache<V1Node>();
const pods = new Cache<V1Pod>();
const daemonSets = new Cache<V1DaemonSet>();
const configMaps = new Cache<V1ConfigMap>();
const reports = new Cache<DeviceNodeState>();
configs.put(stored);
daemonSets.put(ds);
configMaps.put(renderPluginConfigMap(parsed.value, render, revision));

const now = new Date().toISOString();
function reportOf(n: number, at: string): DeviceNodeState {
  const physical = Array.from({ length: 8 }, (_, i) => ({
    ...simulatedDevice("nvidia", n, i),
    health: "Healthy" as const,
    reason: "",
  }));
  const built = buildDeviceNodeState({
    namespace: NS,
    config: { name: CONFIG, uid: "uid-config" },
    nodeName: `kwok-node-${n}`,
    resourceName: RESOURCE,
    revision,
    podUID: `pod-uid-${n}`,
    pluginVersion: "bench",
    kubeletAPIVersion: "v1beta1",
    configHash: hash,
    registration: { registered: true, since: now },
    since: new Map(),
    now: at,
    physical,
    advertised: physical.map((d) => ({ ...d, physicalId: d.id, replica: 0 })),
  });
  // As the informer gets it: parsed from the API's JSON, then slimmed.
  const served = {
    ...built.object,
    metadata: { ...built.object.metadata, uid: `uid-${n}` },
    status: built.status,
  };
  return slimReportForCache(JSON.parse(JSON.stringify(served)) as DeviceNodeState);
}
for (let n = 0; n < NODES; n++) {
  const name = `kwok-node-${n}`;
  nodes.put(
    slimNodeForCache({
      metadata: { name, resourceVersion: String(n + 10), labels: { "kubernetes.io/hostname": name } },
      status: {
        capacity: { [RESOURCE]: "8" },
        allocatable: { [RESOURCE]: "8" },
        conditions: [{ type: "Ready", status: "True" }],
        // The other members are required in the model type; the cache keeps only this one.
        nodeInfo: { kubeletVersion: "v1.37.2" } as NonNullable<V1Node["status"]>["nodeInfo"],
      },
    }),
  );
  pods.put(
    slimPodForCache({
      metadata: {
        name: `${ds.metadata.name}-${n}`,
        namespace: NS,
        uid: `pod-uid-${n}`,
        labels: { ...ds.spec!.template.metadata!.labels },
        annotations: { "dpo.dev/config-hash": hash },
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "DaemonSet", name: ds.metadata.name!, uid: "uid-ds" },
        ],
      },
      spec: { nodeName: name, containers: [] },
      status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
    }),
  );
  reports.put(reportOf(n, now));
}

let labelApplies = 0;
const answered = <T>(value: T): Promise<T> => Promise.resolve(value);
const reconciler = new ConfigReconciler({
  configs: configs.asInformer(),
  nodes: nodes.asInformer(),
  pods: pods.asInformer(),
  daemonSets: daemonSets.asInformer(),
  configMaps: configMaps.asInformer(),
  reports: reports.asInformer(),
  applier: {
    apply: (obj: KubernetesObject) => answered(obj),
    applyStatus: (obj: KubernetesObject) => answered(obj),
  } as never,
  objects: {
    create: (_ref: unknown, obj: KubernetesObject) => answered(obj),
    update: (_ref: unknown, obj: KubernetesObject) => answered(obj),
    patch: () => answered({}),
    delete: () => answered(undefined),
  } as unknown as ObjectClient,
  nodeLabels: () => answered(++labelApplies),
  events: { record: () => answered(undefined) } as never,
  render,
  logger: pino({ level: "silent" }),
  metrics: new OperatorMetrics(),
  statusWriteIntervalMs: 0,
});

const cpu: number[] = [];
const wall: number[] = [];
for (let pass = 0; pass < PASSES; pass++) {
  // One plugin's report changed, as while the fleet reports.
  reports.put(reportOf(pass % NODES, new Date(Date.now() + pass).toISOString()));
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await reconciler.reconcile(CONFIG);
  wall.push(performance.now() - t0);
  const used = process.cpuUsage(c0);
  cpu.push((used.user + used.system) / 1000);
}
// The first passes compile the code: the steady state is what a running operator pays.
const steady = cpu.slice(Math.min(10, Math.floor(PASSES / 2)));
console.log(
  `${NODES} nodes, ${PASSES} reconciles (${labelApplies} label applies): CPU per reconcile p50 ${percentile(steady, 50).toFixed(0)} ms, ` +
    `max ${Math.max(...steady).toFixed(0)} ms after the first ${cpu.length - steady.length}; first ${cpu[0]!.toFixed(0)} ms; ` +
    `wall p50 ${percentile(wall, 50).toFixed(0)} ms, max ${Math.max(...wall).toFixed(0)} ms (load ${(await import("node:os")).loadavg()[0]!.toFixed(1)})`,
);
