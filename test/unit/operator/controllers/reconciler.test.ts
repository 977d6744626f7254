// The config reconciler over in-memory caches: when it applies, when it writes status (and when it must
// not), resource-name conflicts, refused applies and specs that no longer validate.
import type { KubernetesObject, V1ConfigMap, V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../../../src/api/v1beta1/status.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  TransientError,
  objectPath,
  type Informer,
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
import { renderDeviceClass } from "../../../../src/operator/controllers/dra.js";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";

const NS = "dpo-system";

/** A cache the reconciler reads, holding what the test puts in it. */
class FakeCache<T extends KubernetesObject> {
  readonly objects = new Map<string, T>();
  synced = true;
  hasSynced(): boolean {
    return this.synced;
  }
  put(obj: T): void {
    const ns = obj.metadata?.namespace;
    this.objects.set(ns ? `${ns}/${obj.metadata!.name}` : obj.metadata!.name!, obj);
  }
  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }
  list(): T[] {
    return [...this.objects.values()];
  }
  /** Every object: the reconciler's consumers filter by config themselves. */
  byIndex(): T[] {
    return this.list();
  }
  asInformer(): Informer<T> {
    return this as unknown as Informer<T>;
  }
}

interface Applied {
  kind: string;
  name: string;
  status?: DevicePluginConfigStatus;
}

