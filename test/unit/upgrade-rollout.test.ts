// decideRollout: what the operator writes to move a plugin upgrade, from the objects alone.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpecInput } from "../../src/api/v1beta1/spec.js";
import {
  pluginRevision,
  renderPluginDaemonSet,
  type NodePlacement,
} from "../../src/operator/render/index.js";
import {
  ANNOTATION_UPGRADE_STATE,
  parseUpgradeState,
  placementOfDaemonSet,
  type UpgradeState,
} from "../../src/operator/upgrade/daemonset-state.js";
import {
  decideRollout,
  type RolloutDecision,
  type RolloutInput,
} from "../../src/operator/upgrade/rollout.js";

const ctx = {
  namespace: "dpo-system",
  operatorImage: "dpo:test",
  pluginServiceAccount: "dpo-plugin",
  registrationMode: "kubelet" as const,
};
const NOW = Date.parse("2026-11-23T12:00:00Z");
const RESOURCE = "vendor.example/foo";

function config(spec: Partial<DevicePluginConfigSpecInput> = {}): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "foo", uid: "uid-foo", generation: 1 },
    spec: { resourceName: RESOURCE, backend: { type: "Mock", mock: { devices: 4 } }, ...spec },
  });
}

const OLD = config({ plugin: { logLevel: "info" } });
const NEW = config({ plugin: { logLevel: "debug" } });

function node(name: string, kubeletVersion = "v1.37.0", allocatable = 4): V1Node {
  return {
    metadata: { name },
    status: { allocatable: { [RESOURCE]: String(allocatable) }, nodeInfo: { kubeletVersion } as never },
  };
}

/** A DaemonSet as the API server returns it: uid, resourceVersion, creation time. */
function stored(
  c: DevicePluginConfig,
  placement: NodePlacement,
  state?: UpgradeState,
  created = "2026-11-01T00:00:00Z",
): V1DaemonSet {
  const ds = renderPluginDaemonSet(c, ctx, {
    placement,
    ...(state ? { annotations: { [ANNOTATION_UPGRADE_STATE]: JSON.stringify(state) } } : {}),
  });
  const revision = pluginRevision(c, ctx);
  ds.metadata = {
    ...ds.metadata,
    uid: `ds-${revision}`,
    resourceVersion: "7",
    creationTimestamp: new Date(created),
  };
  return ds;
}

function pod(ds: V1DaemonSet, nodeName: string, phase = "Running"): V1Pod {
  return {
    metadata: {
      name: `${ds.metadata?.name}-${nodeName}`,
      uid: `pod-${ds.metadata?.uid}-${nodeName}`,
      labels: ds.spec?.template.metadata?.labels,
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "DaemonSet", name: ds.metadata!.name!, uid: ds.metadata!.uid! },
      ],
    },
    spec: { nodeName, containers: [] },
    status: { phase },
  };
}

function report(c: DevicePluginConfig, p: V1Pod, registered = true): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `r-${p.metadata?.uid}` },
    spec: {
      configName: "foo",
      nodeName: p.spec!.nodeName!,
      resourceName: RESOURCE,
      revision: pluginRevision(c, ctx),
    },
    status: {
      pluginVersion: "test",
      kubeletAPIVersion: "v1beta1",
      registration: { state: registered ? "Registered" : "NotRegistered", since: "2026-11-23T11:00:00Z" },
      podUID: p.metadata!.uid!,
      advertised: 4,
      healthy: 4,
      devices: [],
      updateTime: "2026-11-23T11:00:00Z",
    },
  };
}

function decide(input: Partial<RolloutInput> & { config: DevicePluginConfig }): RolloutDecision {
  return decideRollout({ render: ctx, daemonSets: [], nodes: [], pods: [], reports: [], now: NOW, ...input });
}

function written(d: RolloutDecision): string[] {
  return d.writes.map((w) => {
    if (w.kind === "Delete") return `Delete ${w.revision}`;
    const p = placementOfDaemonSet(w.daemonSet);
    const where =
      "only" in p ? `only [${[...p.only].sort().join(",")}]` : `except [${[...p.except].sort().join(",")}]`;
    return `${w.kind} ${w.daemonSet.metadata?.labels?.["dpo.dev/revision"] ?? "legacy"} ${where}`;
  });
}

