// The config reconciler between configs that claim the same thing: a resource name or a CDI kind; the
// younger yields, also to an older one whose stored spec no longer validates.
import { describe, expect, it } from "vitest";
import { condition, config, NS, setup } from "./reconciler-support.js";

describe("ConfigReconciler", () => {
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
});
