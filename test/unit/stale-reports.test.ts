// Which DeviceNodeStates the operator deletes: only those whose node is gone or no longer targeted.
import type { V1Node, V1Taint } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import type { Toleration } from "../../src/api/v1beta1/spec.js";
import { findStaleReports, type StaleReason } from "../../src/operator/controllers/stale-reports.js";

const CONFIG = "foo";

function report(node: string, configName = CONFIG, deleting = false): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: {
      name: `${configName}-${node}`,
      namespace: "dpo-system",
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { configName, nodeName: node, resourceName: "example.com/foo" },
  };
}

function node(name: string, labels: Record<string, string>, taints: V1Taint[] = []): V1Node {
  return { metadata: { name, labels }, spec: { taints } };
}

const selected = { "feature.example/foo": "true" };
const evict: V1Taint = { key: "maintenance", effect: "NoExecute" };
const noSchedule: V1Taint = { key: "maintenance", effect: "NoSchedule" };

describe("findStaleReports", () => {
  it.each<{
    name: string;
    nodes: V1Node[];
    reports: DeviceNodeState[];
    tolerations?: Toleration[];
    synced?: boolean;
    want: Array<[string, StaleReason]>;
  }>([
    {
      name: "targeted node keeps its report",
      nodes: [node("n1", selected)],
      reports: [report("n1")],
      want: [],
    },
    {
      name: "deleted node: report is stale",
      nodes: [node("n1", selected)],
      reports: [report("n1"), report("gone")],
      want: [["foo-gone", "NodeGone"]],
    },
    {
      name: "node lost the selector's label",
      nodes: [node("n1", {}), node("n2", selected)],
      reports: [report("n1"), report("n2")],
      want: [["foo-n1", "NodeNotTargeted"]],
    },
    {
      name: "label with another value",
      nodes: [node("n1", { "feature.example/foo": "false" })],
      reports: [report("n1")],
      want: [["foo-n1", "NodeNotTargeted"]],
    },
    {
      name: "node cache not synced: a missing node proves nothing",
      nodes: [],
      reports: [report("n1")],
      synced: false,
      want: [],
    },
    {
      name: "not synced: not even a label mismatch deletes",
      nodes: [node("n1", {})],
      reports: [report("n1")],
      synced: false,
      want: [],
    },
    {
      name: "untolerated NoExecute taint evicts the plugin",
      nodes: [node("n1", selected, [evict])],
      reports: [report("n1")],
      want: [["foo-n1", "NodeNotTargeted"]],
    },
    {
      name: "tolerated NoExecute taint keeps the report",
      nodes: [node("n1", selected, [evict])],
      reports: [report("n1")],
      tolerations: [{ key: "maintenance", operator: "Exists" }],
      want: [],
    },
    {
      name: "NoSchedule taint keeps the report: a running daemon pod stays",
      nodes: [node("n1", selected, [noSchedule])],
      reports: [report("n1")],
      want: [],
    },
    {
      name: "not-ready node keeps its report (daemon pods tolerate it)",
      nodes: [node("n1", selected, [{ key: "node.kubernetes.io/not-ready", effect: "NoExecute" }])],
      reports: [report("n1")],
      want: [],
    },
    {
      name: "another config's report is not ours to judge",
      nodes: [],
      reports: [report("gone", "bar")],
      want: [],
    },
    {
      name: "a report already being deleted is not deleted again",
      nodes: [],
      reports: [report("gone", CONFIG, true)],
      want: [],
    },
  ])("$name", ({ nodes, reports, tolerations, synced, want }) => {
    const byName = new Map(nodes.map((n) => [n.metadata!.name!, n]));
    const result = findStaleReports({
      configName: CONFIG,
      spec: { nodeSelector: selected, tolerations: tolerations ?? [] },
      reports,
      node: (name) => byName.get(name),
      nodesSynced: synced ?? true,
      limit: 10,
    });
    expect(result.stale.map((s) => [s.report.metadata.name, s.reason])).toEqual(want);
    expect(result.remaining).toBe(0);
  });

  it("bounds the work per call, in name order, and says how many are left", () => {
    const reports = ["d", "b", "a", "c", "e"].map((n) => report(n));
    const result = findStaleReports({
      configName: CONFIG,
      spec: { nodeSelector: selected, tolerations: [] },
      reports,
      node: () => undefined,
      nodesSynced: true,
      limit: 2,
    });
    expect(result.stale.map((s) => s.report.metadata.name)).toEqual(["foo-a", "foo-b"]);
    expect(result.remaining).toBe(3);
  });

  it("an empty selector targets every node", () => {
    const result = findStaleReports({
      configName: CONFIG,
      spec: { nodeSelector: {}, tolerations: [] },
      reports: [report("n1")],
      node: (name) => node(name, {}),
      nodesSynced: true,
      limit: 10,
    });
    expect(result.stale).toEqual([]);
  });
});
