// The config reconciler with a config it cannot apply: an apply the API server refuses, a stored spec that
// no longer validates, a spec the operator's plugin policy refuses; and a config being deleted.
import { describe, expect, it } from "vitest";
import { ForbiddenError, TransientError } from "../../../../src/kube/index.js";
import { ConfigReconciler } from "../../../../src/operator/controllers/config-reconciler.js";
import { condition, config, NS, setup } from "./reconciler-support.js";

describe("ConfigReconciler", () => {
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
});