function config(name: string, created: string, spec: Record<string, unknown> = {}): StoredConfig {
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

function setup(now = { t: Date.parse("2026-01-01T00:00:00Z") }) {
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

async function revisionOf(stored: StoredConfig | undefined): Promise<string> {
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
async function renderedFor(stored: StoredConfig | undefined): Promise<{ cm: V1ConfigMap; ds: V1DaemonSet }> {
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

function condition(status: DevicePluginConfigStatus | undefined, type: string) {
  return status?.conditions?.find((c) => c.type === type);
}

describe("ConfigReconciler", () => {
  it("applies the ConfigMap and DaemonSet of a new config and writes a first status that is not Ready", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    expect(await t.reconciler.reconcile("foo")).toEqual({});
    const revision = await revisionOf(t.configs.get("foo"));
    expect(t.applied.map((a) => `${a.kind}/${a.name}`)).toEqual([
      `ConfigMap/dpo-foo-${revision}`,
      `DaemonSet/dpo-foo-${revision}`,
      "status/foo",
    ]);
    const status = t.applied[2]!.status;
    expect(status?.observedGeneration).toBe(1);
    expect(condition(status, "Ready")?.status).toBe("False");
    expect(condition(status, "Reconciling")?.status).toBe("True");
  });

  it("makes no request when the caches already hold what it would apply and write", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    // Feed back what was applied, as the watches would.
    const { renderPluginConfigMap, renderPluginDaemonSet } =
      await import("../../../../src/operator/render/index.js");
    const { validateDevicePluginConfig } = await import("../../../../src/api/validate.js");
    const parsed = validateDevicePluginConfig(t.configs.get("foo"));
    if (!parsed.ok) throw new Error("test config invalid");
    const ctx = {
      namespace: NS,
      operatorImage: "dpo:test",
      pluginServiceAccount: "dpo-plugin",
      registrationMode: "kubelet" as const,
    };
    const ds = renderPluginDaemonSet(parsed.value, ctx);
    t.settle({
      cm: renderPluginConfigMap(parsed.value, ctx, ds.metadata!.labels!["dpo.dev/revision"]!),
      ds,
    });
    // The DaemonSet now exists, so the status moves on once (DaemonSetPending → Progressing) ...
    t.now.t += 10_000;
    await t.reconciler.reconcile("foo");
    const written = t.applied.at(-1)!;
    expect(written.kind).toBe("status");
    expect(condition(written.status, "Reconciling")?.reason).toBe("Progressing");
    // ... and once the cache shows that status too, nothing is left to do.
    const stored = t.configs.get("foo")!;
    t.configs.put({
      ...stored,
      status: written.status,
      metadata: { ...stored.metadata, resourceVersion: "999" },
    });
    const before = t.applied.length;
    t.now.t += 10_000;
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("foo");
    expect(t.applied.slice(before)).toEqual([]);
  });

  it("after a DaemonSet write meets a 409, sends it again only once the cache shows a newer DaemonSet", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    const { cm, ds: rendered } = await renderedFor(t.configs.get("foo"));
    // Someone edited the image: the operator puts it back with an Update planned from resourceVersion 5.
    const drifted = (resourceVersion: string): V1DaemonSet => {
      const ds = structuredClone(rendered);
      ds.metadata!.resourceVersion = resourceVersion;
      ds.spec!.template.spec!.containers[0]!.image = "edited:by-hand";
      return ds;
    };
    t.settle({ cm, ds: drifted("5") });
    const updates = () => t.applied.filter((a) => a.kind === "DaemonSet").length;
    t.failApplyWith(new ConflictError("the object has been modified", { code: 409, reason: "Conflict" }));
    await t.reconciler.reconcile("foo");
    t.failApplyWith(undefined);
    // The cache still shows version 5 (its watch is behind): the same write would meet the same 409.
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("foo");
    expect(updates()).toBe(0);
    // The watch brings version 6, still drifted: now the write goes out, planned from 6.
    t.daemonSets.put(drifted("6"));
    await t.reconciler.reconcile("foo");
    expect(updates()).toBe(1);
    expect(t.written.at(-1)?.metadata?.resourceVersion).toBe("6");
  });

  it("does not write or announce the same status twice while the cache lags behind its own write", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    const writes = t.applied.filter((a) => a.kind === "status").length;
    const events = t.events.length;
    // The cache still shows the config without status (resourceVersion 1): the watch has not caught up.
    t.now.t += 10_000;
    await t.reconciler.reconcile("foo");
    expect(t.applied.filter((a) => a.kind === "status")).toHaveLength(writes);
    expect(t.events).toHaveLength(events);
  });

  it("tells its own last status write from a status someone else wrote", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    expect(t.reconciler.isOwnStatus("foo", undefined)).toBe(false);
    await t.reconciler.reconcile("foo");
    const mine = t.applied.find((a) => a.kind === "status")!.status!;
    expect(t.reconciler.isOwnStatus("foo", structuredClone(mine))).toBe(true);
    const theirs = { ...mine, nodes: { desired: 3, ready: 0, updated: 0, summary: "0/3" } };
    expect(t.reconciler.isOwnStatus("foo", theirs)).toBe(false);
    expect(t.reconciler.isOwnStatus("bar", mine)).toBe(false);
  });

  it("writes status at most once per interval and asks to come back for the rest", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    // Something changes 100 ms later: a node appears (desired 0 → 1).
    t.nodes.put({
      metadata: { name: "n1", labels: {} },
      status: {
        conditions: [{ type: "Ready", status: "True" }],
        nodeInfo: { kubeletVersion: "v1.34.1" } as never,
      },
    });
    t.now.t += 100;
    const result = await t.reconciler.reconcile("foo");
    expect(result.requeueAfterMs).toBe(400);
    expect(t.applied.filter((a) => a.kind === "status")).toHaveLength(1);
    t.now.t += 400;
    expect(await t.reconciler.reconcile("foo")).toEqual({});
    const statuses = t.applied.filter((a) => a.kind === "status");
    expect(statuses).toHaveLength(2);
    expect(statuses[1]!.status?.nodes?.desired).toBe(1);
  });

  it("counts the status interval from the write's answer, so writes land an interval apart", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    // The first write takes 300 ms to answer; a change comes 50 ms after the answer.
    t.statusLatency.ms = 300;
    await t.reconciler.reconcile("foo");
    t.statusLatency.ms = 0;
    t.nodes.put({
      metadata: { name: "n1", labels: {} },
      status: {
        conditions: [{ type: "Ready", status: "True" }],
        nodeInfo: { kubeletVersion: "v1.34.1" } as never,
      },
    });
    t.now.t += 50;
    expect((await t.reconciler.reconcile("foo")).requeueAfterMs).toBe(450);
    t.now.t += 449;
    expect((await t.reconciler.reconcile("foo")).requeueAfterMs).toBe(1);
    expect(t.applied.filter((a) => a.kind === "status")).toHaveLength(1);
    t.now.t += 1;
    expect(await t.reconciler.reconcile("foo")).toEqual({});
    expect(t.applied.filter((a) => a.kind === "status")).toHaveLength(2);
  });

  it("gives the newer of two configs for one resource no DaemonSet and Ready=False ResourceNameConflict", async () => {
    const t = setup();
    t.configs.put(config("old", "2026-01-01T00:00:00Z"));
    t.configs.put(config("new", "2026-01-02T00:00:00Z"));
    // The newer one had a DaemonSet from before the older appeared.
    const owned = { kind: "DevicePluginConfig", apiVersion: "dpo.dev/v1beta1", name: "new", uid: "uid-new" };
    t.daemonSets.put({ metadata: { name: "dpo-new", namespace: NS, ownerReferences: [owned] } });
    t.configMaps.put({ metadata: { name: "dpo-new", namespace: NS, ownerReferences: [owned] } });
    await t.reconciler.reconcile("new");
    expect(t.applied.filter((a) => a.kind !== "status")).toEqual([]);
    expect(t.deleted).toEqual([
      `/apis/apps/v1/namespaces/${NS}/daemonsets/dpo-new`,
      `/api/v1/namespaces/${NS}/configmaps/dpo-new`,
    ]);
    const status = t.applied.find((a) => a.kind === "status")!.status;
    expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "ResourceNameConflict" });
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "ResourceNameConflict" });
    // What DpoConfigStalled reads.
    const lines = (await t.metrics.render()).split("\n");
    expect(lines).toContain('dpo_config_stalled{config="new",reason="ResourceNameConflict"} 1');
    expect(lines).toContain('dpo_config_stalled{config="new",reason="ApplyFailed"} 0');
  });

  it("gives the newer of two configs writing CDI specs of one kind no DaemonSet and Stalled CDIKindConflict", async () => {
    const t = setup();
    const cdi = { enabled: true, kind: "vendor.example/gpu" };
    t.configs.put(config("old", "2026-01-01T00:00:00Z", { resourceName: "vendor.example/foo", cdi }));
    t.configs.put(config("new", "2026-01-02T00:00:00Z", { resourceName: "vendor.example/bar", cdi }));
    await t.reconciler.reconcile("new");
    expect(t.applied.filter((a) => a.kind !== "status")).toEqual([]);
    const status = t.applied.find((a) => a.kind === "status")!.status;
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "CDIKindConflict" });
    expect(condition(status, "Stalled")?.message).toMatch(
      /^spec\.cdi\.kind: CDI kind vendor\.example\/gpu is already the kind of DevicePluginConfig old\b.*no DaemonSet until then$/,
    );
    // The older one keeps the kind and runs.
    await t.reconciler.reconcile("old");
    expect(t.applied.filter((a) => a.kind !== "status").length).toBeGreaterThan(0);
  });

  it("runs two configs of one CDI kind whose node selectors cannot meet, and a kind left to default", async () => {
    const t = setup();
    const cdi = { enabled: true, kind: "vendor.example/gpu" };
    t.configs.put(
      config("old", "2026-01-01T00:00:00Z", {
        resourceName: "vendor.example/foo",
        cdi,
        nodeSelector: { pool: "a" },
      }),
    );
    t.configs.put(
      config("new", "2026-01-02T00:00:00Z", {
        resourceName: "vendor.example/bar",
        cdi,
        nodeSelector: { pool: "b" },
      }),
    );
    t.configs.put(
      config("own", "2026-01-03T00:00:00Z", { resourceName: "vendor.example/baz", cdi: { enabled: true } }),
    );
    for (const name of ["new", "own"]) {
      await t.reconciler.reconcile(name);
      const status = t.applied.filter((a) => a.kind === "status").at(-1)!.status;
      expect(condition(status, "Stalled"), name).not.toMatchObject({ status: "True" });
    }
  });

  it("gives a younger config no DaemonSet while an older one of its resource name keeps running on a spec that no longer validates", async () => {
    const t = setup();
    // Stored by an operator that accepted it; this one does not, and leaves its plugins as they were.
    t.configs.put(config("old", "2026-01-01T00:00:00Z", { sharing: { strategy: "TimeSlicing" } }));
    t.configs.put(config("new", "2026-01-02T00:00:00Z"));
    const owner = (name: string) => ({
      kind: "DevicePluginConfig",
      apiVersion: "dpo.dev/v1beta1",
      name,
      uid: `uid-${name}`,
    });
    for (const name of ["old", "new"]) {
      t.daemonSets.put({ metadata: { name: `dpo-${name}`, namespace: NS, ownerReferences: [owner(name)] } });
      t.configMaps.put({ metadata: { name: `dpo-${name}`, namespace: NS, ownerReferences: [owner(name)] } });
    }
    await t.reconciler.reconcile("old");
    await t.reconciler.reconcile("new");
    expect(t.applied.filter((a) => a.kind !== "status")).toEqual([]);
    expect(t.deleted).toEqual([
      `/apis/apps/v1/namespaces/${NS}/daemonsets/dpo-new`,
      `/api/v1/namespaces/${NS}/configmaps/dpo-new`,
    ]);
    const status = t.applied.filter((a) => a.kind === "status" && a.name === "new").at(-1)?.status;
    expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "ResourceNameConflict" });
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "ResourceNameConflict" });
    expect(condition(status, "Stalled")?.message).toContain(
      "DevicePluginConfig old holds vendor.example/foo on nodes that may overlap: its stored spec does not validate",
    );
    // Fixed, the older one is resolved as any other: the younger still yields, now to a running peer.
    t.configs.put(config("old", "2026-01-01T00:00:00Z"));
    t.now.t += 1_000;
    await t.reconciler.reconcile("new");
    const after = t.applied.filter((a) => a.kind === "status" && a.name === "new").at(-1)?.status;
    expect(condition(after, "Stalled")?.message).toContain("DevicePluginConfig old already serves");
  });

  it("reports an apply the API server refuses as Stalled ApplyFailed, and retries transient errors", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.failApplyWith(new ForbiddenError("daemonsets.apps is forbidden", { code: 403 }));
    await t.reconciler.reconcile("foo");
    const status = t.applied.find((a) => a.kind === "status")!.status;
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "ApplyFailed" });
    expect(condition(status, "Stalled")?.message).toContain("forbidden");

    const u = setup();
    u.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    u.failApplyWith(new TransientError("etcdserver: request timed out", { code: 504 }));
    await expect(u.reconciler.reconcile("foo")).rejects.toThrow("timed out");
    expect(u.applied).toEqual([]);
  });

  it("does not apply a stored spec that no longer validates, and says why in the status", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z", { sharing: { strategy: "TimeSlicing" } }));
    await t.reconciler.reconcile("foo");
    expect(t.applied.map((a) => a.kind)).toEqual(["status"]);
    const status = t.applied[0]!.status;
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "InvalidSpec" });
    expect(condition(status, "Ready")?.message).toContain("spec.sharing.replicas");
  });

  it("exports the status it writes as dpo_config_* series, and drops them once the config is gone", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.configs.put(config("bar", "2026-01-01T00:00:00Z", { resourceName: "vendor.example/bar" }));
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.37.2" } as never } });
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("bar");
    const lines = (await t.metrics.render()).split("\n");
    // A new config: its plugin pod is not there yet, so not ready and no devices.
    expect(lines).toContain('dpo_config_ready{config="foo"} 0');
    expect(lines).toContain('dpo_config_nodes_desired{config="foo"} 1');
    expect(lines).toContain('dpo_config_nodes_ready{config="foo"} 0');
    expect(lines).toContain('dpo_config_devices_advertised{config="foo"} 0');
    expect(lines).toContain('dpo_config_ready{config="bar"} 0');
    // Not ready, but not stalled: every Stalled reason 0.
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="ApplyFailed"} 0');
    expect(lines.filter((l) => l.startsWith("dpo_config_stalled{") && l.endsWith(" 1"))).toEqual([]);

    t.configs.objects.delete("foo");
    await t.reconciler.reconcile("foo");
    const after = await t.metrics.render();
    expect(after).not.toContain('config="foo"');
    expect(after).toContain('dpo_config_ready{config="bar"} 0');
  });

  describe("a config the operator's plugin policy refuses", () => {
    it.each([
      {
        what: "an image outside the operator's own repository",
        spec: { plugin: { image: "registry.example/evil:1" } },
        field: "spec.plugin.image: registry.example/evil:1 is not in an allowed repository (dpo;",
      },
      {
        what: "a Mock health file whose directory is the host's /etc",
        spec: { backend: { type: "Mock", mock: { devices: 2, healthFile: "/etc/health.json" } } },
        field: "spec.backend.mock.healthFile: mounts the host directory /etc,",
      },
    ])(
      "$what: no workloads (the old ones deleted), Stalled RefusedByPolicy naming the field, a Warning Event",
      async ({ spec, field }) => {
        const t = setup();
        const owned = {
          kind: "DevicePluginConfig",
          apiVersion: "dpo.dev/v1beta1",
          name: "foo",
          uid: "uid-foo",
        };
        t.daemonSets.put({ metadata: { name: "dpo-foo-abc", namespace: NS, ownerReferences: [owned] } });
        t.configs.put(config("foo", "2026-01-01T00:00:00Z", spec));
        await t.reconciler.reconcile("foo");
        expect(t.applied.map((a) => a.kind)).toEqual(["status"]);
        expect(t.deleted).toEqual([`/apis/apps/v1/namespaces/${NS}/daemonsets/dpo-foo-abc`]);
        const status = t.applied[0]!.status;
        expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "RefusedByPolicy" });
        expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "RefusedByPolicy" });
        expect(condition(status, "Ready")?.message).toContain(field);
        expect(t.events).toEqual(["Warning/RefusedByPolicy"]);
        expect((await t.metrics.render()).split("\n")).toContain(
          'dpo_config_stalled{config="foo",reason="RefusedByPolicy"} 1',
        );
      },
    );

    it("is no older config of the same resource name for a newer one to yield to", async () => {
      const t = setup();
      t.configs.put(config("old", "2026-01-01T00:00:00Z", { plugin: { image: "registry.example/evil:1" } }));
      t.configs.put(config("new", "2026-01-02T00:00:00Z"));
      await t.reconciler.reconcile("new");
      expect(t.applied.map((a) => a.kind)).toContain("DaemonSet");
      const status = t.applied.find((a) => a.kind === "status")!.status;
      expect(condition(status, "Stalled")?.reason).not.toBe("ResourceNameConflict");
    });

    it("is applied once the operator's policy allows it", async () => {
      const t = setup();
      t.configs.put(
        config("foo", "2026-01-01T00:00:00Z", { plugin: { image: "registry.example/team/dpo:2" } }),
      );
      t.reconciler = new ConfigReconciler({
        ...t.deps,
        render: {
          ...t.deps.render,
          pluginPolicy: { images: ["registry.example/team/"], hostPaths: ["/run/dpo"] },
        },
      });
      await t.reconciler.reconcile("foo");
      expect(t.applied.map((a) => a.kind)).toContain("DaemonSet");
      expect(t.events).not.toContain("Warning/RefusedByPolicy");
    });
  });

  it("exports a config whose stored spec no longer validates as not ready", async () => {
    const t = setup();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z", { sharing: { strategy: "TimeSlicing" } }));
    await t.reconciler.reconcile("foo");
    const lines = (await t.metrics.render()).split("\n");
    expect(lines).toContain('dpo_config_ready{config="foo"} 0');
    expect(lines).toContain('dpo_config_stalled{config="foo",reason="InvalidSpec"} 1');
  });

  it("leaves a config that is being deleted to the garbage collector", async () => {
    const t = setup();
    const c = config("foo", "2026-01-01T00:00:00Z");
    c.metadata!.deletionTimestamp = "2026-01-01T00:00:01Z" as never;
    t.configs.put(c);
    expect(await t.reconciler.reconcile("foo")).toEqual({});
    expect(t.applied).toEqual([]);
    expect(await t.reconciler.reconcile("gone")).toEqual({});
  });

  describe("stale DeviceNodeStates", () => {
    const selector = { "feature.example/foo": "true" };
    const reportPath = (node: string, name = deviceNodeStateName("foo", node)) =>
      `/apis/dpo.dev/v1beta1/namespaces/${NS}/devicenodestates/${name}`;

    function report(node: string, name = deviceNodeStateName("foo", node)): DeviceNodeState {
      return {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: { name, namespace: NS, uid: `uid-${name}` },
        spec: { configName: "foo", nodeName: node, resourceName: "vendor.example/foo" },
      };
    }

    function withReports(nodes: Array<[string, Record<string, string>]>, reportNodes: string[]) {
      const t = setup();
      t.configs.put(config("foo", "2026-01-01T00:00:00Z", { nodeSelector: selector }));
      for (const [name, labels] of nodes) t.nodes.put({ metadata: { name, labels } });
      for (const node of reportNodes) t.reports.put(report(node));
      return t;
    }

    it("deletes the reports of a deleted node and of a node no longer selected, and keeps the rest", async () => {
      const t = withReports(
        [
          ["kept", selector],
          ["unlabelled", {}],
        ],
        ["kept", "unlabelled", "gone"],
      );
      await t.reconciler.reconcile("foo");
      expect(t.deleted.filter((p) => p.includes("devicenodestates")).sort()).toEqual([
        reportPath("gone"),
        reportPath("unlabelled"),
      ]);
    });

    it("deletes a report under the name of an earlier plugin version once the current one exists", async () => {
      const t = withReports([["n1", selector]], ["n1"]);
      t.reports.put(report("n1", "foo-n1"));
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([reportPath("n1", "foo-n1")]);
      const line = t.logs
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l["report"] === "foo-n1");
      expect(line).toMatchObject({
        reason: "Superseded",
        replacedBy: deviceNodeStateName("foo", "n1"),
        msg: "deleted DeviceNodeState superseded by the report under its current name",
      });
    });

    it("keeps a report under an earlier name while its node has no current one", async () => {
      const t = withReports([["n1", selector]], []);
      t.reports.put(report("n1", "foo-n1"));
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([]);
    });

    it("deletes nothing before the node cache has synced", async () => {
      const t = withReports([], ["n1", "n2"]);
      t.nodes.synced = false;
      await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([]);
    });

    it("takes a 404 on delete as done and goes on with the others", async () => {
      const t = withReports([], ["a", "b"]);
      t.failDeleteWith((path) =>
        path === reportPath("a")
          ? new NotFoundError("not found", { code: 404, reason: "NotFound" })
          : undefined,
      );
      const result = await t.reconciler.reconcile("foo");
      expect(t.deleted).toEqual([reportPath("b")]);
      expect(result.requeueAfterMs).toBeUndefined();
    });

    it("retries later when a delete fails for another reason, and still writes the status", async () => {
      const t = withReports([], ["a"]);
      t.failDeleteWith(() => new TransientError("unavailable", { code: 503 }));
      const result = await t.reconciler.reconcile("foo");
      expect(result.requeueAfterMs).toBeGreaterThan(0);
      expect(t.applied.some((a) => a.kind === "status")).toBe(true);
    });

    it("deletes a bounded batch per reconcile and comes back for the rest", async () => {
      const gone = Array.from({ length: 60 }, (_, i) => `gone-${String(i).padStart(2, "0")}`);
      const t = withReports([], gone);
      const first = await t.reconciler.reconcile("foo");
      const deletedReports = t.deleted.filter((p) => p.includes("devicenodestates"));
      expect(deletedReports.length).toBeLessThan(60);
      expect(deletedReports.length).toBeGreaterThan(0);
      expect(first.requeueAfterMs).toBeGreaterThan(0);
    });
  });
});

