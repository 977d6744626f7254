// decideRollout: what the operator writes to move a plugin upgrade, from the objects alone.
import type { V1DaemonSet, V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import {
  pluginRevision,
  renderPluginDaemonSet,
  renderRevision,
  type RenderContext,
} from "../../../../src/operator/render/index.js";
import { nodeKeys, type PlacementRole } from "../../../../src/operator/model/targeting.js";
import {
  ANNOTATION_UPGRADE_STATE,
  parseUpgradeState,
  roleOfDaemonSet,
  type LegacyNodeRecord,
  type UpgradeState,
} from "../../../../src/operator/upgrade/daemonset-state.js";
import { serializeNodeRecord, type NodeRecord } from "../../../../src/operator/upgrade/node-labels.js";
import {
  decideRollout,
  FENCE_SETTLE_MS,
  type RolloutDecision,
  type RolloutInput,
} from "../../../../src/operator/upgrade/rollout.js";
import { RecordClock } from "../../../../src/operator/upgrade/record-clock.js";
import type { StepDeps } from "../../../../src/operator/controllers/reconciler-deps.js";
import { forgetRolloutWrites } from "../../../../src/operator/controllers/steps/plugin-workloads.js";

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
/** NEW under an explicit Replace: the same revision (spec.upgrade is the operator's). */
const NEW_REPLACE = config({ plugin: { logLevel: "debug" }, upgrade: { strategy: "Replace" } });

const KEYS = nodeKeys("foo");

interface NodeOptions {
  kubeletVersion?: string;
  allocatable?: number;
  /** The revision and surge labels; absent by default (a node no upgrade touched). */
  revision?: string;
  surge?: string;
  record?: Omit<NodeRecord, "from" | "to"> & { from?: string; to?: string };
}

function node(name: string, kubeletVersion = "v1.37.0", allocatable = 4, options: NodeOptions = {}): V1Node {
  const labels: Record<string, string> = {};
  if (options.revision !== undefined) labels[KEYS.revision] = options.revision;
  if (options.surge !== undefined) labels[KEYS.surge] = options.surge;
  const annotations: Record<string, string> = {};
  if (options.record !== undefined) {
    annotations[KEYS.upgrade] = serializeNodeRecord({ from: oldRev, to: newRev, ...options.record });
  }
  return {
    metadata: { name, resourceVersion: `rv-${name}`, labels, annotations },
    status: { allocatable: { [RESOURCE]: String(allocatable) }, nodeInfo: { kubeletVersion } as never },
  };
}

/** A DaemonSet as the API server returns it: uid, resourceVersion, creation time. */
function stored(
  c: DevicePluginConfig,
  role: PlacementRole,
  state?: Partial<UpgradeState>,
  created = "2026-11-01T00:00:00Z",
): V1DaemonSet {
  const ds = renderPluginDaemonSet(c, ctx, {
    role,
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

/** A DaemonSet an older operator placed by node name: exactly `only`, or every node but `except`. */
function legacyStored(
  c: DevicePluginConfig,
  placement: { only: string[] } | { except: string[] },
  nodes?: Record<string, LegacyNodeRecord>,
  created = "2026-11-01T00:00:00Z",
): V1DaemonSet {
  const ds = stored(c, "only" in placement ? "moving" : "base", undefined, created);
  const terms =
    "only" in placement
      ? placement.only.length === 0
        ? [{ matchExpressions: [{ key: "dpo.dev/no-node-matches-this", operator: "Exists" }] }]
        : placement.only.map((n) => ({
            matchFields: [{ key: "metadata.name", operator: "In", values: [n] }],
          }))
      : [
          {
            matchFields: placement.except.map((n) => ({
              key: "metadata.name",
              operator: "NotIn",
              values: [n],
            })),
          },
        ];
  const spec = ds.spec!.template.spec!;
  if ("except" in placement && placement.except.length === 0) delete spec.affinity;
  else
    spec.affinity = {
      nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } },
    };
  if (nodes !== undefined) {
    ds.metadata!.annotations = {
      [ANNOTATION_UPGRADE_STATE]: JSON.stringify({ from: oldRev, rollingBack: false, nodes }),
    };
  }
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

/** The rollout's input as the reconcile step builds it: the config rendered once into its revision. */
function decide(
  input: Partial<Omit<RolloutInput, "desired">> & { config: DevicePluginConfig; render?: RenderContext },
): RolloutDecision {
  const { config, render = ctx, ...rest } = input;
  return decideRollout({
    desired: renderRevision(config, render),
    daemonSets: [],
    nodes: [],
    pods: [],
    reports: [],
    now: NOW,
    ...rest,
  });
}

/** Revisions by name in what the tests print. */
function revName(rev: string | null | undefined): string {
  if (rev === null || rev === undefined) return "-";
  return rev === oldRev ? "OLD" : rev === newRev ? "NEW" : rev === "" ? "legacy" : rev;
}

/**
 * The writes, one line each: `Create NEW moving`, `Update OLD base`, `Delete OLD`, and node patches
 * `Node a revision=NEW surge=-` naming only the labels they change, with `+record` when the patch writes
 * the node's upgrade record.
 */
function written(d: RolloutDecision): string[] {
  return d.writes.map((w) => {
    if (w.kind === "Delete") return `Delete ${revName(w.revision)}`;
    if (w.kind === "DeleteSlices") return `DeleteSlices ${w.node}`;
    if (w.kind === "PatchNode") {
      const labels = w.patch.body.metadata.labels ?? {};
      const parts = [`Node ${w.patch.node}`];
      if (KEYS.revision in labels) parts.push(`revision=${revName(labels[KEYS.revision])}`);
      if (KEYS.surge in labels) parts.push(`surge=${revName(labels[KEYS.surge])}`);
      if (w.patch.body.metadata.annotations?.[KEYS.upgrade] !== undefined) parts.push("+record");
      const taints = w.patch.body.spec?.taints;
      if (taints !== undefined) {
        parts.push((taints ?? []).some((t) => t.key === KEYS.replace) ? "+fence" : "-fence");
      }
      return parts.join(" ");
    }
    const rev = w.daemonSet.metadata?.labels?.["dpo.dev/revision"];
    return `${w.kind} ${revName(rev ?? "")} ${roleOfDaemonSet(w.daemonSet)}`;
  });
}

/** The record a node patch writes. */
function recordWritten(d: RolloutDecision, name: string): NodeRecord | undefined {
  for (const w of d.writes) {
    if (w.kind !== "PatchNode" || w.patch.node !== name) continue;
    const text = w.patch.body.metadata.annotations?.[KEYS.upgrade];
    if (typeof text === "string") return JSON.parse(text) as NodeRecord;
  }
  return undefined;
}

const oldRev = pluginRevision(OLD, ctx);
const newRev = pluginRevision(NEW, ctx);

const FRESH = { from: oldRev, rollingBack: false };

describe("decideRollout", () => {
  it("creates the current revision as the base, labelling kubelets too old to run no revision", () => {
    const d = decide({ config: OLD, nodes: [node("a"), node("b", "v1.27.3")] });
    expect(written(d)).toEqual(["Node b revision=none", "Create OLD base"]);
    expect(d.problems).toEqual([expect.objectContaining({ node: "b", reason: "KubeletTooOld" })]);
    expect(d.status).toMatchObject({
      phase: "Complete",
      currentRevision: oldRev,
      updateRevision: oldRev,
      total: 1,
    });
  });

  it("writes nothing when the current revision already runs everywhere", () => {
    const ds = stored(OLD, "base");
    const d = decide({ config: OLD, daemonSets: [ds], nodes: [node("a")], pods: [pod(ds, "a")] });
    expect(d.writes).toEqual([]);
    expect(d.status).toMatchObject({ phase: "Complete", updated: 1, total: 1, summary: "1/1" });
  });

  it("writes nothing for nodes an earlier upgrade left labelled with the base", () => {
    const ds = stored(OLD, "base");
    const d = decide({
      config: OLD,
      daemonSets: [ds],
      nodes: [node("a", "v1.37.0", 4, { revision: oldRev })],
    });
    expect(d.writes).toEqual([]);
  });

  it("starts an upgrade with the new revision on no node, its state naming the base", () => {
    const ds = stored(OLD, "base");
    const d = decide({ config: NEW, daemonSets: [ds], nodes: [node("a"), node("b")] });
    expect(written(d)).toEqual(["Create NEW moving"]);
    const created = d.writes[0]!.kind === "Create" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(created, oldRev)).toEqual({ ...FRESH, legacyNodes: {} });
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeStarted"]);
    expect(d.status).toMatchObject({ phase: "Progressing", summary: "0/2" });
  });

  it("gives both revisions' DaemonSets the current targeting mid-upgrade, so a new override takes its nodes from the old one too", () => {
    // An override of higher priority appeared while the upgrade runs: the render context now steps this
    // config back from its nodes. The base revision's DaemonSet was placed before; it must step back too.
    const steppedBack = { matchExpressions: [{ key: "pool", operator: "NotIn", values: ["big"] }] };
    const base = stored(OLD, "base");
    const moving = stored(NEW, "moving", FRESH);
    const d = decide({
      render: { ...ctx, targeting: { terms: [steppedBack] } },
      config: NEW,
      daemonSets: [base, moving],
      nodes: [node("a"), node("b")],
      pods: [],
      reports: [],
      now: NOW,
    });
    const updated = d.writes.flatMap((w) => (w.kind === "Update" ? [w.daemonSet] : []));
    expect(updated.map((ds) => revName(ds.metadata?.labels?.["dpo.dev/revision"])).sort()).toEqual([
      "NEW",
      "OLD",
    ]);
    for (const ds of updated) {
      const terms =
        ds.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
          ?.nodeSelectorTerms ?? [];
      expect(terms.length, revName(ds.metadata?.labels?.["dpo.dev/revision"])).toBeGreaterThan(0);
      for (const term of terms) expect(term.matchExpressions).toContainEqual(steppedBack.matchExpressions[0]);
    }
    // Once written, nothing more to do.
    const again = decide({
      render: { ...ctx, targeting: { terms: [steppedBack] } },
      config: NEW,
      daemonSets: updated,
      nodes: [node("a"), node("b")],
      pods: [],
      reports: [],
      now: NOW,
    });
    expect(again.writes.filter((w) => w.kind === "Update")).toEqual([]);
  });

  it("surges one node at a time: one patch adds the new revision and the node's record, the old one stays", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const p = pod(base, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a"), node("b")],
      pods: [p, pod(base, "b")],
      reports: [report(OLD, p)],
    });
    expect(written(d)).toEqual(["Node a surge=NEW +record"]);
    expect(recordWritten(d, "a")).toEqual({ from: oldRev, to: newRev, startedAt: NOW, baseline: 4 });
    // Planned from what the cache showed: the patch carries that resourceVersion, so a stale cache
    // gets a conflict instead of starting the node twice.
    const patch = d.writes[0]!.kind === "PatchNode" ? d.writes[0]!.patch : undefined;
    expect(patch?.body.metadata.resourceVersion).toBe("rv-a");
    expect(d.status).toMatchObject({ phase: "Progressing", inFlight: ["a"], updated: 0 });
  });

  it("takes the old revision off a surged node once the kubelet advertises the new one", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [
        node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } }),
        node("b"),
      ],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a revision=NEW surge=-"]);
  });

  it("replaces under strategy Replace: the old revision leaves first", () => {
    // spec.upgrade is no part of the revision: the same DaemonSets, an explicit Replace.
    const NEW = NEW_REPLACE;
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.34.1")],
      pods: [pod(base, "a")],
    });
    // Fenced first: the scheduler places no new pod there before the old plugin stops. The record
    // carries when the fence went on.
    expect(written(d)).toEqual(["Node a +record +fence"]);
    const fencePatch = d.writes[0]!.kind === "PatchNode" ? d.writes[0]!.patch : undefined;
    expect(JSON.parse(fencePatch?.body.metadata.annotations?.[KEYS.upgrade] ?? "{}")).toMatchObject({
      startedAt: NOW,
      fencedAt: NOW,
    });
    expect(d.modes).toEqual({ a: "Replace" });
    const fenced = (n: V1Node): V1Node => {
      n.spec = {
        taints: [
          { key: "other", effect: "NoExecute" },
          { key: KEYS.replace, effect: "NoSchedule" },
        ],
      };
      return n;
    };
    // The fence in the cache is not enough: the old plugin stays until it has been on FENCE_SETTLE_MS,
    // and the pass comes back when it has (issue 23: a scheduler further behind still bound pods there).
    const young = { startedAt: NOW - 1_000, fencedAt: NOW - (FENCE_SETTLE_MS - 500), baseline: 4 };
    const settling = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { record: young }))],
      pods: [pod(base, "a")],
    });
    expect(written(settling)).toEqual([]);
    expect(settling.requeueAfterMs).toBe(500);
    // The operator's --fence-settle sets the wait: shorter, the same fence has settled; 0, none.
    for (const fenceSettleMs of [FENCE_SETTLE_MS - 1_000, 0]) {
      const settled = decide({
        config: NEW,
        daemonSets: [base, next],
        nodes: [fenced(node("a", "v1.34.1", 4, { record: young }))],
        pods: [pod(base, "a")],
        fenceSettleMs,
      });
      expect(written(settled), `fenceSettleMs ${fenceSettleMs}`).toEqual(["Node a revision=none"]);
    }
    const record = { startedAt: NOW - FENCE_SETTLE_MS, fencedAt: NOW - FENCE_SETTLE_MS, baseline: 4 };
    const oldGoes = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { record }))],
      pods: [pod(base, "a")],
    });
    expect(written(oldGoes)).toEqual(["Node a revision=none"]);
    // Once the old pod is gone, the new revision comes.
    const after = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 0, { revision: "none", record }))],
      pods: [],
    });
    expect(written(after)).toEqual(["Node a revision=NEW"]);
    // Once the Node advertises the new plugin's devices, the fence comes off; other taints stay.
    const newPod = pod(next, "a");
    const back = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", "v1.34.1", 4, { revision: newRev, record }))],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(back)).toEqual(["Node a -fence"]);
    const patch = back.writes[0]!.kind === "PatchNode" ? back.writes[0]!.patch : undefined;
    expect(patch?.body.spec?.taints).toEqual([{ key: "other", effect: "NoExecute" }]);
  });

  it("replaces under Auto on a kubelet before per-socket endpoints with the new plugin standing by", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const oldPod = pod(base, "a");
    const v = "v1.35.4";
    // Fenced, and the new revision joins in the same patch: its plugin starts while the fence settles,
    // and the record tells it to stand by.
    const d = decide({ config: NEW, daemonSets: [base, next], nodes: [node("a", v)], pods: [oldPod] });
    expect(written(d)).toEqual(["Node a surge=NEW +record +fence"]);
    expect(recordWritten(d, "a")).toMatchObject({ startedAt: NOW, fencedAt: NOW, standby: true });
    expect(d.modes).toEqual({ a: "Replace" });
    const fenced = (n: V1Node): V1Node => {
      n.spec = { taints: [{ key: KEYS.replace, effect: "NoSchedule" }] };
      return n;
    };
    const settled = {
      startedAt: NOW - FENCE_SETTLE_MS,
      fencedAt: NOW - FENCE_SETTLE_MS,
      baseline: 4,
      standby: true,
    };
    const both = (record: object) => fenced(node("a", v, 4, { surge: newRev, record }));
    const newPod = pod(next, "a");
    // The fence has settled but the new plugin has not reported yet: the old one stays.
    const starting = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
    });
    expect(written(starting)).toEqual([]);
    const standingBy = {
      ...report(NEW, newPod, false),
      status: {
        ...report(NEW, newPod).status!,
        registration: { state: "StandingBy" as const, since: "2026-11-23T11:00:00Z" },
      },
    };
    // Standing by, the fence not settled yet: the old one stays, and the pass comes back when it has.
    const young = { ...settled, fencedAt: NOW - (FENCE_SETTLE_MS - 700) };
    const waiting = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(young)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(waiting)).toEqual([]);
    expect(waiting.requeueAfterMs).toBe(700);
    // Standing by and settled: the old revision leaves.
    const go = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(go)).toEqual(["Node a revision=NEW surge=-"]);
    // A standby report of a pod that is gone says nothing.
    const gonePod = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod],
      reports: [report(OLD, oldPod), standingBy],
    });
    expect(written(gonePod)).toEqual([]);
    // A new plugin that registered anyway (an image from before standby) also lets the old one go.
    const registered = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [both(settled)],
      pods: [oldPod, newPod],
      reports: [report(OLD, oldPod), report(NEW, newPod)],
    });
    expect(written(registered)).toEqual(["Node a revision=NEW surge=-"]);
    // Once the old pod is gone and the new plugin's devices are in the Node: the fence comes off.
    const back = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [fenced(node("a", v, 4, { revision: newRev, record: settled }))],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(back)).toEqual(["Node a -fence"]);
  });

  it("hands the status each targeted node's mode, in a steady state too, leaving out kubelets too old", () => {
    const d = decide({
      config: OLD,
      daemonSets: [stored(OLD, "base")],
      nodes: [node("a", "v1.37.2"), node("b", "v1.35.4"), node("c", "v1.28.9")],
    });
    expect(d.modes).toEqual({ a: "Surge", b: "Replace" });
    expect(d.problems.map((p) => `${p.node}/${p.reason}`)).toEqual(["c/KubeletTooOld"]);
  });

  it("ends the upgrade: the old revision is deleted, then the new one becomes the base; no node is written", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } })],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Delete OLD", "Update NEW base"]);
    const promoted = d.writes[1]!.kind === "Update" ? d.writes[1]!.daemonSet : undefined;
    expect(promoted?.metadata?.annotations?.[ANNOTATION_UPGRADE_STATE]).toBeUndefined();
    expect(d.events.map((e) => e.reason)).toEqual(["UpgradeComplete"]);
    // The status of the pass that promotes names the new revision as the current one.
    expect(d.status).toMatchObject({ phase: "Complete", currentRevision: newRev, updateRevision: newRev });
  });

  it("is not Complete while the old revision's pod is still on an upgraded node", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: { startedAt: NOW - 5_000, baseline: 4 } })],
      pods: [newPod, pod(base, "a", "Running")],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual([]);
    expect(d.status).toMatchObject({
      phase: "Progressing",
      currentRevision: oldRev,
      updateRevision: newRev,
      total: 1,
    });
    expect(d.requeueAfterMs).toBeDefined();
  });

  it("fails a node past its deadline and rolls it back: the old revision returns beside the new one", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [
        node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW - 301_000, baseline: 4 } }),
        node("b"),
      ],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [report(NEW, newPod, false)],
    });
    // The failure lands on the node first; the rollback's phase on the moving revision after.
    expect(written(d)).toEqual(["Node a +record", "Update NEW moving"]);
    expect(recordWritten(d, "a")).toMatchObject({ failed: true });
    // The failure lands before anything sent with it: its patch is ordered.
    expect(d.writes[0]).toMatchObject({ kind: "PatchNode", ordered: true });
    const update = d.writes[1]!.kind === "Update" ? d.writes[1]!.daemonSet : undefined;
    expect(parseUpgradeState(update, oldRev)).toMatchObject({ rollingBack: true });
    expect(d.status.phase).toBe("RollingBack");
    expect(d.problems).toEqual([expect.objectContaining({ node: "a", reason: "UpgradeFailed" })]);
    expect(d.events.map((e) => e.reason)).toEqual(["NodeUpgradeFailed"]);
  });

  it("rolls back an upgraded node beside the new revision, then takes the new one off", () => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", { ...FRESH, rollingBack: true }, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const done = { startedAt: NOW - 5_000, baseline: 4 };
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record: done })],
      pods: [newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a surge=OLD"]);
    const oldPod = pod(base, "a");
    const after = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, surge: oldRev, record: done })],
      pods: [newPod, oldPod],
      reports: [report(NEW, newPod), report(OLD, oldPod)],
    });
    expect(written(after)).toEqual(["Node a revision=OLD surge=-"]);
  });

  it("returns the nodes of a revision the spec moved past to the base before anything else, then deletes it", () => {
    const third = config({ plugin: { logLevel: "warn" } });
    const base = stored(OLD, "base");
    const abandoned = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const record = { startedAt: NOW - 5_000, baseline: 4 };
    const d = decide({
      config: third,
      daemonSets: [base, abandoned],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev, record })],
      pods: [pod(abandoned, "a")],
    });
    expect(written(d)).toEqual(["Node a surge=OLD", "Update NEW moving"]);
    expect(d.status.phase).toBe("RollingBack");

    const oldPod = pod(base, "a");
    const after = decide({
      config: third,
      daemonSets: [base, stored(NEW, "moving", { ...FRESH, rollingBack: true }, "2026-11-02T00:00:00Z")],
      nodes: [node("a", "v1.37.0", 4, { revision: oldRev, record })],
      pods: [oldPod],
      reports: [report(OLD, oldPod)],
    });
    expect(written(after)).toEqual(["Delete NEW"]);
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
    const next = stored(NEW, "moving", { from: "", rollingBack: false });
    const d = decide({ config: NEW, daemonSets: [legacy, next], nodes: [node("a", "v1.33.0")] });
    const base = d.writes.find((w) => w.kind === "Update" && w.daemonSet.metadata?.uid === "legacy");
    expect(base?.kind === "Update" && base.daemonSet.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(d.status.currentRevision).toBe("legacy");
  });

  it("never crashes on an unreadable state annotation or node record: it starts from fresh ones", () => {
    const ds = stored(NEW, "moving");
    ds.metadata!.annotations = { [ANNOTATION_UPGRADE_STATE]: "{not json" };
    expect(parseUpgradeState(ds, oldRev)).toEqual({ ...FRESH, legacyNodes: {} });
    ds.metadata!.annotations = {
      [ANNOTATION_UPGRADE_STATE]: JSON.stringify({ from: "other", nodes: { a: {} } }),
    };
    expect(parseUpgradeState(ds, oldRev).legacyNodes).toEqual({});
    const base = stored(OLD, "base");
    const broken = node("a", "v1.37.0", 4, { surge: newRev });
    broken.metadata!.annotations = { [KEYS.upgrade]: "{not json" };
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const d = decide({ config: NEW, daemonSets: [base, next], nodes: [broken] });
    // Moved without a readable record: the deadline runs from now; no baseline while both run.
    expect(recordWritten(d, "a")).toEqual({ from: oldRev, to: newRev, startedAt: NOW });
  });
});

