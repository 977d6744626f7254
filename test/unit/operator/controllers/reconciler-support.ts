// The config reconciler over in-memory caches, as its tests set it up: a stored config, and setup(), which
// wires a ConfigReconciler to FakeCaches and records what it applies, writes, deletes, announces and logs,
// with a clock the test moves and API errors the test chooses.
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { pino } from "pino";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../../../src/api/v1beta1/status.js";
import {
  objectPath,
  type ObjectClient,
  type ObjectKey,
  type ResourceRef,
} from "../../../../src/kube/index.js";
import {
  ConfigReconciler,
  type ConfigReconcilerDeps,
  type StoredConfig,
} from "../../../../src/operator/controllers/config-reconciler.js";
import { OperatorMetrics } from "../../../../src/operator/metrics.js";
import { validateDevicePluginConfig } from "../../../../src/api/validate.js";
import { FakeCache } from "./fake-cache.js";

export const NS = "dpo-system";

export interface Applied {
  kind: string;
  name: string;
  status?: DevicePluginConfigStatus;
}

export function config(name: string, created: string, spec: Record<string, unknown> = {}): StoredConfig {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: {
      name,
      uid: `uid-${name}`,
      generation: 1,
      resourceVersion: "1",
      creationTimestamp: created as never,
    },
    spec: {
      resourceName: "vendor.example/foo",
      backend: { type: "Mock", mock: { devices: 2 } },
      ...spec,
    },
  };
}

export function setup(now = { t: Date.parse("2026-01-01T00:00:00Z") }) {
  const configs = new FakeCache<StoredConfig>();
  const nodes = new FakeCache<V1Node>();
  const daemonSets = new FakeCache<V1DaemonSet>();
  const configMaps = new FakeCache<V1ConfigMap>();
  const reports = new FakeCache<DeviceNodeState>();
  const applied: Applied[] = [];
  /** The bodies of creates and updates, as sent. */
  const written: KubernetesObject[] = [];
  const deleted: string[] = [];
  const events: string[] = [];
  const logs: string[] = [];
  let rv = 100;
  const statusLatency = { ms: 0 };
  let failApply: Error | undefined;
  let failDelete: ((path: string) => Error | undefined) | undefined;
  const metrics = new OperatorMetrics();
  const deps: ConfigReconcilerDeps = {
    configs: configs.asInformer(),
    nodes: nodes.asInformer(),
    pods: new FakeCache().asInformer(),
    daemonSets: daemonSets.asInformer(),
    configMaps: configMaps.asInformer(),
    reports: reports.asInformer(),
    applier: {
      apply: (obj: KubernetesObject) => {
        if (failApply) return Promise.reject(failApply);
        applied.push({ kind: obj.kind!, name: obj.metadata!.name! });
        return Promise.resolve({ ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } });
      },
      applyStatus: (obj: KubernetesObject & { status: DevicePluginConfigStatus }) => {
        // The API server takes this long to answer (on the test's clock).
        now.t += statusLatency.ms;
        applied.push({ kind: "status", name: obj.metadata!.name!, status: obj.status });
        return Promise.resolve({ ...obj, metadata: { ...obj.metadata, resourceVersion: String(++rv) } });
      },
    } as never,
    objects: {
      create: (_ref: ResourceRef, obj: KubernetesObject) => {
        if (failApply) return Promise.reject(failApply);
        applied.push({ kind: "DaemonSet", name: obj.metadata!.name! });
        written.push(obj);
        return Promise.resolve(obj);
      },
      update: (_ref: ResourceRef, obj: KubernetesObject) => {
        if (failApply) return Promise.reject(failApply);
        applied.push({ kind: "DaemonSet", name: obj.metadata!.name! });
        written.push(obj);
        return Promise.resolve(obj);
      },
      patch: (ref: ResourceRef, key: ObjectKey) => {
        if (failApply) return Promise.reject(failApply);
        // Node labels of an upgrade (ADR 0004): a node whose kubelet is too old runs no revision.
        applied.push({ kind: ref.plural === "nodes" ? "Node" : ref.plural, name: key.name });
        return Promise.resolve({});
      },
      delete: (ref: ResourceRef, key: ObjectKey) => {
        const path = objectPath(ref, key.name, ref.namespaced ? key.namespace : undefined);
        const err = failDelete?.(path);
        if (err) return Promise.reject(err);
        deleted.push(path);
        return Promise.resolve();
      },
    } as Partial<ObjectClient> as ObjectClient,
    events: {
      record: (_obj: unknown, type: string, reason: string) => {
        events.push(`${type}/${reason}`);
        return Promise.resolve();
      },
    } as never,
    render: {
      namespace: NS,
      operatorImage: "dpo:test",
      pluginServiceAccount: "dpo-plugin",
      registrationMode: "kubelet",
    },
    logger: pino({ level: "info" }, { write: (line: string) => void logs.push(line) }),
    metrics,
    now: () => new Date(now.t),
    statusWriteIntervalMs: 500,
  };
  const reconciler = new ConfigReconciler(deps);
  return {
    statusLatency,
    configs,
    nodes,
    daemonSets,
    configMaps,
    reports,
    applied,
    written,
    deleted,
    events,
    logs,
    reconciler,
    deps,
    metrics,
    now,
    failApplyWith: (err: Error | undefined) => (failApply = err),
    failDeleteWith: (fn: ((path: string) => Error | undefined) | undefined) => (failDelete = fn),
    /** What the API server would hold after the applies: the objects in the caches. */
    settle: (rendered: { cm?: V1ConfigMap; ds?: V1DaemonSet }) => {
      if (rendered.cm) configMaps.put(rendered.cm);
      if (rendered.ds) daemonSets.put(rendered.ds);
    },
  };
}

export async function revisionOf(stored: StoredConfig | undefined): Promise<string> {
  const { pluginRevision } = await import("../../../../src/operator/render/index.js");
  const { validateDevicePluginConfig } = await import("../../../../src/api/validate.js");
  const parsed = validateDevicePluginConfig(stored);
  if (!parsed.ok) throw new Error("test config invalid");
  return pluginRevision(parsed.value, {
    namespace: NS,
    operatorImage: "dpo:test",
    pluginServiceAccount: "dpo-plugin",
    registrationMode: "kubelet",
  });
}

/** The ConfigMap and DaemonSet the operator renders for a stored config. */
export async function renderedFor(
  stored: StoredConfig | undefined,
): Promise<{ cm: V1ConfigMap; ds: V1DaemonSet }> {
  const { renderPluginConfigMap, renderPluginDaemonSet } =
    await import("../../../../src/operator/render/index.js");
  const parsed = validateDevicePluginConfig(stored);
  if (!parsed.ok) throw new Error("test config invalid");
  const ctx = {
    namespace: NS,
    operatorImage: "dpo:test",
    pluginServiceAccount: "dpo-plugin",
    registrationMode: "kubelet" as const,
  };
  const ds = renderPluginDaemonSet(parsed.value, ctx);
  return { cm: renderPluginConfigMap(parsed.value, ctx, ds.metadata!.labels!["dpo.dev/revision"]!), ds };
}

export function condition(status: DevicePluginConfigStatus | undefined, type: string) {
  return status?.conditions?.find((c) => c.type === type);
}
