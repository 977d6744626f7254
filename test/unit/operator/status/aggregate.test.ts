// The status of a DevicePluginConfig from the kubelet's and the plugins' truths, and its Events.
import type { V1DaemonSet, V1Node, V1NodeSystemInfo, V1Pod, V1Taint } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import {
  DevicePluginConfigStatusSchema,
  PROBLEM_REASONS,
  type Condition,
  type DevicePluginConfigStatus,
} from "../../../../src/api/v1beta1/status.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import { pluginConfigHash } from "../../../../src/operator/render/configmap.js";
import {
  aggregateStatus,
  previousStatusOf,
  type AggregateStatusInput,
} from "../../../../src/operator/status/aggregate.js";
import { DEGRADED_REASON_ORDER } from "../../../../src/operator/status/degraded.js";
import { statusEqual } from "../../../../src/operator/status/conditions.js";

const RESOURCE = "hardware-vendor.example/foo";
const T0 = new Date("2025-03-01T10:00:00.123Z");
const T1 = new Date("2025-03-01T10:05:00Z");

function config(replicas = 1, name = "example-foo"): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name, uid: "uid-1", generation: 2 },
    spec: {
      resourceName: RESOURCE,
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo" } },
      sharing: replicas > 1 ? { strategy: "TimeSlicing", replicas } : { strategy: "None" },
      nodeSelector: { "feature.example/foo": "true" },
    },
  });
}

interface NodeSetup {
  name: string;
  /** Kubelet counts; undefined leaves the resource out of the node status. */
  capacity?: number | undefined;
  allocatable?: number | undefined;
  pod?: { ready?: boolean; hash?: string; waiting?: string } | "none";
  report?:
    | {
        state?: "Registered" | "NotRegistered";
        lastError?: string;
        /** Physical devices foo-0..foo-(devices-1); the listed indexes are unhealthy. */
        devices?: number;
        unhealthy?: number[];
        /** Override of the advertised/healthy counts the plugin reports. */
        replicas?: number;
        /** The kubelet's allocated count, as the plugin reports it; absent by default (unknown). */
        allocated?: number;
      }
    | "none";
  labels?: Record<string, string>;
  taints?: V1Taint[];
  /** Node.status.nodeInfo.kubeletVersion; absent when unset. */
  kubeletVersion?: string;
}

interface World {
  nodes: V1Node[];
  pods: V1Pod[];
  reports: DeviceNodeState[];
}

/** A cluster where each node defaults to a healthy plugin with 4 devices (times the config's replicas). */
function world(cfg: DevicePluginConfig, setups: NodeSetup[]): World {
  const hash = pluginConfigHash(cfg);
  const replicas = cfg.spec.sharing.strategy === "TimeSlicing" ? (cfg.spec.sharing.replicas ?? 1) : 1;
  const w: World = { nodes: [], pods: [], reports: [] };
  for (const s of setups) {
    const reportSetup = s.report === "none" ? undefined : (s.report ?? {});
    const physical = reportSetup?.devices ?? 4;
    const unhealthy = new Set(reportSetup?.unhealthy ?? []);
    const healthyAdvertised = (physical - unhealthy.size) * replicas;
    const capacity = "capacity" in s ? s.capacity : physical * replicas;
    const allocatable = "allocatable" in s ? s.allocatable : healthyAdvertised;
    w.nodes.push({
      metadata: { name: s.name, labels: s.labels ?? { "feature.example/foo": "true" } },
      spec: { taints: s.taints ?? [] },
      status: {
        ...(s.kubeletVersion !== undefined
          ? { nodeInfo: { kubeletVersion: s.kubeletVersion } as V1NodeSystemInfo }
          : {}),
        capacity: { cpu: "4", ...(capacity !== undefined ? { [RESOURCE]: String(capacity) } : {}) },
        allocatable: { cpu: "4", ...(allocatable !== undefined ? { [RESOURCE]: String(allocatable) } : {}) },
      },
    });
    if (s.pod !== "none") {
      const ready = s.pod?.ready ?? true;
      w.pods.push({
        metadata: {
          name: `dpo-${cfg.metadata.name}-${s.name}`,
          labels: { "dpo.dev/config": cfg.metadata.name },
          annotations: { "dpo.dev/config-hash": s.pod?.hash ?? hash },
        },
        spec: { nodeName: s.name, containers: [] },
        status: {
          phase: "Running",
          conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
          ...(s.pod?.waiting
            ? {
                containerStatuses: [
                  {
                    name: "plugin",
                    image: "x",
                    imageID: "",
                    ready: false,
                    restartCount: 3,
                    state: { waiting: { reason: s.pod.waiting } },
                  },
                ],
              }
            : {}),
        },
      });
    }
    if (reportSetup !== undefined) {
      const devices = Array.from({ length: physical }, (_, i) => ({
        id: `foo-${i}`,
        health: unhealthy.has(i) ? ("Unhealthy" as const) : ("Healthy" as const),
        ...(unhealthy.has(i) ? { reason: "MarkedUnhealthy" } : {}),
        since: "2025-03-01T09:00:00Z",
        numaNode: i % 2,
        replicas,
      }));
      w.reports.push({
        apiVersion: "dpo.dev/v1beta1",
        kind: "DeviceNodeState",
        metadata: { name: deviceNodeStateName(cfg.metadata.name, s.name), namespace: "dpo-system" },
        spec: { configName: cfg.metadata.name, nodeName: s.name, resourceName: RESOURCE },
        status: {
          pluginVersion: "0.1.0",
          kubeletAPIVersion: "v1beta1",
          registration: {
            state: reportSetup.state ?? "Registered",
            since: "2025-03-01T09:00:00Z",
            ...(reportSetup.lastError ? { lastError: reportSetup.lastError } : {}),
          },
          configHash: hash,
          advertised: physical * replicas,
          healthy: healthyAdvertised,
          ...(reportSetup.allocated !== undefined ? { allocated: reportSetup.allocated } : {}),
          devices,
          updateTime: "2025-03-01T09:00:00Z",
        },
      });
    }
  }
  return w;
}

