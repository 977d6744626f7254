// decideRollout with no upgrade to move: the base revision created and kept as rendered (a hand edit put
// back), the current targeting on both revisions mid-upgrade, each node's mode, and unreadable state.
import type { V1DaemonSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  ANNOTATION_UPGRADE_STATE,
  parseUpgradeState,
} from "../../../../src/operator/upgrade/daemonset-state.js";
import {
  ctx,
  decide,
  FRESH,
  KEYS,
  NEW,
  newRev,
  node,
  NOW,
  OLD,
  oldRev,
  pod,
  recordWritten,
  revName,
  stored,
  written,
} from "./rollout-support.js";

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

  it("hands the status each targeted node's mode, in a steady state too, leaving out kubelets too old", () => {
    const d = decide({
      config: OLD,
      daemonSets: [stored(OLD, "base")],
      nodes: [node("a", "v1.37.2"), node("b", "v1.35.4"), node("c", "v1.28.9")],
    });
    expect(d.modes).toEqual({ a: "Surge", b: "Replace" });
    expect(d.problems.map((p) => `${p.node}/${p.reason}`)).toEqual(["c/KubeletTooOld"]);
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