describe("decideRollout under DaemonSets an older operator placed by node name", () => {
  it("labels every node as the node lists place it, carries the records over, then rewrites both DaemonSets", () => {
    const base = legacyStored(OLD, { except: ["b", "c"] });
    const next = legacyStored(
      NEW,
      { only: ["a", "b"] },
      {
        a: { startedAt: NOW - 1_000, baseline: 4 },
        b: { startedAt: NOW - 2_000, baseline: 4 },
        c: { startedAt: NOW - 3_000, baseline: 4 },
      },
      "2026-11-02T00:00:00Z",
    );
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      // a surges (both), b is on the new one only, c is a Replace in its gap (neither, its old pod still
      // stopping), d is untouched.
      nodes: [node("a"), node("b"), node("c", "v1.34.1"), node("d")],
      pods: [pod(base, "a"), pod(next, "a"), pod(next, "b"), pod(base, "c"), pod(base, "d")],
    });
    const lines = written(d);
    expect(lines).toEqual([
      "Node a surge=NEW +record",
      "Node b revision=NEW +record",
      "Node c revision=none +record",
      "Update NEW moving",
      "Update OLD base",
    ]);
    expect(recordWritten(d, "b")).toEqual({ from: oldRev, to: newRev, startedAt: NOW - 2_000, baseline: 4 });
    // What the state annotation says from now on is the phase alone.
    const moving = d.writes[3]!.kind === "Update" ? d.writes[3]!.daemonSet : undefined;
    expect(JSON.parse(moving!.metadata!.annotations![ANNOTATION_UPGRADE_STATE]!)).toEqual(FRESH);
  });
});