const oldRev = pluginRevision(OLD, ctx);
const newRev = pluginRevision(NEW, ctx);

describe("decideRollout", () => {
  it("creates the current revision on every node when nothing runs, leaving out kubelets too old", () => {
    const d = decide({ config: OLD, nodes: [node("a"), node("b", "v1.27.3")] });
    expect(written(d)).toEqual([`Create ${oldRev} except [b]`]);
    expect(d.problems).toEqual([expect.objectContaining({ node: "b", reason: "KubeletTooOld" })]);
    expect(d.status).toMatchObject({
      phase: "Complete",
      currentRevision: oldRev,
      updateRevision: oldRev,
      total: 1,
    });
  });

  it("writes nothing when the current revision already runs everywhere", () => {
    const ds = stored(OLD, { except: [] });
    const d = decide({ config: OLD, daemonSets: [ds], nodes: [node("a")], pods: [pod(ds, "a")] });
    expect(d.writes).toEqual([]);
    expect(d.status).toMatchObject({ phase: "Complete", updated: 1, total: 1, summary: "1/1" });
  });

  it("starts an upgrade with the new revision on no node, its state naming the base", () => {
    const ds = stored(OLD, { except: [] });
    const d = decide({ config: NEW, daemonSets: [ds], nodes: [node("a"), node("b")] });
    expect(written(d)).toEqual([`Create ${newRev} only []`]);
    const created = d.writes[0]!.kind === "Create" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(created, oldRev)).toEqual({ from: oldRev, rollingBack: false, nodes: {} });
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeStarted"]);
    expect(d.status).toMatchObject({ phase: "Progressing", summary: "0/2" });
  });

  it("surges one node at a time: the new revision joins it, records first, the old one stays", () => {
    const base = stored(OLD, { except: [] });
    const next = stored(
      NEW,
      { only: [] },
      { from: oldRev, rollingBack: false, nodes: {} },
      "2026-11-02T00:00:00Z",
    );
    const p = pod(base, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a"), node("b")],
      pods: [p, pod(base, "b")],
      reports: [report(OLD, p)],
    });
    expect(written(d)).toEqual([`Update ${newRev} only [a]`]);
    const update = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(update, oldRev).nodes).toEqual({ a: { startedAt: NOW, baseline: 4 } });
    // Replaced, not PUT from scratch: the write carries the resourceVersion it was planned from.
    expect(update?.metadata?.resourceVersion).toBe("7");
    expect(d.status).toMatchObject({ phase: "Progressing", inFlight: ["a"], updated: 0 });
  });

  it("takes the old revision off a surged node once the kubelet advertises the new one", () => {
    const state = { from: oldRev, rollingBack: false, nodes: { a: { startedAt: NOW - 5_000, baseline: 4 } } };
    const base = stored(OLD, { except: [] });
    const next = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual([`Update ${oldRev} except [a]`]);
  });

  it("replaces on a kubelet before per-socket endpoints: the old revision leaves first", () => {
    const base = stored(OLD, { except: [] });
    const next = stored(
      NEW,
      { only: [] },
      { from: oldRev, rollingBack: false, nodes: {} },
      "2026-11-02T00:00:00Z",
    );
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.34.1")],
      pods: [pod(base, "a")],
    });
    expect(written(d)).toEqual([`Update ${newRev} only []`, `Update ${oldRev} except [a]`]);
    expect(d.modes).toEqual({ a: "Replace" });
  });

  it("hands the status each targeted node's mode, in a steady state too, leaving out kubelets too old", () => {
    const d = decide({
      config: OLD,
      daemonSets: [stored(OLD, { except: [] })],
      nodes: [node("a", "v1.37.2"), node("b", "v1.35.4"), node("c", "v1.28.9")],
    });
    expect(d.modes).toEqual({ a: "Surge", b: "Replace" });
    expect(d.problems.map((p) => `${p.node}/${p.reason}`)).toEqual(["c/KubeletTooOld"]);
  });

  it("ends the upgrade: the old revision is deleted, then the new one runs every node", () => {
    const state = { from: oldRev, rollingBack: false, nodes: { a: { startedAt: NOW - 5_000, baseline: 4 } } };
    const base = stored(OLD, { except: ["a"] });
    const next = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a")],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual([`Delete ${oldRev}`, `Update ${newRev} except []`]);
    const promoted = d.writes[1]!.kind === "Update" ? d.writes[1]!.daemonSet : undefined;
    expect(promoted?.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE]).toBeUndefined();
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeComplete"]);
    // The status of the pass that promotes names the new revision as the current one.
    expect(d.status).toMatchObject({ phase: "Complete", currentRevision: newRev, updateRevision: newRev });
  });

  it("is not Complete while the old revision still places a pod on an upgraded node", () => {
    // The new plugin passed the gate on every node, but the old DaemonSet still places its pod there:
    // that write comes first, the status names the old revision as the current one, and it comes back.
    const state = { from: oldRev, rollingBack: false, nodes: { a: { startedAt: NOW - 5_000, baseline: 4 } } };
    const base = stored(OLD, { except: [] });
    const next = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a")],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).not.toContain(`Delete ${oldRev}`);
    expect(d.status).toMatchObject({
      phase: "Progressing",
      currentRevision: oldRev,
      updateRevision: newRev,
      total: 1,
    });
    expect(d.requeueAfterMs).toBeDefined();
  });

  it("fails a node past its deadline and rolls it back: the old revision returns beside the new one", () => {
    const state = {
      from: oldRev,
      rollingBack: false,
      nodes: { a: { startedAt: NOW - 301_000, baseline: 4 } },
    };
    const base = stored(OLD, { except: [] });
    const next = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod, false)],
    });
    const update = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(update, oldRev)).toMatchObject({
      rollingBack: true,
      nodes: { a: { failed: true } },
    });
    expect(d.status.phase).toBe("RollingBack");
    expect(d.problems).toEqual([expect.objectContaining({ node: "a", reason: "UpgradeFailed" })]);
    expect(d.events.map((e) => e.reason)).toEqual(["NodeUpgradeFailed"]);
  });

  it("returns the nodes of a revision the spec moved past to the base before anything else, then deletes it", () => {
    const third = config({ plugin: { logLevel: "warn" } });
    const state = { from: oldRev, rollingBack: false, nodes: { a: { startedAt: NOW - 5_000, baseline: 4 } } };
    const base = stored(OLD, { except: ["a"] });
    const abandoned = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const d = decide({
      config: third,
      daemonSets: [base, abandoned],
      nodes: [node("a")],
      pods: [pod(abandoned, "a")],
    });
    // The rollback is persisted on the abandoned revision first, then the node rejoins the base.
    expect(written(d)).toEqual([`Update ${newRev} only [a]`, `Update ${oldRev} except []`]);
    expect(d.status.phase).toBe("RollingBack");

    const back = stored(OLD, { except: [] });
    const oldPod = pod(back, "a");
    const emptied = stored(NEW, { only: [] }, { ...state, rollingBack: true }, "2026-11-02T00:00:00Z");
    const after = decide({
      config: third,
      daemonSets: [back, emptied],
      nodes: [node("a")],
      pods: [oldPod],
      reports: [report(OLD, oldPod)],
    });
    expect(written(after)).toEqual([`Delete ${newRev}`]);
  });

  it("adopts a DaemonSet from before revisions: OnDelete, so taking nodes off it restarts nothing", () => {
    const legacy: V1DaemonSet = {
      metadata: { name: "dpo-foo", uid: "legacy", resourceVersion: "3", labels: { "dpo.dev/config": "foo" } },
      spec: {
        selector: { matchLabels: { "dpo.dev/config": "foo" } },
        updateStrategy: { type: "RollingUpdate" },
        template: { spec: { containers: [] } },
      },
    };
    const next = stored(NEW, { only: [] }, { from: "", rollingBack: false, nodes: {} });
    const d = decide({ config: NEW, daemonSets: [legacy, next], nodes: [node("a", "v1.33.0")] });
    const base = d.writes.find((w) => w.kind === "Update" && w.daemonSet.metadata?.uid === "legacy");
    expect(base?.kind === "Update" && base.daemonSet.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(d.status.currentRevision).toBe("legacy");
  });

  it("never crashes on an unreadable state annotation: it starts from a fresh one", () => {
    const ds = stored(NEW, { only: [] });
    ds.metadata!.annotations = { [ANNOTATION_UPGRADE_STATE]: "{not json" };
    expect(parseUpgradeState(ds, oldRev)).toEqual({ from: oldRev, rollingBack: false, nodes: {} });
    ds.metadata!.annotations = {
      [ANNOTATION_UPGRADE_STATE]: JSON.stringify({ from: "other", nodes: { a: {} } }),
    };
    expect(parseUpgradeState(ds, oldRev).nodes).toEqual({});
  });
});