describe("ConfigReconciler in DRA mode", () => {
  const dra = (spec: Record<string, unknown> = {}) =>
    config("foo", "2026-01-01T00:00:00Z", { publish: "DRA", ...spec });
  function withDra() {
    const t = setup();
    const slices = new FakeCache<KubernetesObject & { spec: unknown }>();
    const classes = new FakeCache<KubernetesObject & { spec?: unknown }>();
    t.reconciler.useDraInformers(slices.asInformer() as never, classes.asInformer() as never);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.34.4" } as never } });
    const slice = (name: string, label: string, node: string, devices: number) =>
      slices.put({
        apiVersion: "resource.k8s.io/v1",
        kind: "ResourceSlice",
        metadata: { name, uid: `u-${name}`, labels: { "dpo.dev/config": label } },
        spec: {
          driver: "foo.vendor.example",
          nodeName: node,
          pool: { name: node, generation: 1, resourceSliceCount: 1 },
          devices: Array.from({ length: devices }, (_, i) => ({ name: `d${i}` })),
        },
      });
    return { ...t, slices, classes, slice };
  }
  const lastStatus = (t: ReturnType<typeof setup>) =>
    t.applied.filter((a) => a.kind === "status").at(-1)?.status;

  it("creates the DeviceClass and counts the node's published devices", async () => {
    const t = withDra();
    t.configs.put(dra());
    t.slice("s1", "foo", "n1", 3);
    await t.reconciler.reconcile("foo");
    expect(t.applied.map((a) => a.name)).toContain("foo.vendor.example");
    expect(lastStatus(t)?.devices).toMatchObject({ capacity: 3, allocatable: 3 });
    expect(t.deleted).toEqual([]);
  });

  it("leaves a DeviceClass it does not own alone and stalls with DeviceClassConflict", async () => {
    const t = withDra();
    t.configs.put(dra());
    t.classes.put({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: { name: "foo.vendor.example" },
    });
    await t.reconciler.reconcile("foo");
    expect(t.applied.map((a) => a.name)).not.toContain("foo.vendor.example");
    expect(t.deleted).toEqual([]);
    expect(condition(lastStatus(t), "Stalled")).toMatchObject({
      status: "True",
      reason: "DeviceClassConflict",
    });
    expect(t.events).toContain("Warning/DeviceClassConflict");
  });

  it("switched to DevicePlugin: deletes its owned class and its slices, not another config's", async () => {
    const t = withDra();
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.classes.put({
      apiVersion: "resource.k8s.io/v1",
      kind: "DeviceClass",
      metadata: {
        name: "foo.vendor.example",
        uid: "c1",
        ownerReferences: [
          {
            apiVersion: "dpo.dev/v1beta1",
            kind: "DevicePluginConfig",
            name: "foo",
            uid: "uid-foo",
            controller: true,
          },
        ],
      },
    });
    t.slice("s1", "foo", "n1", 3);
    t.slice("s2", "bar", "n1", 3);
    await t.reconciler.reconcile("foo");
    expect(t.deleted).toEqual([
      "/apis/resource.k8s.io/v1/deviceclasses/foo.vendor.example",
      "/apis/resource.k8s.io/v1/resourceslices/s1",
    ]);
  });

  it("a deleted config's slices are deleted when its name comes back through the queue", async () => {
    const t = withDra();
    t.slice("s1", "gone", "n1", 2);
    t.slice("s2", "foo", "n1", 2);
    t.configs.put(dra());
    expect(await t.reconciler.reconcile("gone")).toEqual({});
    expect(t.deleted).toEqual(["/apis/resource.k8s.io/v1/resourceslices/s1"]);
  });
});