function daemonSet(
  cfg: DevicePluginConfig,
  opts: { desired: number; updated?: number; generation?: number; observed?: number; hash?: string },
): V1DaemonSet {
  return {
    metadata: { name: `dpo-${cfg.metadata.name}`, namespace: "dpo-system", generation: opts.generation ?? 1 },
    spec: {
      selector: { matchLabels: { "dpo.dev/config": cfg.metadata.name } },
      template: { metadata: { annotations: { "dpo.dev/config-hash": opts.hash ?? pluginConfigHash(cfg) } } },
    },
    status: {
      currentNumberScheduled: opts.desired,
      desiredNumberScheduled: opts.desired,
      numberMisscheduled: 0,
      numberReady: opts.desired,
      updatedNumberScheduled: opts.updated ?? opts.desired,
      observedGeneration: opts.observed ?? opts.generation ?? 1,
    },
  };
}

function input(
  cfg: DevicePluginConfig,
  setups: NodeSetup[],
  extra: Partial<AggregateStatusInput> = {},
): AggregateStatusInput {
  const w = world(cfg, setups);
  const targeted = setups.filter((s) => s.labels === undefined && s.taints === undefined).length;
  return {
    config: cfg,
    configHash: pluginConfigHash(cfg),
    ...w,
    daemonSet: daemonSet(cfg, { desired: targeted }),
    previous: undefined,
    now: T0,
    ...extra,
  };
}

function condition(status: DevicePluginConfigStatus, type: string): Condition {
  const found = status.conditions?.find((c) => c.type === type);
  if (!found) throw new Error(`no ${type} condition in ${JSON.stringify(status.conditions)}`);
  return found;
}