describe("decideRollout's gate", () => {
  it("holds at what the new plugin advertises when the spec itself advertises fewer devices", () => {
    // 6 devices before the node was touched; the new spec has 4, and the kubelet advertises those 4.
    const state = { from: oldRev, rollingBack: false, nodes: { a: { startedAt: NOW - 5_000, baseline: 6 } } };
    const base = stored(OLD, { except: [] });
    const next = stored(NEW, { only: ["a"] }, state, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4)],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual([`Update ${oldRev} except [a]`]);
    // Below what the plugin itself advertises, the gate still waits.
    const short = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 3)],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod)],
    });
    expect(short.writes).toEqual([]);
  });
});

describe("decideRollout's gate in DRA mode: the published ResourceSlices instead of allocatable", () => {
  const DRA_OLD = config({ publish: "DRA", plugin: { logLevel: "info" } });
  const DRA_NEW = config({ publish: "DRA", plugin: { logLevel: "debug" } });
  const draOld = pluginRevision(DRA_OLD, ctx);
  const draNew = pluginRevision(DRA_NEW, ctx);
  const base = stored(DRA_OLD, { except: [] });
  const surged = (nodes: UpgradeState["nodes"]) =>
    stored(
      DRA_NEW,
      { only: Object.keys(nodes) },
      { from: draOld, rollingBack: false, nodes },
      "2026-11-02T00:00:00Z",
    );
  /** A registered new plugin on `a`, with `unhealthy` of its 4 devices unhealthy. */
  const newReport = (p: V1Pod, unhealthy = 0): DeviceNodeState => {
    const r = report(DRA_NEW, p);
    r.status!.healthy = 4 - unhealthy;
    r.status!.devices = Array.from({ length: 4 }, (_, i) => ({
      id: `d${i}`,
      health: i < unhealthy ? ("Unhealthy" as const) : ("Healthy" as const),
      replicas: 1,
      since: "2026-11-23T11:00:00Z",
    }));
    return r;
  };

  it("records the baseline from the node's published devices, not from a Node that advertises none", () => {
    const next = surged({});
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 0), node("b", "v1.37.0", 0)],
      pods: [pod(base, "a"), pod(base, "b")],
      reports: [],
      publishedDevices: new Map([
        ["a", 4],
        ["b", 4],
      ]),
    });
    expect(written(d)).toEqual([`Update ${draNew} only [a]`]);
    const update = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(update, draOld).nodes).toEqual({ a: { startedAt: NOW, baseline: 4 } });
  });

  it.each<{
    case: string;
    published: number | undefined;
    allocatable: number;
    unhealthy: number;
    moves: boolean;
  }>([
    {
      case: "published back at the baseline: the node is upgraded",
      published: 4,
      allocatable: 0,
      unhealthy: 0,
      moves: true,
    },
    {
      case: "published below the baseline: it waits",
      published: 2,
      allocatable: 4,
      unhealthy: 0,
      moves: false,
    },
    {
      case: "no slice yet: it waits, whatever allocatable says",
      published: undefined,
      allocatable: 4,
      unhealthy: 0,
      moves: false,
    },
    {
      case: "below only by the unhealthy devices left out: upgraded",
      published: 3,
      allocatable: 0,
      unhealthy: 1,
      moves: true,
    },
    {
      case: "below by more than the unhealthy ones: it waits",
      published: 2,
      allocatable: 0,
      unhealthy: 1,
      moves: false,
    },
  ])("$case", ({ published, allocatable, unhealthy, moves }) => {
    const next = surged({ a: { startedAt: NOW - 5_000, baseline: 4 } });
    const newPod = pod(next, "a");
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", allocatable), node("b", "v1.37.0", 0)],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [newReport(newPod, unhealthy)],
      publishedDevices: new Map(
        published === undefined
          ? [["b", 4]]
          : [
              ["a", published],
              ["b", 4],
            ],
      ),
    });
    expect(written(d)).toEqual(moves ? [`Update ${draOld} except [a]`] : []);
  });
});