describe("decideRollout puts back what a hand edit changed on the DaemonSet it renders", () => {
  type Edit = { field: string; edit: (ds: V1DaemonSet) => void };
  const edits: Edit[] = [
    { field: "image", edit: (ds) => (ds.spec!.template.spec!.containers[0]!.image = "evil:latest") },
    { field: "args", edit: (ds) => (ds.spec!.template.spec!.containers[0]!.args = ["--log-level=trace"]) },
    {
      field: "securityContext",
      edit: (ds) => (ds.spec!.template.spec!.containers[0]!.securityContext = { privileged: true }),
    },
    {
      field: "volumes",
      edit: (ds) => ds.spec!.template.spec!.volumes!.push({ name: "extra", hostPath: { path: "/" } }),
    },
    {
      field: "tolerations",
      edit: (ds) => (ds.spec!.template.spec!.tolerations = [{ operator: "Exists" }]),
    },
    { field: "placement", edit: (ds) => delete ds.spec!.template.spec!.affinity },
    { field: "updateStrategy", edit: (ds) => (ds.spec!.updateStrategy = { type: "RollingUpdate" }) },
    { field: "labels", edit: (ds) => (ds.metadata!.labels!["dpo.dev/config"] = "other") },
  ];

  it.each(edits)("steady: an edited $field is put back in one write", ({ edit }) => {
    const ds = stored(OLD, "base");
    const rendered = structuredClone(ds);
    edit(ds);
    const d = decide({ config: OLD, daemonSets: [ds], nodes: [node("a")] });
    expect(written(d)).toEqual(["Update OLD base"]);
    const put = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(put?.spec).toEqual(rendered.spec);
    expect(put?.metadata?.labels).toEqual(rendered.metadata?.labels);
    expect(put?.metadata?.resourceVersion).toBe("7");
  });

  it.each(edits)("during an upgrade: an edited $field of the moving revision is put back", ({ edit }) => {
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const rendered = structuredClone(next);
    edit(next);
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW - 1_000, baseline: 4 } })],
      pods: [pod(base, "a")],
    });
    expect(written(d)).toEqual(["Update NEW moving"]);
    const put = d.writes[0]!.kind === "Update" ? d.writes[0]!.daemonSet : undefined;
    expect(put?.spec).toEqual(rendered.spec);
  });

  it("keeps annotations and fields others added", () => {
    const ds = stored(OLD, "base");
    ds.metadata!.annotations = { "example.com/owner": "team-a" };
    ds.spec!.template.spec!.containers[0]!.terminationMessagePath = "/dev/termination-log";
    const d = decide({ config: OLD, daemonSets: [ds], nodes: [node("a")] });
    expect(d.writes).toEqual([]);
  });
});

