// The config reconciler's writes: what it applies for a new config, no request when the caches already
// hold it, a write after a 409 only once the cache moved, and status written once per interval and
// exported as metrics.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ConflictError } from "../../../../src/kube/index.js";
import { condition, config, NS, renderedFor, revisionOf, setup } from "./reconciler-support.js";

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
});