describe("ConfigReconciler: what the cluster's versions allow, in the status", () => {
  const node = (name: string, kubeletVersion: string): V1Node => ({
    metadata: { name },
    status: { conditions: [{ type: "Ready", status: "True" }], nodeInfo: { kubeletVersion } as never },
  });
  const lastStatus = (t: ReturnType<typeof setup>) =>
    t.applied.filter((a) => a.kind === "status").at(-1)?.status;

  it("after a Node patch meets a 409, patches that node again only once the cache shows a newer Node", async () => {
    const t = setup();
    // A revision label an earlier rollout left names a revision that is gone: the steady state patches
    // the node back onto the current one.
    const n1 = (resourceVersion: string): V1Node => {
      const n = node("n1", "v1.37.2");
      n.metadata!.resourceVersion = resourceVersion;
      n.metadata!.labels = { [nodeKeys("foo").revision]: "gone0000" };
      return n;
    };
    t.nodes.put(n1("7"));
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.settle({ cm: (await renderedFor(t.configs.get("foo"))).cm });
    const nodePatches = () => t.applied.filter((a) => a.kind === "Node").length;
    t.failApplyWith(new ConflictError("the object has been modified", { code: 409, reason: "Conflict" }));
    await t.reconciler.reconcile("foo");
    t.failApplyWith(undefined);
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("foo");
    expect(nodePatches()).toBe(0);
    t.nodes.put(n1("8"));
    await t.reconciler.reconcile("foo");
    expect(nodePatches()).toBe(1);
  });

  it("while the Node watch is down, comes back ever later up to 5 s, and soon again once the watch is back", async () => {
    const t = setup();
    const n1 = (resourceVersion: string): V1Node => {
      const n = node("n1", "v1.37.2");
      n.metadata!.resourceVersion = resourceVersion;
      n.metadata!.labels = { [nodeKeys("foo").revision]: "gone0000" };
      return n;
    };
    t.nodes.put(n1("7"));
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    t.settle({ cm: (await renderedFor(t.configs.get("foo"))).cm });
    t.failApplyWith(new ConflictError("the object has been modified", { code: 409, reason: "Conflict" }));
    await t.reconciler.reconcile("foo");
    t.failApplyWith(undefined);
    // The watch is down: the cache keeps showing version 7. Each pass comes back when it asked to.
    const waits: (number | undefined)[] = [];
    for (let pass = 0; pass < 9; pass++) {
      const { requeueAfterMs } = await t.reconciler.reconcile("foo");
      waits.push(requeueAfterMs);
      t.now.t += requeueAfterMs ?? 0;
    }
    expect(waits).toEqual([100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000]);
    expect(t.applied.filter((a) => a.kind === "Node")).toEqual([]);
    // The watch is back with version 8: the patch goes out, and the next lag waits the base again.
    t.nodes.put(n1("8"));
    await t.reconciler.reconcile("foo");
    expect(t.applied.filter((a) => a.kind === "Node")).toHaveLength(1);
    expect((await t.reconciler.reconcile("foo")).requeueAfterMs).toBe(100);
  });

  it("says which nodes replace instead of surging, from the rollout's own plan", async () => {
    const t = setup();
    t.nodes.put(node("n1", "v1.35.4"));
    t.nodes.put(node("n2", "v1.35.4"));
    t.nodes.put(node("n3", "v1.37.2"));
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    expect(condition(lastStatus(t), "SurgeUpgrades")).toMatchObject({
      status: "False",
      reason: "KubeletWithoutPerSocketEndpoints",
      message:
        "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
      observedGeneration: 1,
    });
  });

  it("writes no SurgeUpgrades for a config that always replaces", async () => {
    const t = setup();
    t.nodes.put(node("n1", "v1.35.4"));
    t.configs.put(config("foo", "2026-01-01T00:00:00Z", { upgrade: { strategy: "Replace" } }));
    await t.reconciler.reconcile("foo");
    // ExtendedResourceMapping is set in both publish modes (whether a switch to DRA could map the name).
    expect(lastStatus(t)?.conditions?.map((c) => c.type)).toEqual([
      "Ready",
      "Reconciling",
      "Stalled",
      "Degraded",
      "ExtendedResourceMapping",
    ]);
  });

  it("a DRA config without resource.k8s.io/v1 (no DRA informers handed over) is Stalled, saying why", async () => {
    const t = setup();
    t.nodes.put(node("n1", "v1.37.2"));
    t.configs.put(config("foo", "2026-01-01T00:00:00Z", { publish: "DRA" }));
    await t.reconciler.reconcile("foo");
    const status = lastStatus(t);
    expect(condition(status, "DRAPublishing")).toMatchObject({
      status: "False",
      reason: "ResourceAPIUnavailable",
    });
    expect(condition(status, "Stalled")).toMatchObject({ status: "True", reason: "ResourceAPIUnavailable" });
    expect(condition(status, "Ready")).toMatchObject({ status: "False", reason: "ResourceAPIUnavailable" });
    expect(t.events).toContain("Warning/ResourceAPIUnavailable");

    // The operator finds the group served later (manager.ts probes again): the next reconcile says so.
    const slices = new FakeCache<KubernetesObject & { spec: unknown }>();
    const classes = new FakeCache<KubernetesObject & { spec?: unknown }>();
    t.reconciler.useDraInformers(slices.asInformer() as never, classes.asInformer() as never);
    t.now.t += 10_000;
    await t.reconciler.reconcile("foo");
    expect(condition(lastStatus(t), "DRAPublishing")).toMatchObject({
      status: "True",
      reason: "ResourceAPIServed",
    });
    expect(condition(lastStatus(t), "Stalled")).toMatchObject({ status: "False" });
  });
});