describe("decideRollout's gate", () => {
  it("holds at what the new plugin advertises when the spec itself advertises fewer devices", () => {
    // 6 devices before the node was touched; the new spec has 4, and the kubelet advertises those 4.
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const surging = (allocatable: number) =>
      node("a", "v1.37.0", allocatable, { surge: newRev, record: { startedAt: NOW - 5_000, baseline: 6 } });
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [surging(4)],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a revision=NEW surge=-"]);
    // Below what the plugin itself advertises, the gate still waits.
    const short = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [surging(3)],
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
  const base = stored(DRA_OLD, "base");
  const next = stored(DRA_NEW, "moving", { from: draOld, rollingBack: false }, "2026-11-02T00:00:00Z");
  const draNode = (name: string, allocatable: number, surging: boolean): V1Node => {
    const n = node(name, "v1.37.0", allocatable, surging ? { surge: draNew } : {});
    if (surging) {
      n.metadata!.annotations = {
        [KEYS.upgrade]: serializeNodeRecord({
          from: draOld,
          to: draNew,
          startedAt: NOW - 5_000,
          baseline: 4,
        }),
      };
    }
    return n;
  };
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
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [draNode("a", 0, false), draNode("b", 0, false)],
      pods: [pod(base, "a"), pod(base, "b")],
      reports: [],
      publishedDevices: new Map([
        ["a", 4],
        ["b", 4],
      ]),
    });
    expect(written(d)).toEqual([`Node a surge=${draNew} +record`]);
    expect(recordWritten(d, "a")).toEqual({ from: draOld, to: draNew, startedAt: NOW, baseline: 4 });
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
    const newPod = pod(next, "a");
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [draNode("a", allocatable, true), draNode("b", 0, false)],
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
    expect(written(d)).toEqual(moves ? [`Node a revision=${draNew} surge=-`] : []);
  });
});

