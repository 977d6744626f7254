// Which DeviceNodeStates the operator deletes: only those whose node is gone or no longer targeted, and
// those under an earlier version's name once the report under the current name exists.
import type { V1Node, V1Taint } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { Toleration } from "../../../../src/api/v1beta1/spec.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import {
  findStaleReports,
  NODE_GONE_GRACE_MS,
  type StaleReason,
} from "../../../../src/operator/controllers/stale-reports.js";

const CONFIG = "foo";

/** A report under the current name, or under `name` (an earlier version's `<config>-<node>`, say). */
function report(node: string, configName = CONFIG, deleting = false, name?: string): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: {
      name: name ?? deviceNodeStateName(configName, node),
      namespace: "dpo-system",
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { configName, nodeName: node, resourceName: "example.com/foo" },
  };
}

const current = (node: string): string => deviceNodeStateName(CONFIG, node);
/** The name plugins before unique report names gave a pair. */
const legacy = (node: string, configName = CONFIG): DeviceNodeState =>
  report(node, configName, false, `${configName}-${node}`);

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
      want: [[current("gone"), "NodeGone"]],
    },
    {
      name: "node lost the selector's label",
      nodes: [node("n1", {}), node("n2", selected)],
      reports: [report("n1"), report("n2")],
      want: [[current("n1"), "NodeNotTargeted"]],
    },
    {
      name: "label with another value",
      nodes: [node("n1", { "feature.example/foo": "false" })],
      reports: [report("n1")],
      want: [[current("n1"), "NodeNotTargeted"]],
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
      want: [[current("n1"), "NodeNotTargeted"]],
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
    {
      name: "old-named report beside the current one: superseded",
      nodes: [node("n1", selected)],
      reports: [legacy("n1"), report("n1")],
      want: [["foo-n1", "Superseded"]],
    },
    {
      name: "old-named report alone: its plugin may not be updated yet, so it stays",
      nodes: [node("n1", selected)],
      reports: [legacy("n1")],
      want: [],
    },
    {
      name: "a current report being deleted supersedes nothing",
      nodes: [node("n1", selected)],
      reports: [legacy("n1"), report("n1", CONFIG, true)],
      want: [],
    },
    {
      name: "the current report of another node supersedes nothing",
      nodes: [node("n1", selected), node("n2", selected)],
      reports: [legacy("n1"), report("n2")],
      want: [],
    },
    {
      name: "any other name than the current one is superseded, not only <config>-<node>",
      nodes: [node("n1", selected)],
      reports: [report("n1", CONFIG, false, "hand-made"), report("n1")],
      want: [["hand-made", "Superseded"]],
    },
    {
      name: "old-named report of a deleted node: NodeGone, like the current one",
      nodes: [],
      reports: [legacy("gone"), report("gone")],
      want: [
        ["foo-gone", "NodeGone"],
        [current("gone"), "NodeGone"],
      ],
    },
    {
      name: "old-named report of an untargeted node: NodeNotTargeted",
      nodes: [node("n1", {})],
      reports: [legacy("n1"), report("n1")],
      want: [
        ["foo-n1", "NodeNotTargeted"],
        [current("n1"), "NodeNotTargeted"],
      ],
    },
    {
      name: "node cache not synced: superseded needs no node, so it is still deleted",
      nodes: [],
      reports: [legacy("n1"), report("n1")],
      synced: false,
      want: [["foo-n1", "Superseded"]],
    },
    {
      // `a-b-c` was the old name of both config a-b on node c and config a on node b-c: it is judged as
      // the pair its spec names.
      name: "the colliding old name is superseded by the current name of the pair in its spec",
      nodes: [node("b-c", selected), node("c", selected)],
      reports: [report("b-c", "foo", false, "foo-b-c"), report("c", "foo-b"), report("b-c")],
      want: [["foo-b-c", "Superseded"]],
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
    expect(result.stale.map((s) => s.report.metadata.name)).toEqual(
      ["a", "b", "c", "d", "e"].map(current).sort().slice(0, 2),
    );
    expect(result.remaining).toBe(3);
  });

  it("names the report that supersedes an old-named one", () => {
    const result = findStaleReports({
      configName: CONFIG,
      spec: { nodeSelector: selected, tolerations: [] },
      reports: [report("n1"), legacy("n1")],
      node: (name) => node(name, selected),
      nodesSynced: true,
      limit: 10,
    });
    expect(result.stale).toEqual([{ report: legacy("n1"), reason: "Superseded", replacedBy: current("n1") }]);
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

  describe("reports of plugin revisions", () => {
    const NOW = Date.parse("2026-11-23T12:00:00Z");
    /** A report a plugin of `revision` wrote, `ageMs` ago. */
    function revisioned(node: string, revision: string | undefined, ageMs: number): DeviceNodeState {
      return {
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: {
          name: deviceNodeStateName(CONFIG, node, revision),
          namespace: "dpo-system",
          creationTimestamp: new Date(NOW - ageMs).toISOString(),
        },
        spec: {
          configName: CONFIG,
          nodeName: node,
          resourceName: "example.com/foo",
          ...(revision !== undefined ? { revision } : {}),
        },
      };
    }
    const judge = (reports: DeviceNodeState[], revisions?: Set<string>) =>
      findStaleReports({
        configName: CONFIG,
        spec: { nodeSelector: selected, tolerations: [] },
        reports,
        node: (name) => node(name, selected),
        nodesSynced: true,
        limit: 10,
        revisions,
        now: NOW,
      }).stale.map((s) => [s.report.metadata.name, s.reason, s.replacedBy]);

    it.each([
      ["a running revision's report is kept", revisioned("n1", "aaa", 600_000), new Set(["aaa"]), []],
      [
        "a gone revision's report goes after the grace period",
        revisioned("n1", "old", 61_000),
        new Set(["aaa"]),
        ["RevisionGone"],
      ],
      [
        "a gone revision's report is kept within the grace period",
        revisioned("n1", "old", 59_000),
        new Set(["aaa"]),
        [],
      ],
      [
        "an unversioned report goes once no unversioned DaemonSet runs",
        revisioned("n1", undefined, 61_000),
        new Set(["aaa"]),
        ["RevisionGone"],
      ],
      [
        "an unversioned report stays while one does",
        revisioned("n1", undefined, 61_000),
        new Set(["", "aaa"]),
        [],
      ],
      [
        "nothing is judged by revision without the DaemonSets",
        revisioned("n1", "old", 600_000),
        undefined,
        [],
      ],
    ] as const)("%s", (_name, r, revisions, want) => {
      expect(judge([r], revisions).map((s) => s[1])).toEqual(want);
    });

    it("a report under an earlier version's plain name is superseded by the revision's report", () => {
      const current = revisioned("n1", "aaa", 1_000);
      expect(judge([current, legacy("n1")], new Set(["aaa"]))).toEqual([
        [`${CONFIG}-n1`, "Superseded", current.metadata.name],
      ]);
    });
  });
});

describe("findStaleReports and a report that reached the cache before its node", () => {
  const now = Date.parse("2026-11-27T09:00:00Z");
  const young = (ageMs: number): DeviceNodeState => {
    const r = report("new-node");
    r.metadata["creationTimestamp"] = new Date(now - ageMs).toISOString();
    return r;
  };
  const find = (r: DeviceNodeState) =>
    findStaleReports({
      configName: CONFIG,
      spec: { nodeSelector: selected, tolerations: [] },
      reports: [r],
      node: () => undefined,
      nodesSynced: true,
      limit: 10,
      now,
    });

  it("is not NodeGone while younger than the grace, and says when to look again", () => {
    const result = find(young(4_000));
    expect(result.stale).toEqual([]);
    expect(result.recheckInMs).toBe(NODE_GONE_GRACE_MS - 4_000 + 1);
  });

  it("is NodeGone once older than the grace", () => {
    const result = find(young(NODE_GONE_GRACE_MS + 1));
    expect(result.stale.map((s) => s.reason)).toEqual(["NodeGone"]);
    expect(result.recheckInMs).toBeUndefined();
  });
});