describe("ConfigReconciler: the DeviceClass's extended resource name, as the probe found", () => {
  const stored = config("foo", "2026-01-01T00:00:00Z", { publish: "DRA" });
  const parsed = validateDevicePluginConfig(stored);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const CLASS = "foo.vendor.example";
  const owned = (name: string | undefined) => {
    const cls = renderDeviceClass(parsed.value, name);
    return { ...cls, metadata: { ...cls.metadata, resourceVersion: "7" } };
  };
  const cases: {
    name: string;
    kept: boolean | undefined;
    existing: ReturnType<typeof owned> | undefined;
    /** The class written, with its extended resource name, or "nothing" when none is written. */
    writes: { extendedResourceName: string | undefined } | "nothing";
    condition: string;
    /** spec.dra.deviceClass.extendedResourceName; unset when absent. */
    choice?: string;
  }[] = [
    {
      name: "kept: a chosen name is mapped instead of the resource name",
      kept: true,
      existing: owned("vendor.example/foo"),
      choice: "example.com/accelerator",
      writes: { extendedResourceName: "example.com/accelerator" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "kept: an empty name turns the mapping off, and the class loses the name it had",
      kept: true,
      existing: owned("vendor.example/foo"),
      choice: "",
      writes: { extendedResourceName: undefined },
      condition: "False/ExtendedResourceMappingDisabled",
    },
    {
      name: "kept (1.37): a new class maps the resource name",
      kept: true,
      existing: undefined,
      writes: { extendedResourceName: "vendor.example/foo" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "dropped (1.35 defaults): a new class maps none",
      kept: false,
      existing: undefined,
      writes: { extendedResourceName: undefined },
      condition: "False/ExtendedResourceUnsupported",
    },
    {
      name: "dropped: a class without the name is not rewritten every pass",
      kept: false,
      existing: owned(undefined),
      writes: "nothing",
      condition: "False/ExtendedResourceUnsupported",
    },
    {
      name: "kept: a class without the name gets it",
      kept: true,
      existing: owned(undefined),
      writes: { extendedResourceName: "vendor.example/foo" },
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "kept: a class with the name is left alone",
      kept: true,
      existing: owned("vendor.example/foo"),
      writes: "nothing",
      condition: "True/ExtendedResourceMapped",
    },
    {
      name: "not probed yet: the class keeps the name it has",
      kept: undefined,
      existing: owned("vendor.example/foo"),
      writes: "nothing",
      condition: "Unknown/ExtendedResourceSupportUnknown",
    },
    {
      name: "not probed yet: a new class maps none",
      kept: undefined,
      existing: undefined,
      writes: { extendedResourceName: undefined },
      condition: "Unknown/ExtendedResourceSupportUnknown",
    },
  ];
  it.each(cases)("$name", async ({ kept, existing, writes, condition: want, choice }) => {
    const t = setup();
    const classes = new FakeCache<KubernetesObject & { spec?: unknown }>();
    t.reconciler.useDraInformers(new FakeCache().asInformer() as never, classes.asInformer() as never);
    if (kept !== undefined) t.reconciler.useExtendedResourceNameKept(kept);
    if (existing) classes.put(existing);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.37.2" } as never } });
    t.configs.put(
      choice === undefined
        ? stored
        : config("foo", "2026-01-01T00:00:00Z", {
            publish: "DRA",
            dra: { deviceClass: { extendedResourceName: choice } },
          }),
    );
    await t.reconciler.reconcile("foo");
    const classWrites = t.written.filter((o) => o.kind === "DeviceClass") as {
      metadata: { name: string };
      spec: { extendedResourceName?: string };
    }[];
    if (writes === "nothing") expect(classWrites).toEqual([]);
    else {
      expect(classWrites.map((o) => o.metadata.name)).toEqual([CLASS]);
      expect(classWrites[0]?.spec.extendedResourceName).toBe(writes.extendedResourceName);
    }
    const status = t.applied.filter((a) => a.kind === "status").at(-1)?.status;
    const got = status?.conditions?.find((c) => c.type === "ExtendedResourceMapping");
    expect(`${got?.status}/${got?.reason}`).toBe(want);
    // Informational: it alone never makes the config not Ready.
    expect(status?.conditions?.find((c) => c.type === "Stalled")?.status).toBe("False");
  });

  it("a DevicePlugin config says whether a switch to DRA could map its name, and writes no class", async () => {
    const t = setup();
    t.reconciler.useDraInformers(new FakeCache().asInformer() as never, new FakeCache().asInformer());
    t.reconciler.useExtendedResourceNameKept(false);
    t.nodes.put({ metadata: { name: "n1" }, status: { nodeInfo: { kubeletVersion: "v1.35.4" } as never } });
    t.configs.put(config("foo", "2026-01-01T00:00:00Z"));
    await t.reconciler.reconcile("foo");
    expect(t.written.filter((o) => o.kind === "DeviceClass")).toEqual([]);
    const status = t.applied.filter((a) => a.kind === "status").at(-1)?.status;
    expect(status?.conditions?.find((c) => c.type === "ExtendedResourceMapping")).toMatchObject({
      status: "False",
      reason: "ExtendedResourceUnsupported",
    });
  });
});