describe("decideRollout: a publish switch (DevicePlugin and DRA)", () => {
  const DP = config({ upgrade: { strategy: "Surge", maxUnavailable: 1 } });
  const DRA = config({
    publish: "DRA",
    dra: { driverName: "foo.example.com" },
    upgrade: { strategy: "Surge", maxUnavailable: 1 },
  });
  const dpRev = pluginRevision(DP, ctx);
  const draRev = pluginRevision(DRA, ctx);
  const mapped = {
    switchToDraMayStart: true,
    status: "True",
    reason: "ExtendedResourceMapped",
    message: "mapped",
  };
  const unsupported = {
    switchToDraMayStart: false,
    status: "False",
    reason: "ExtendedResourceUnsupported",
    message: "the API server drops DeviceClass spec.extendedResourceName",
  };
  const fenced = (n: V1Node): V1Node => ({
    ...n,
    spec: { taints: [{ key: KEYS.replace, value: draRev, effect: "NoSchedule" }] },
  });
  const labelled = (n: V1Node, revision: string, from: string, to: string, baseline = 4): V1Node => ({
    ...n,
    metadata: {
      ...n.metadata,
      labels: { [KEYS.revision]: revision },
      annotations: {
        [KEYS.upgrade]: serializeNodeRecord({ from, to, startedAt: NOW - 1000, baseline }),
      },
    },
  });
  const patchOf = (d: RolloutDecision, name: string) =>
    d.writes.find((w) => w.kind === "PatchNode" && w.patch.node === name);

  it("starts with an event that says it is a switch, whatever the strategy", () => {
    const d = decide({
      config: DRA,
      daemonSets: [stored(DP, "base")],
      nodes: [node("a"), node("b")],
      mapping: mapped,
    });
    expect(d.writes.map((w) => w.kind)).toEqual(["Create"]);
    expect(d.events[0]?.message).toMatch(
      /^switching spec.publish from DevicePlugin to DRA .* node by node, each node replaced whatever the strategy/,
    );
  });

  it("replaces every node under Surge (fence first), one at a time, and says which node is where", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const d = decide({
      config: DRA,
      daemonSets: [base, moving],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), pod(base, "b")],
      sliceDevices: new Map(),
      mapping: mapped,
    });
    expect(d.modes).toEqual({ a: "Replace", b: "Replace" });
    expect(d.problems).toEqual([]);
    const a = patchOf(d, "a");
    expect(a?.kind === "PatchNode" && a.patch.body.spec?.taints?.[0]?.key).toBe(KEYS.replace);
    expect(patchOf(d, "b")).toBeUndefined();
    expect(d.status.message).toMatch(/switching spec.publish from DevicePlugin to DRA .*in flight.*: a$/);
  });

  it("waits while ExtendedResourceMapping does not allow the switch, and the device plugin keeps its nodes", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const d = decide({
      config: DRA,
      daemonSets: [base, moving],
      nodes: [node("a"), node("b")],
      pods: [pod(base, "a"), pod(base, "b")],
      sliceDevices: new Map(),
      mapping: unsupported,
    });
    expect(d.writes.filter((w) => w.kind === "PatchNode")).toEqual([]);
    expect(d.status.phase).toBe("Progressing");
    expect(d.status.message).toContain(
      "the switch to DRA waits for ExtendedResourceMapping (now False, ExtendedResourceUnsupported",
    );
  });

  it("assigns DRA to a node only once its device plugin pod is gone and its allocatable is 0", () => {
    const base = stored(DP, "base");
    const moving = stored(DRA, "moving", { from: dpRev, rollingBack: false });
    const stopped = fenced(labelled(node("a", "v1.37.0", 4), "none", dpRev, draRev));
    const cases: { name: string; n: V1Node; pods: V1Pod[]; assigned: boolean }[] = [
      { name: "pod still there", n: stopped, pods: [pod(base, "a")], assigned: false },
      { name: "pod gone, allocatable 4", n: stopped, pods: [], assigned: false },
      {
        name: "pod gone, allocatable 0",
        n: fenced(labelled(node("a", "v1.37.0", 0), "none", dpRev, draRev)),
        pods: [],
        assigned: true,
      },
    ];
    for (const c of cases) {
      const d = decide({
        config: DRA,
        daemonSets: [base, moving],
        nodes: [c.n],
        pods: c.pods,
        sliceDevices: new Map(),
        mapping: mapped,
      });
      const p = patchOf(d, "a");
      const revision = p?.kind === "PatchNode" ? p.patch.body.metadata.labels?.[KEYS.revision] : undefined;
      expect(revision, c.name).toBe(c.assigned ? draRev : undefined);
      expect(
        d.events.some((e) => e.reason === "SwitchNodeStarting"),
        c.name,
      ).toBe(c.assigned);
    }
  });

  it("back to the device plugin: deletes the node's slices once its DRA pod is gone, then assigns the device plugin", () => {
    const base = stored(DRA, "base");
    const moving = stored(DP, "moving", { from: draRev, rollingBack: false });
    const n = fenced(labelled(node("a", "v1.37.0", 0), "none", draRev, dpRev));
    const withPod = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      pods: [pod(base, "a")],
      sliceDevices: new Map([["a", 4]]),
    });
    expect(withPod.writes.filter((w) => w.kind === "DeleteSlices" || w.kind === "PatchNode")).toEqual([]);
    const podGone = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      sliceDevices: new Map([["a", 4]]),
    });
    expect(podGone.writes.filter((w) => w.kind === "DeleteSlices")).toEqual([
      { kind: "DeleteSlices", node: "a" },
    ]);
    expect(patchOf(podGone, "a")).toBeUndefined();
    const slicesGone = decide({
      config: DP,
      daemonSets: [base, moving],
      nodes: [n],
      sliceDevices: new Map(),
    });
    const p = patchOf(slicesGone, "a");
    expect(p?.kind === "PatchNode" && p.patch.body.metadata.labels?.[KEYS.revision]).toBe(dpRev);
  });
});