/** type=status/reason for each condition, in order: the shape the e2e tests and kubectl wait read. */
function conditionSummary(status: DevicePluginConfigStatus): string[] {
  return (status.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`);
}

const three = (over: Partial<Record<"n1" | "n2" | "n3", Partial<NodeSetup>>> = {}): NodeSetup[] =>
  (["n1", "n2", "n3"] as const).map((name) => ({ name, ...over[name] }));

describe("aggregateStatus", () => {
  it("reports a healthy cluster as Ready with full counts", () => {
    const cfg = config();
    const { status, events } = aggregateStatus(input(cfg, three()));
    const at = "2025-03-01T10:00:00Z";
    expect(status).toEqual({
      observedGeneration: 2,
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "AllNodesReady",
          message: "3/3 nodes ready",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Reconciling",
          status: "False",
          reason: "RolloutComplete",
          message: "3/3 plugin pods run the current template",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Stalled",
          status: "False",
          reason: "NoErrors",
          message: "the plugin objects are applied",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
        {
          type: "Degraded",
          status: "False",
          reason: "NoProblems",
          message: "no problems on 3 nodes",
          lastTransitionTime: at,
          observedGeneration: 2,
        },
      ],
      nodes: { desired: 3, ready: 3, available: 3, updated: 3, summary: "3/3" },
      devices: { capacity: 12, allocatable: 12, unhealthy: 0, allocated: 0, summary: "12/12" },
      problems: [],
      problemsOmitted: 0,
      daemonSetName: "dpo-example-foo",
    });
    expect(events).toEqual([{ type: "Normal", reason: "Ready", message: "3/3 nodes ready" }]);
  });

  it.each<{ case: string; replicas: number; devices: string[]; unhealthy: number; summary: string }>([
    { case: "without sharing", replicas: 1, devices: ["foo-1"], unhealthy: 1, summary: "11/12" },
    {
      case: "time-sliced ×4",
      replicas: 4,
      devices: ["foo-1::0", "foo-1::1", "foo-1::2", "foo-1::3"],
      unhealthy: 4,
      summary: "44/48",
    },
  ])("shows an unhealthy device $case as UnhealthyDevices with the advertised ids, still Ready", (row) => {
    const cfg = config(row.replicas);
    const { status } = aggregateStatus(input(cfg, three({ n2: { report: { unhealthy: [1] } } })));
    expect(status.problems).toEqual([
      {
        node: "n2",
        reason: "UnhealthyDevices",
        message: `${row.unhealthy} of ${4 * row.replicas} devices unhealthy: MarkedUnhealthy`,
        devices: row.devices,
      },
    ]);
    expect(status.devices).toMatchObject({ unhealthy: row.unhealthy, summary: row.summary });
    expect(status.nodes).toMatchObject({ ready: 3, summary: "3/3" });
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/UnhealthyDevices",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: UnhealthyDevices 1");
  });

  it.each<{ case: string; n2: Partial<NodeSetup>; reason: string; message: RegExp }>([
    {
      case: "plugin stopped: the kubelet keeps capacity but nothing is allocatable (stale report)",
      n2: { allocatable: 0 },
      reason: "NoCapacity",
      message: /capacity 4, allocatable 0; the plugin advertises 4, 4 healthy/,
    },
    {
      case: "plugin gone for long: the kubelet dropped the resource",
      n2: { capacity: undefined, allocatable: undefined },
      reason: "NoCapacity",
      message: /capacity none, allocatable none/,
    },
    {
      case: "plugin reports NotRegistered while its pod looks ready",
      n2: { report: { state: "NotRegistered", lastError: "kubelet.sock: connection refused" } },
      reason: "PluginNotRegistered",
      message: /not registered with the kubelet: kubelet.sock: connection refused/,
    },
    {
      case: "plugin has not reported",
      n2: { report: "none" },
      reason: "PluginNotRegistered",
      message: /has not reported/,
    },
    {
      case: "pod not ready and the report says why",
      n2: { pod: { ready: false }, report: { state: "NotRegistered" } },
      reason: "PluginNotRegistered",
      message: /not registered/,
    },
    {
      case: "pod crash-looping",
      n2: { pod: { ready: false, waiting: "CrashLoopBackOff" } },
      reason: "PluginNotReady",
      message: /is Running \(CrashLoopBackOff\) and not ready/,
    },
    { case: "no pod on the node", n2: { pod: "none" }, reason: "PluginNotReady", message: /no plugin pod/ },
    {
      case: "kubelet capacity differs from the plugin's",
      n2: { capacity: 3, allocatable: 3 },
      reason: "CapacityMismatch",
      message: /capacity 3, allocatable 3; the plugin advertises 4, 4 healthy/,
    },
    {
      case: "kubelet allocatable differs from the plugin's healthy count",
      n2: { allocatable: 2 },
      reason: "CapacityMismatch",
      message: /allocatable 2; the plugin advertises 4, 4 healthy/,
    },
  ])("$case → $reason, node not ready", ({ n2, reason, message }) => {
    const cfg = config();
    const { status } = aggregateStatus(input(cfg, three({ n2 })));
    expect(status.problems).toHaveLength(1);
    expect(status.problems?.[0]).toMatchObject({ node: "n2", reason });
    expect(status.problems?.[0]?.message).toMatch(message);
    expect(status.nodes).toMatchObject({ desired: 3, ready: 2, summary: "2/3" });
    expect(conditionSummary(status)).toEqual([
      "Ready=False/NodesNotReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      `Degraded=True/${reason}`,
    ]);
    expect(condition(status, "Ready").message).toBe(`2/3 nodes ready; not ready: n2 (${reason})`);
  });

  it("sums device totals from the kubelet and unhealthy counts from the reports", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { report: { unhealthy: [0, 3] } }, n3: { allocatable: 0 } })),
    );
    expect(status.devices).toEqual({
      capacity: 12,
      allocatable: 6,
      unhealthy: 2,
      allocated: 0,
      summary: "6/12",
    });
  });

  it("sums the devices the kubelets allocated from the reports; a report that does not know counts none", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { report: { allocated: 3 } }, n2: { report: { allocated: 1 } }, n3: {} })),
    );
    expect(status.devices).toEqual({
      capacity: 12,
      allocatable: 12,
      unhealthy: 0,
      allocated: 4,
      summary: "12/12",
    });
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
    // A status an earlier operator wrote, without the field, still reads as the previous status.
    const older: Record<string, unknown> = { ...status.devices };
    delete older.allocated;
    expect(previousStatusOf({ status: { ...status, devices: older } })).toBeDefined();
  });

  describe("while reports are renamed (an old-named one lingers beside the current one)", () => {
    /** n2's report as `report` describes it, under the `<config>-<node>` name of earlier plugins. */
    function oldNamed(
      cfg: DevicePluginConfig,
      report: NodeSetup["report"],
      updateTime: string,
    ): DeviceNodeState {
      const [r] = world(cfg, [{ name: "n2", report }]).reports;
      return {
        ...r!,
        metadata: { ...r!.metadata, name: `${cfg.metadata.name}-n2` },
        status: { ...r!.status!, updateTime },
      };
    }

    it("counts the node once, as its current report says, even when the old one is newer", () => {
      const cfg = config();
      const base = input(cfg, three());
      const stale = oldNamed(cfg, { unhealthy: [0, 1], state: "NotRegistered" }, "2025-03-01T09:59:00Z");
      const { status } = aggregateStatus({ ...base, reports: [stale, ...base.reports] });
      expect(status).toEqual(aggregateStatus(base).status);
      expect(status.nodes).toMatchObject({ desired: 3, ready: 3 });
      expect(status.devices).toMatchObject({ capacity: 12, allocatable: 12, unhealthy: 0 });
    });

    it("takes the current report's problem, once, over a healthy old one", () => {
      const cfg = config();
      const base = input(cfg, three({ n2: { report: { unhealthy: [1] } } }));
      const stale = oldNamed(cfg, {}, "2025-03-01T09:59:00Z");
      const { status } = aggregateStatus({ ...base, reports: [...base.reports, stale] });
      expect(status.devices?.unhealthy).toBe(1);
      expect(status.problems).toEqual([expect.objectContaining({ node: "n2", reason: "UnhealthyDevices" })]);
    });

    it("still uses the old-named report of a node whose plugin has not written the current one", () => {
      const cfg = config();
      const base = input(cfg, three({ n2: { report: "none" } }));
      const stale = oldNamed(cfg, { unhealthy: [1] }, "2025-03-01T09:00:00Z");
      const { status } = aggregateStatus({ ...base, reports: [...base.reports, stale] });
      expect(status.devices?.unhealthy).toBe(1);
      expect(status.problems?.map((p) => p.node)).toEqual(["n2"]);
    });
  });

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

  it("stalls on a resourceName conflict: no DaemonSet, nothing evaluated", () => {
    const cfg = config();
    const { status, events } = aggregateStatus(
      input(cfg, three(), { conflictWith: "older-foo", daemonSet: undefined }),
    );
    expect(conditionSummary(status)).toEqual([
      "Ready=False/ResourceNameConflict",
      "Reconciling=False/ResourceNameConflict",
      "Stalled=True/ResourceNameConflict",
      "Degraded=Unknown/ResourceNameConflict",
    ]);
    expect(condition(status, "Stalled").message).toBe(
      `DevicePluginConfig older-foo already serves ${RESOURCE} on overlapping nodes; this config gets no DaemonSet while it does`,
    );
    expect(status.nodes).toEqual({ desired: 3, ready: 0, available: 0, updated: 0, summary: "0/3" });
    expect(status.devices).toEqual({
      capacity: 0,
      allocatable: 0,
      unhealthy: 0,
      allocated: 0,
      summary: "0/0",
    });
    expect(status.problems).toEqual([]);
    expect(status).not.toHaveProperty("daemonSetName");
    expect(events).toEqual([
      { type: "Warning", reason: "ResourceNameConflict", message: condition(status, "Stalled").message },
    ]);
  });

  it("stalls when applying failed, and still reports the nodes", () => {
    const cfg = config();
    const { status } = aggregateStatus(input(cfg, three(), { applyError: "daemonsets.apps is forbidden" }));
    expect(conditionSummary(status)).toEqual([
      "Ready=False/ApplyFailed",
      "Reconciling=False/ApplyFailed",
      "Stalled=True/ApplyFailed",
      "Degraded=False/NoProblems",
    ]);
    expect(condition(status, "Stalled").message).toContain("daemonsets.apps is forbidden");
    expect(status.nodes?.ready).toBe(3);
  });

  it.each<{ case: string; daemonSet: (cfg: DevicePluginConfig) => V1DaemonSet | undefined; reason: string }>([
    { case: "DaemonSet not created yet", daemonSet: () => undefined, reason: "DaemonSetPending" },
    {
      case: "DaemonSet controller behind the last apply",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, generation: 2, observed: 1 }),
      reason: "Progressing",
    },
    {
      case: "cache still holding the previous template",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, hash: "previous" }),
      reason: "Progressing",
    },
    {
      case: "pods still being replaced",
      daemonSet: (cfg) => daemonSet(cfg, { desired: 3, updated: 1 }),
      reason: "RollingOut",
    },
  ])("is Reconciling while rolling out: $case → $reason", ({ daemonSet: ds, reason }) => {
    const cfg = config();
    const { status, events } = aggregateStatus(
      input(cfg, three({ n2: { pod: { hash: "previous" } }, n3: { pod: { hash: "previous" } } }), {
        daemonSet: ds(cfg),
      }),
    );
    expect(conditionSummary(status)).toEqual([
      `Ready=False/${reason}`,
      `Reconciling=True/${reason}`,
      "Stalled=False/NoErrors",
      "Degraded=False/NoProblems",
    ]);
    expect(status.nodes).toMatchObject({ desired: 3, updated: 1 });
    expect(events).toEqual([]);
  });

  it("lists at most 20 problem nodes, sorted by name, and counts the rest", () => {
    const cfg = config();
    const names = Array.from({ length: 25 }, (_, i) => `node-${String(i).padStart(2, "0")}`).reverse();
    const { status } = aggregateStatus(
      input(
        cfg,
        names.map((name) => ({ name, pod: "none" as const })),
      ),
    );
    expect(status.problems).toHaveLength(20);
    expect(status.problems?.map((p) => p.node)).toEqual(names.slice().reverse().slice(0, 20));
    expect(status.problemsOmitted).toBe(5);
    expect(condition(status, "Degraded")).toMatchObject({
      reason: "PluginNotReady",
      message: "25 of 25 nodes have problems: PluginNotReady 25",
    });
    expect(condition(status, "Ready").message).toBe(
      "0/25 nodes ready; not ready: node-00 (PluginNotReady), node-01 (PluginNotReady), node-02 (PluginNotReady), node-03 (PluginNotReady), node-04 (PluginNotReady), and 20 more",
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("names the most frequent problem as Degraded's reason, the more fundamental on a tie", () => {
    const cfg = config();
    const mostly = aggregateStatus(
      input(cfg, [
        { name: "a", report: { unhealthy: [0] } },
        { name: "b", report: { unhealthy: [1] } },
        { name: "c", pod: "none" },
      ]),
    ).status;
    expect(condition(mostly, "Degraded")).toMatchObject({
      reason: "UnhealthyDevices",
      message: "3 of 3 nodes have problems: UnhealthyDevices 2, PluginNotReady 1",
    });
    const tie = aggregateStatus(
      input(cfg, [
        { name: "a", report: { unhealthy: [0] } },
        { name: "b", allocatable: 0 },
      ]),
    ).status;
    expect(condition(tie, "Degraded").reason).toBe("NoCapacity");
  });

  it("bounds the device list of a node to 32 ids", () => {
    const cfg = config(16);
    const { status } = aggregateStatus(input(cfg, [{ name: "n1", report: { unhealthy: [0, 1, 2] } }]));
    expect(status.problems?.[0]?.devices).toHaveLength(32);
    expect(status.problems?.[0]?.devices?.[31]).toBe("foo-1::15");
    expect(status.problems?.[0]?.message).toBe(
      "48 of 64 devices unhealthy (first 32 listed): MarkedUnhealthy",
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("keeps lastTransitionTime for conditions whose status did not change", () => {
    const cfg = config();
    const first = aggregateStatus(input(cfg, three())).status;
    const again = aggregateStatus(input(cfg, three(), { previous: first, now: T1 }));
    expect(again.status).toEqual(first);
    expect(statusEqual(first, again.status)).toBe(true);
    expect(again.events).toEqual([]);

    const degraded = aggregateStatus(
      input(cfg, three({ n1: { report: { unhealthy: [2] } } }), { previous: first, now: T1 }),
    ).status;
    expect(statusEqual(first, degraded)).toBe(false);
    expect(condition(degraded, "Ready").lastTransitionTime).toBe("2025-03-01T10:00:00Z");
    expect(condition(degraded, "Degraded").lastTransitionTime).toBe("2025-03-01T10:05:00Z");
  });

  it("emits Events on transitions only: degraded with the device id, then recovered", () => {
    const cfg = config(2);
    const healthy = aggregateStatus(input(cfg, three())).status;
    const sick = aggregateStatus(
      input(cfg, three({ n3: { report: { unhealthy: [1] } } }), { previous: healthy, now: T1 }),
    );
    expect(sick.events).toEqual([
      {
        type: "Warning",
        reason: "Degraded",
        message: "UnhealthyDevices: 1 of 3 nodes have problems: UnhealthyDevices 1",
      },
      {
        type: "Warning",
        reason: "UnhealthyDevices",
        message: "node n3: 2 of 8 devices unhealthy: MarkedUnhealthy [foo-1::0, foo-1::1]",
      },
    ]);
    const stillSick = aggregateStatus(
      input(cfg, three({ n3: { report: { unhealthy: [1] } } }), { previous: sick.status, now: T1 }),
    );
    expect(stillSick.events).toEqual([]);
    const recovered = aggregateStatus(input(cfg, three(), { previous: sick.status, now: T1 }));
    expect(recovered.events).toEqual([
      { type: "Normal", reason: "Recovered", message: "no problems on 3 nodes" },
    ]);
    const notReady = aggregateStatus(
      input(cfg, three({ n1: { allocatable: 0 } }), { previous: healthy, now: T1 }),
    );
    expect(notReady.events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Warning/NotReady",
      "Warning/Degraded",
      "Warning/NoCapacity",
    ]);
  });

  it("reports a problem that outlives a rollout once the rollout is done", () => {
    const cfg = config();
    const setups = three({ n2: { report: { unhealthy: [0] } } });
    const rolling = aggregateStatus(
      input(cfg, setups, { daemonSet: daemonSet(cfg, { desired: 3, updated: 2 }) }),
    );
    expect(rolling.events).toEqual([]);
    const done = aggregateStatus(input(cfg, setups, { previous: rolling.status, now: T1 }));
    expect(done.events.map((e) => `${e.type}/${e.reason}`)).toEqual([
      "Normal/Ready",
      "Warning/Degraded",
      "Warning/UnhealthyDevices",
    ]);
  });

  it("gives the same status whatever order the caches list objects in", () => {
    const cfg = config(2);
    const base = input(
      cfg,
      three({ n1: { report: { unhealthy: [3] } }, n2: { pod: "none" }, n3: { capacity: 9 } }),
    );
    const shuffled = {
      ...base,
      nodes: [...base.nodes].reverse(),
      pods: [...base.pods].reverse(),
      reports: [...base.reports].reverse(),
    };
    const a = aggregateStatus(base);
    const b = aggregateStatus(shuffled);
    expect(b).toEqual(a);
    expect(JSON.stringify(b.status)).toBe(JSON.stringify(a.status));
  });

  it("writes statuses the CRD schema accepts and reads them back", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n1: { pod: "none" }, n2: { allocatable: 0 }, n3: { report: { unhealthy: [1] } } })),
    );
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
    expect(previousStatusOf({ status: JSON.parse(JSON.stringify(status)) })).toEqual(status);
    expect(previousStatusOf({ status: { bogus: true } })).toBeUndefined();
    expect(previousStatusOf({})).toBeUndefined();
  });
});

describe("statusEqual", () => {
  it.each<{
    case: string;
    a: DevicePluginConfigStatus | undefined;
    b: DevicePluginConfigStatus | undefined;
    want: boolean;
  }>([
    { case: "both absent", a: undefined, b: undefined, want: true },
    { case: "absent and empty", a: undefined, b: {}, want: true },
    {
      case: "key order",
      a: { observedGeneration: 1, problemsOmitted: 0 },
      b: { problemsOmitted: 0, observedGeneration: 1 },
      want: true,
    },
    {
      case: "undefined equals missing",
      a: { observedGeneration: 1, daemonSetName: undefined },
      b: { observedGeneration: 1 },
      want: true,
    },
    { case: "different value", a: { observedGeneration: 1 }, b: { observedGeneration: 2 }, want: false },
    {
      case: "array order matters",
      a: {
        problems: [
          { node: "a", reason: "NoCapacity" },
          { node: "b", reason: "NoCapacity" },
        ],
      },
      b: {
        problems: [
          { node: "b", reason: "NoCapacity" },
          { node: "a", reason: "NoCapacity" },
        ],
      },
      want: false,
    },
    { case: "empty list and missing list differ", a: { problems: [] }, b: {}, want: false },
  ])("$case → $want", ({ a, b, want }) => {
    expect(statusEqual(a, b)).toBe(want);
  });
});

describe("aggregateStatus in DRA mode: the ResourceSlices are the devices' truth", () => {
  const DRIVER = "foo.hardware-vendor.example";
  const truth = (published: Record<string, number>) => ({
    kind: "ResourceSlices" as const,
    driver: DRIVER,
    published: new Map(Object.entries(published)),
  });
  // The Node's capacity says nothing in DRA mode: the nodes here advertise none of the resource.
  const dra = (over: Partial<NodeSetup> = {}): NodeSetup[] =>
    ["n1", "n2", "n3"].map((name) => ({ name, capacity: undefined, allocatable: undefined, ...over }));

  it.each<{
    case: string;
    setups: NodeSetup[];
    published: Record<string, number>;
    want: { devices: string; ready: string; degraded: string; problems: string[] };
  }>([
    {
      case: "every node's slices publish its healthy devices",
      setups: dra(),
      published: { n1: 4, n2: 4, n3: 4 },
      want: { devices: "12/12", ready: "True/AllNodesReady", degraded: "False/NoProblems", problems: [] },
    },
    {
      case: "an unhealthy device is left out of the slice: counted in capacity, not allocatable",
      setups: [
        ...dra().slice(0, 2),
        { name: "n3", capacity: undefined, allocatable: undefined, report: { unhealthy: [1] } },
      ],
      published: { n1: 4, n2: 4, n3: 3 },
      want: {
        devices: "11/12",
        ready: "True/AllNodesReady",
        degraded: "True/UnhealthyDevices",
        problems: ["n3/UnhealthyDevices"],
      },
    },
    {
      case: "a node whose plugin published nothing yet",
      setups: dra(),
      published: { n1: 4, n2: 4 },
      want: {
        devices: "8/8",
        ready: "False/NodesNotReady",
        degraded: "True/NoCapacity",
        problems: ["n3/NoCapacity"],
      },
    },
    {
      case: "a stale pool count",
      setups: dra(),
      published: { n1: 4, n2: 4, n3: 2 },
      want: {
        devices: "10/10",
        ready: "False/NodesNotReady",
        degraded: "True/CapacityMismatch",
        problems: ["n3/CapacityMismatch"],
      },
    },
  ])("$case", ({ setups, published, want }) => {
    const { status } = aggregateStatus(input(config(), setups, { deviceTruth: truth(published) }));
    expect(status.devices?.summary).toBe(want.devices);
    expect(`${condition(status, "Ready").status}/${condition(status, "Ready").reason}`).toBe(want.ready);
    expect(`${condition(status, "Degraded").status}/${condition(status, "Degraded").reason}`).toBe(
      want.degraded,
    );
    expect((status.problems ?? []).map((p) => `${p.node}/${p.reason}`)).toEqual(want.problems);
  });

  it("a DeviceClass it does not own: Stalled DeviceClassConflict, named, with a Warning event", () => {
    const message = `DeviceClass ${DRIVER} exists and is not owned by this config; it is left alone`;
    const { status, events } = aggregateStatus(
      input(config(), dra(), { deviceTruth: truth({ n1: 4, n2: 4, n3: 4 }), deviceClassConflict: message }),
    );
    expect(conditionSummary(status)).toEqual([
      "Ready=False/DeviceClassConflict",
      "Reconciling=False/DeviceClassConflict",
      "Stalled=True/DeviceClassConflict",
      "Degraded=False/NoProblems",
    ]);
    expect(condition(status, "Stalled").message).toBe(message);
    expect(events).toContainEqual({ type: "Warning", reason: "DeviceClassConflict", message });
    // The devices are still counted: the plugins run, only the class is missing.
    expect(status.devices?.summary).toBe("12/12");
  });
});

describe("aggregateStatus: the rollout's problems count in Degraded", () => {
  const tooOld = {
    node: "n3",
    reason: "KubeletTooOld" as const,
    message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
  };

  it("a kubelet too old for the plugin: listed, Degraded with its reason, counted among the matched nodes", () => {
    const cfg = config();
    const setups = three({ n3: { pod: "none", report: "none" } });
    const { status, events } = aggregateStatus({ ...input(cfg, setups), upgradeProblems: [tooOld] });
    expect(status.nodes).toMatchObject({ desired: 2, ready: 2 });
    expect(status.problems).toEqual([tooOld]);
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/KubeletTooOld",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: KubeletTooOld 1");
    expect(events).toContainEqual({
      type: "Warning",
      reason: "Degraded",
      message: "KubeletTooOld: 1 of 3 nodes have problems: KubeletTooOld 1",
    });
  });

  it("a node whose upgrade failed is Degraded as UpgradeFailed", () => {
    const cfg = config();
    const failed = {
      node: "n1",
      reason: "UpgradeFailed" as const,
      message: "the kubelet did not advertise the new plugin",
    };
    const { status } = aggregateStatus({ ...input(cfg, three()), upgradeProblems: [failed] });
    expect(condition(status, "Degraded")).toMatchObject({
      status: "True",
      reason: "UpgradeFailed",
      message: "1 of 3 nodes have problems: UpgradeFailed 1",
    });
  });

  it("orders every problem reason for Degraded, the rollout's too", () => {
    expect([...DEGRADED_REASON_ORDER].sort()).toEqual([...PROBLEM_REASONS].sort());
  });
});

describe("aggregateStatus: version-dependent features say in the status why they are off", () => {
  /** The default config with `spec` merged over it. */
  function configWith(spec: Record<string, unknown>): DevicePluginConfig {
    return DevicePluginConfigSchema.parse({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: "example-foo", uid: "uid-1", generation: 2 },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo" } },
        nodeSelector: { "feature.example/foo": "true" },
        ...spec,
      },
    });
  }
  const versions = (v1: string, v2: string, v3: string): NodeSetup[] =>
    three({ n1: { kubeletVersion: v1 }, n2: { kubeletVersion: v2 }, n3: { kubeletVersion: v3 } });
  const modes = { n1: "Replace", n2: "Replace", n3: "Surge" } as const;

  it("SurgeUpgrades=False names how many nodes replace and why, and leaves Ready, Stalled and Degraded alone", () => {
    const cfg = configWith({ upgrade: { strategy: "Auto" } });
    const base = input(cfg, versions("v1.35.4", "v1.35.4", "v1.37.2"));
    const without = aggregateStatus(base).status;
    const { status, events } = aggregateStatus({ ...base, upgradeModes: modes });
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=False/NoProblems",
      "SurgeUpgrades=False/KubeletWithoutPerSocketEndpoints",
    ]);
    expect(condition(status, "SurgeUpgrades")).toEqual({
      type: "SurgeUpgrades",
      status: "False",
      reason: "KubeletWithoutPerSocketEndpoints",
      message:
        "2 of 3 nodes replace instead of surging: their kubelets (v1.35.4) are older than v1.37.0, which per-socket device-plugin endpoints need",
      lastTransitionTime: "2025-03-01T10:00:00Z",
      observedGeneration: 2,
    });
    // An informational condition: the rest of the status is what it is without it, and no Event.
    expect({ ...status, conditions: status.conditions?.slice(0, 4) }).toEqual(without);
    expect(events).toEqual([{ type: "Normal", reason: "Ready", message: "3/3 nodes ready" }]);
    expect(DevicePluginConfigStatusSchema.safeParse(status).success).toBe(true);
  });

  it("SurgeUpgrades turns True once the kubelets are upgraded, with a new transition time", () => {
    const cfg = configWith({});
    const before = aggregateStatus({
      ...input(cfg, versions("v1.35.4", "v1.35.4", "v1.37.2")),
      upgradeModes: modes,
    }).status;
    const { status } = aggregateStatus({
      ...input(cfg, versions("v1.37.2", "v1.37.2", "v1.37.2")),
      upgradeModes: { n1: "Surge", n2: "Surge", n3: "Surge" },
      previous: before,
      now: T1,
    });
    expect(condition(status, "SurgeUpgrades")).toMatchObject({
      status: "True",
      reason: "KubeletsSupportSurge",
      message: "3 of 3 nodes surge: their kubelets (v1.37.2) keep one device-plugin endpoint per socket",
      lastTransitionTime: "2025-03-01T10:05:00Z",
    });
    expect(condition(status, "Ready").lastTransitionTime).toBe("2025-03-01T10:00:00Z");
  });

  it("sets no SurgeUpgrades under Replace, nor without the rollout's modes, nor while the config yields", () => {
    const nodes = versions("v1.35.4", "v1.35.4", "v1.37.2");
    const types = (extra: Partial<AggregateStatusInput>, cfg = configWith({})) =>
      (aggregateStatus({ ...input(cfg, nodes), ...extra }).status.conditions ?? []).map((c) => c.type);
    const four = ["Ready", "Reconciling", "Stalled", "Degraded"];
    expect(types({ upgradeModes: modes }, configWith({ upgrade: { strategy: "Replace" } }))).toEqual(four);
    expect(types({})).toEqual(four);
    expect(types({ upgradeModes: modes, conflictWith: "older" })).toEqual(four);
    expect(types({ upgradeModes: modes }, configWith({ upgrade: { strategy: "Surge" } }))).toEqual([
      ...four,
      "SurgeUpgrades",
    ]);
  });

  it("counts only the targeted nodes: a kubelet too old for the plugin is a KubeletTooOld problem, and Degraded", () => {
    const cfg = configWith({});
    const { status, events } = aggregateStatus({
      ...input(cfg, [
        ...versions("v1.35.4", "v1.37.2", "v1.37.2").slice(0, 2),
        { name: "n3", kubeletVersion: "v1.28.9", pod: "none", report: "none" },
      ]),
      upgradeModes: { n1: "Replace", n2: "Surge" },
      upgradeProblems: [
        {
          node: "n3",
          reason: "KubeletTooOld",
          message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
        },
      ],
    });
    expect(status.nodes).toMatchObject({ desired: 2, ready: 2 });
    expect(status.problems).toEqual([
      {
        node: "n3",
        reason: "KubeletTooOld",
        message: "kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
      },
    ]);
    expect(conditionSummary(status)).toEqual([
      "Ready=True/AllNodesReady",
      "Reconciling=False/RolloutComplete",
      "Stalled=False/NoErrors",
      "Degraded=True/KubeletTooOld",
      "SurgeUpgrades=False/KubeletWithoutPerSocketEndpoints",
    ]);
    expect(condition(status, "Degraded").message).toBe("1 of 3 nodes have problems: KubeletTooOld 1");
    expect(condition(status, "SurgeUpgrades").message).toMatch(/^1 of 2 nodes replaces instead of surging/);
    expect(events).toContainEqual({
      type: "Warning",
      reason: "KubeletTooOld",
      message: "node n3: kubelet v1.28.9 is older than v1.29.0, which CDI device names need",
    });
  });

  describe("a config that publishes through DRA", () => {
    const DRIVER = "foo.hardware-vendor.example";
    const draConfig = configWith({ publish: "DRA" });
    const slices = (published: Record<string, number>) => ({
      deviceTruth: {
        kind: "ResourceSlices" as const,
        driver: DRIVER,
        published: new Map(Object.entries(published)),
      },
    });
    const draNodes = (v3 = "v1.37.2"): NodeSetup[] =>
      versions("v1.37.2", "v1.37.2", v3).map((s) => ({ ...s, capacity: undefined, allocatable: undefined }));
    const surging = { n1: "Surge", n2: "Surge", n3: "Surge" } as const;

    it("is Stalled when the API server does not serve resource.k8s.io/v1: nothing can be published anywhere", () => {
      const { status, events } = aggregateStatus({
        ...input(draConfig, draNodes()),
        ...slices({}),
        upgradeModes: surging,
        resourceApiServed: false,
      });
      expect(conditionSummary(status)).toEqual([
        "Ready=False/ResourceAPIUnavailable",
        "Reconciling=False/ResourceAPIUnavailable",
        "Stalled=True/ResourceAPIUnavailable",
        "Degraded=True/NoCapacity",
        "SurgeUpgrades=True/KubeletsSupportSurge",
        "DRAPublishing=False/ResourceAPIUnavailable",
      ]);
      const message =
        "the API server does not serve resource.k8s.io/v1, which ResourceSlices and DeviceClasses need: enable it (kube-apiserver --runtime-config=resource.k8s.io/v1=true; on by default from Kubernetes 1.34) or set spec.publish to DevicePlugin";
      expect(condition(status, "Stalled").message).toBe(message);
      expect(condition(status, "Ready").message).toBe(message);
      expect(condition(status, "DRAPublishing").message).toBe(message);
      expect(events).toContainEqual({ type: "Warning", reason: "ResourceAPIUnavailable", message });
    });

    it("says DRAPublishing=True where the API is served and every kubelet runs DRA plugins", () => {
      const { status } = aggregateStatus({
        ...input(draConfig, draNodes()),
        ...slices({ n1: 4, n2: 4, n3: 4 }),
        upgradeModes: surging,
        resourceApiServed: true,
      });
      expect(conditionSummary(status)).toEqual([
        "Ready=True/AllNodesReady",
        "Reconciling=False/RolloutComplete",
        "Stalled=False/NoErrors",
        "Degraded=False/NoProblems",
        "SurgeUpgrades=True/KubeletsSupportSurge",
        "DRAPublishing=True/ResourceAPIServed",
      ]);
      expect(condition(status, "DRAPublishing").message).toBe(
        "the API server serves resource.k8s.io/v1 and the kubelets of all 3 nodes run DRA plugins",
      );
    });

    it("says which kubelets are too old for a DRA plugin, beside their KubeletTooOld problems", () => {
      const setups = draNodes("v1.31.4").map((s) =>
        s.name === "n3" ? { ...s, pod: "none" as const, report: "none" as const } : s,
      );
      const { status } = aggregateStatus({
        ...input(draConfig, setups),
        ...slices({ n1: 4, n2: 4 }),
        upgradeModes: { n1: "Surge", n2: "Surge" },
        upgradeProblems: [
          { node: "n3", reason: "KubeletTooOld", message: "kubelet v1.31.4 is older than v1.32.0" },
        ],
        resourceApiServed: true,
      });
      expect(conditionSummary(status)).toEqual([
        "Ready=True/AllNodesReady",
        "Reconciling=False/RolloutComplete",
        "Stalled=False/NoErrors",
        "Degraded=True/KubeletTooOld",
        "SurgeUpgrades=True/KubeletsSupportSurge",
        "DRAPublishing=False/KubeletTooOld",
      ]);
      expect(condition(status, "DRAPublishing").message).toBe(
        "1 of 3 nodes runs no DRA plugin: its kubelet (v1.31.4) is older than v1.32.0, which DRA plugins (the kubelet's v1beta1.DRAPlugin service) need",
      );
    });

    it("sets no DRAPublishing on a config that publishes through the device plugin API", () => {
      const { status } = aggregateStatus({
        ...input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2")),
        resourceApiServed: false,
      });
      expect(conditionSummary(status)).toEqual([
        "Ready=True/AllNodesReady",
        "Reconciling=False/RolloutComplete",
        "Stalled=False/NoErrors",
        "Degraded=False/NoProblems",
      ]);
    });
  });

  describe("DRASharing: whether a time-sliced DRA config's devices are shared (informational)", () => {
    const draInput = (sharing: Record<string, unknown>) => ({
      ...input(
        configWith({ publish: "DRA", sharing }),
        versions("v1.37.2", "v1.37.2", "v1.37.2").map((s) => ({
          ...s,
          capacity: undefined,
          allocatable: undefined,
        })),
      ),
      deviceTruth: {
        kind: "ResourceSlices" as const,
        driver: "foo.hardware-vendor.example",
        published: new Map(Object.entries({ n1: 4, n2: 4, n3: 4 })),
        // Each published device is one device for `replicas` claims, as the reports count replicas.
        sharesPerDevice: typeof sharing.replicas === "number" ? sharing.replicas : 1,
      },
      resourceApiServed: true,
    });
    it.each([
      { kept: true, want: "DRASharing=True/SharedAllocations" },
      { kept: false, want: "DRASharing=False/SharedAllocationsUnsupported" },
      { kept: undefined, want: "DRASharing=Unknown/SharedAllocationsUnknown" },
    ])("kept $kept: $want, and Ready, Stalled and the events stay as they were", ({ kept, want }) => {
      const base = draInput({ strategy: "TimeSlicing", replicas: 4 });
      const without = aggregateStatus(draInput({ strategy: "None" }));
      const { status, events } = aggregateStatus({ ...base, sharedAllocationsKept: kept });
      expect(conditionSummary(status)).toEqual([...conditionSummary(without.status), want]);
      expect(events).toEqual(without.events);
      expect(condition(status, "Ready").status).toBe("True");
      expect(condition(status, "Stalled").status).toBe("False");
    });

    it("counts a time-sliced published device once per share, or the nodes read as mismatched", () => {
      const base = draInput({ strategy: "TimeSlicing", replicas: 4 });
      const unscaled = aggregateStatus({
        ...base,
        deviceTruth: { ...base.deviceTruth, sharesPerDevice: undefined },
        sharedAllocationsKept: true,
      });
      expect(condition(unscaled.status, "Degraded").reason).toBe("CapacityMismatch");
    });

    it("is not set on a config that does not time-slice, nor in DevicePlugin mode", () => {
      for (const config of [
        configWith({ publish: "DRA" }),
        configWith({ sharing: { strategy: "TimeSlicing", replicas: 4 } }),
      ]) {
        const { status } = aggregateStatus({
          ...input(config, versions("v1.37.2", "v1.37.2", "v1.37.2")),
          resourceApiServed: config.spec.publish === "DRA" ? true : undefined,
          sharedAllocationsKept: false,
        });
        expect(status.conditions?.map((c) => c.type)).not.toContain("DRASharing");
      }
    });
  });

  describe("ExtendedResourceMapping: whether the DeviceClass maps the resource name (informational)", () => {
    const DRIVER = "foo.hardware-vendor.example";
    const draTruth = {
      deviceTruth: {
        kind: "ResourceSlices" as const,
        driver: DRIVER,
        published: new Map(Object.entries({ n1: 4, n2: 4, n3: 4 })),
      },
    };
    const draNodes = versions("v1.37.2", "v1.37.2", "v1.37.2").map((s) => ({
      ...s,
      capacity: undefined,
      allocatable: undefined,
    }));
    const cases: {
      name: string;
      publish: "DevicePlugin" | "DRA";
      resourceApiServed: boolean;
      fieldKept: boolean | undefined;
      want: string;
      says: string;
    }[] = [
      {
        name: "DRA, the field kept (1.37): True, the class maps the name",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: true,
        want: "ExtendedResourceMapping=True/ExtendedResourceMapped",
        says: `the DeviceClass maps ${RESOURCE}`,
      },
      {
        name: "DRA, the field dropped (1.35 defaults): False, unsupported",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: false,
        want: "ExtendedResourceMapping=False/ExtendedResourceUnsupported",
        says: "feature gate DRAExtendedResource is off",
      },
      {
        name: "DRA, not probed yet: Unknown",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=Unknown/ExtendedResourceSupportUnknown",
        says: "not known yet",
      },
      {
        name: "DRA, resource.k8s.io/v1 not served: False (Stalled comes from DRAPublishing alone)",
        publish: "DRA",
        resourceApiServed: false,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=False/ResourceAPIUnavailable",
        says: "does not serve resource.k8s.io/v1",
      },
      {
        name: "DevicePlugin, the field kept: True, a switch to DRA would map the name",
        publish: "DevicePlugin",
        resourceApiServed: true,
        fieldKept: true,
        want: "ExtendedResourceMapping=True/ExtendedResourceMapped",
        says: `spec.publish is DevicePlugin, so the device plugin serves ${RESOURCE}`,
      },
      {
        name: "DevicePlugin, the field dropped: False, the device plugin keeps serving",
        publish: "DevicePlugin",
        resourceApiServed: true,
        fieldKept: false,
        want: "ExtendedResourceMapping=False/ExtendedResourceUnsupported",
        says: "the device plugin path keeps serving",
      },
      {
        name: "DevicePlugin, resource.k8s.io/v1 not served: False, and the config is not Stalled",
        publish: "DevicePlugin",
        resourceApiServed: false,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=False/ResourceAPIUnavailable",
        says: "the device plugin path keeps serving it",
      },
    ];
    it.each(cases)("$name", ({ publish, resourceApiServed, fieldKept, want, says }) => {
      const base =
        publish === "DRA"
          ? {
              ...input(configWith({ publish: "DRA" }), draNodes),
              ...draTruth,
              resourceApiServed,
            }
          : input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2"));
      const without = aggregateStatus(base);
      const { status, events } = aggregateStatus({
        ...base,
        extendedResource: { resourceApiServed, fieldKept },
      });
      // The condition is added last; every other condition and the events stay as they were without it.
      expect(conditionSummary(status)).toEqual([...conditionSummary(without.status), want]);
      expect(conditionSummary(without.status)).not.toContain(want);
      expect(events).toEqual(without.events);
      expect(condition(status, "ExtendedResourceMapping")).toMatchObject({ observedGeneration: 2 });
      expect(condition(status, "ExtendedResourceMapping").message).toContain(says);
      if (publish === "DevicePlugin") {
        expect(condition(status, "Ready").status).toBe("True");
        expect(condition(status, "Stalled").status).toBe("False");
      }
    });

    it("is not set while the config yields its resource name to another", () => {
      const { status } = aggregateStatus({
        ...input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2")),
        conflictWith: "other",
        extendedResource: { resourceApiServed: true, fieldKept: true },
      });
      expect(status.conditions?.map((c) => c.type)).not.toContain("ExtendedResourceMapping");
    });

    it("keeps its transition time while it stays, and takes a new one when it turns", () => {
      const base = input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2"));
      const first = aggregateStatus({
        ...base,
        extendedResource: { resourceApiServed: true, fieldKept: undefined },
      }).status;
      const later = new Date(T0.getTime() + 60_000);
      const same = aggregateStatus({
        ...base,
        previous: first,
        now: later,
        extendedResource: { resourceApiServed: true, fieldKept: undefined },
      }).status;
      const turned = aggregateStatus({
        ...base,
        previous: first,
        now: later,
        extendedResource: { resourceApiServed: true, fieldKept: true },
      }).status;
      const at = (st: DevicePluginConfigStatus) =>
        condition(st, "ExtendedResourceMapping").lastTransitionTime;
      expect(at(same)).toBe(at(first));
      expect(at(turned)).toBe(later.toISOString().replace(/\.\d{3}Z$/, "Z"));
    });
  });
});
