// The config reconciler and the cluster's versions: Node patches after a 409 and while the Node watch is
// down, SurgeUpgrades from the rollout's plan, and a DRA config without resource.k8s.io/v1.
import type { KubernetesObject, V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ConflictError } from "../../../../src/kube/index.js";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";
import { FakeCache } from "./fake-cache.js";
import { condition, config, renderedFor, setup } from "./reconciler-support.js";

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