describe("decideRollout judges a record's age on the operator's monotonic clock", () => {
  const HOUR_MS = 3_600_000;
  const DEADLINE_MS = 300_000;
  /** A monotonic clock the test moves; the wall clock is each pass's `now`, stepped at will. */
  const monotonic = (): { ms: number; clock: RecordClock } => {
    const m = { ms: 1_000_000, clock: undefined as unknown as RecordClock };
    m.clock = new RecordClock(() => m.ms);
    return m;
  };
  const base = stored(OLD, "base");
  const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
  const newPod = pod(next, "a");
  /** One pass over node a, surged at NOW by the wall clock that wrote its record, its new plugin not up. */
  const surgedPass = (clock: RecordClock, wallNow: number): RolloutDecision =>
    decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [node("a", "v1.37.0", 4, { surge: newRev, record: { startedAt: NOW, baseline: 4 } })],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod, false)],
      now: wallNow,
      recordTimes: clock.forPass("foo"),
    });
  const failed = (d: RolloutDecision): boolean => recordWritten(d, "a")?.failed === true;

  it("rolls nothing back when the wall clock steps forward, and fails the node when the deadline has passed", () => {
    const m = monotonic();
    expect(failed(surgedPass(m.clock, NOW))).toBe(false);
    m.ms += 10_000;
    const stepForward = surgedPass(m.clock, NOW + 24 * HOUR_MS);
    expect({ failed: failed(stepForward), phase: stepForward.status.phase }).toEqual({
      failed: false,
      phase: "Progressing",
    });
    // The wall clock steps back past the start: the deadline still runs out when it has.
    m.ms += DEADLINE_MS;
    const stepBack = surgedPass(m.clock, NOW - HOUR_MS);
    expect({ failed: failed(stepBack), phase: stepBack.status.phase }).toEqual({
      failed: true,
      phase: "RollingBack",
    });
  });

  it("gives a new leader, whose wall clock runs ahead, the whole deadline from when it first reads the record", () => {
    const newLeader = monotonic();
    newLeader.ms = 42;
    // The new leader's wall clock is ten minutes ahead of the one that wrote startedAt.
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000))).toBe(false);
    newLeader.ms += DEADLINE_MS - 1;
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000 + DEADLINE_MS))).toBe(false);
    newLeader.ms += 2;
    expect(failed(surgedPass(newLeader.clock, NOW + 10 * 60_000 + DEADLINE_MS))).toBe(true);
  });

  it("lets a Replace fence settle for its whole time whatever the wall clock does", () => {
    const m = monotonic();
    const fencedNode = (): V1Node => {
      const n = node("a", "v1.34.1", 4, { record: { startedAt: NOW, fencedAt: NOW, baseline: 4 } });
      n.spec = { taints: [{ key: KEYS.replace, effect: "NoSchedule" }] };
      return n;
    };
    const pass = (wallNow: number): RolloutDecision =>
      decide({
        config: NEW_REPLACE,
        daemonSets: [base, next],
        nodes: [fencedNode()],
        pods: [pod(base, "a")],
        now: wallNow,
        recordTimes: m.clock.forPass("foo"),
      });
    // The wall clock jumps an hour ahead right after the fence went on: the old plugin stays.
    const jumped = pass(NOW + HOUR_MS);
    expect(written(jumped)).toEqual([]);
    expect(jumped.requeueAfterMs).toBeDefined();
    m.ms += FENCE_SETTLE_MS - 1;
    expect(written(pass(NOW + HOUR_MS))).toEqual([]);
    // Settled by the monotonic clock, with the wall clock now an hour behind: the old revision leaves.
    m.ms += 1;
    expect(written(pass(NOW - HOUR_MS))).toEqual(["Node a revision=none"]);
    expect(m.clock.size).toBe(2);
  });
});

