// aggregateStatus counting nodes: none, nodes the old revision still serves during a surge, pods not
// ready or terminating, and nodes or objects that are not the config's.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { pluginConfigHash } from "../../../../src/operator/render/configmap.js";
import { aggregateStatus } from "../../../../src/operator/status/aggregate.js";
import { condition, config, input, three, world, type NodeSetup } from "./aggregate-support.js";

describe("aggregateStatus", () => {
  it("is Ready with no nodes, saying so", () => {
    const cfg = config();
    const { status } = aggregateStatus(input(cfg, []));
    expect(status.nodes).toEqual({ desired: 0, ready: 0, available: 0, updated: 0, summary: "0/0" });
    expect(status.devices).toEqual({
      capacity: 0,
      allocatable: 0,
      unhealthy: 0,
      allocated: 0,
      summary: "0/0",
    });
    expect(condition(status, "Ready")).toMatchObject({
      status: "True",
      reason: "NoMatchingNodes",
      message: "no nodes match spec.nodeSelector",
    });
  });

  it("counts a node the old revision still serves during a surge as available, not ready", () => {
    // kubectl get dpc in the middle of a surge: every node has the old plugin serving and the new one
    // starting. NODES (available) stays 3/3, Ready is False while the upgrade moves, and says so.
    const cfg = config();
    const base = input(cfg, three({ n1: { pod: { hash: "old" } }, n2: { pod: { hash: "old" } } }), {
      upgrade: {
        phase: "Progressing",
        currentRevision: "aaa",
        updateRevision: "bbb",
        updated: 1,
        total: 3,
        summary: "1/3",
      },
    });
    const pods = base.pods.map((p, i) => ({ ...p, metadata: { ...p.metadata, uid: `old-${i}` } }));
    // On n1 the new plugin has already taken the node's report over (it registered; its pod is not Ready
    // yet), as in a real surge; on n2 the report is still the old plugin's.
    const reports = base.reports.map((r, i) => ({
      ...r,
      status: { ...r.status!, podUID: r.spec.nodeName === "n1" ? "new-n1" : `old-${i}` },
    }));
    const starting = (node: string): V1Pod => ({
      metadata: {
        name: `dpo-${cfg.metadata.name}-bbb-${node}`,
        uid: `new-${node}`,
        labels: { "dpo.dev/config": cfg.metadata.name },
        annotations: { "dpo.dev/config-hash": pluginConfigHash(cfg) },
      },
      spec: { nodeName: node, containers: [] },
      status: { phase: "Pending", conditions: [{ type: "Ready", status: "False" }] },
    });
    const { status } = aggregateStatus({ ...base, pods: [...pods, starting("n1"), starting("n2")], reports });
    expect(status.nodes).toEqual({ desired: 3, ready: 1, available: 3, updated: 1, summary: "3/3" });
    expect(status.devices?.summary).toBe("12/12");
    expect(condition(status, "Ready")).toMatchObject({
      status: "False",
      reason: "UpgradeProgressing",
      message: "1/3 nodes run plugin revision bbb; 3/3 nodes serve devices",
    });
  });

  it("counts a node whose registered plugin's pod has not passed its readiness probe yet as available, not ready", () => {
    // The kubelet advertises a registered plugin's devices before the probe passes; a crash-looping
    // container (waiting) serves nothing, whatever its last report said.
    const cfg = config();
    const { status } = aggregateStatus(
      input(
        cfg,
        three({ n2: { pod: { ready: false } }, n3: { pod: { ready: false, waiting: "CrashLoopBackOff" } } }),
      ),
    );
    expect(status.nodes).toMatchObject({ desired: 3, ready: 1, available: 2, summary: "2/3" });
  });

  it("does not count a node as available when only a terminating or unregistered pod is left on it", () => {
    const cfg = config();
    const base = input(cfg, three({ n2: { report: { state: "NotRegistered" } } }));
    const pods = base.pods.map((p) =>
      p.spec?.nodeName === "n1"
        ? { ...p, metadata: { ...p.metadata, deletionTimestamp: "2025-03-01T09:59:00Z" as unknown as Date } }
        : p,
    );
    const { status } = aggregateStatus({ ...base, pods });
    // n1's only pod is terminating: it still speaks for the node (nothing else does) and is ready, so the
    // node is ready; n2's plugin is not registered, so it serves nothing.
    expect(status.nodes).toMatchObject({ desired: 3, ready: 2, available: 2, summary: "2/3" });
  });

  it("does not count nodes outside the selector or behind an untolerated taint", () => {
    const cfg = config();
    const setups: NodeSetup[] = [
      { name: "n1" },
      { name: "other", labels: { pool: "x" }, pod: "none", report: "none" },
      {
        name: "cp",
        labels: { "feature.example/foo": "true" },
        taints: [{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }],
        pod: "none",
        report: "none",
      },
    ];
    const { status } = aggregateStatus(input(cfg, setups));
    expect(status.nodes).toEqual({ desired: 1, ready: 1, available: 1, updated: 1, summary: "1/1" });
    expect(status.devices?.capacity).toBe(4);
    expect(status.problems).toEqual([]);
  });

  it("ignores pods and reports of other configs", () => {
    const cfg = config();
    const other = world(config(1, "other-config"), [{ name: "n1" }]);
    const base = input(cfg, [{ name: "n1", pod: "none", report: "none" }]);
    const { status } = aggregateStatus({ ...base, pods: other.pods, reports: other.reports });
    expect(status.problems?.[0]).toMatchObject({ node: "n1", reason: "PluginNotReady" });
  });
});