describe("RecordClock", () => {
  it("measures from the first sight of a stamp, starts again for a new stamp or upgrade, and keeps one entry per field", () => {
    let ms = 0;
    const clock = new RecordClock(() => ms);
    expect(clock.forPass("foo").seen("a", "r2", "startedAt", 111)).toBe(0);
    ms = 50;
    const pass = clock.forPass("foo");
    expect(pass.now).toBe(50);
    expect(pass.seen("a", "r2", "startedAt", 111)).toBe(0);
    expect(pass.seen("a", "r2", "startedAt", 222)).toBe(50);
    ms = 60;
    expect(clock.forPass("foo").seen("a", "r3", "startedAt", 222)).toBe(60);
    expect(clock.forPass("bar").seen("a", "r3", "startedAt", 222)).toBe(60);
    expect(clock.size).toBe(2);
  });

  it("keeps nothing of a config once it is forgotten (a deleted config), and the others' entries stay", () => {
    const clock = new RecordClock(() => 0);
    for (let i = 0; i < 1_000; i++) {
      clock.forPass(`gone-${i}`).seen("a", "r2", "startedAt", 1);
      clock.forget(`gone-${i}`);
    }
    clock.forPass("kept").seen("a", "r2", "fencedAt", 1);
    expect(clock.size).toBe(1);
  });

  it("is forgotten with the rest of a gone config's rollout state", () => {
    const clock = new RecordClock(() => 0);
    clock.forPass("gone").seen("a", "r2", "startedAt", 1);
    // The write expectations are kept per informer: plain objects stand for the caches here.
    forgetRolloutWrites({ recordClock: clock, nodes: {}, daemonSets: {} } as unknown as StepDeps, "gone");
    expect(clock.size).toBe(0);
  });
});
