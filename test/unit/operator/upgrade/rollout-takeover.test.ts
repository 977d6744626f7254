// decideRollout with an incumbent plugin as its base (a takeover, model/takeover.ts): the nodes move off the
// incumbent as they move off an old revision of dpo's, its pods and stand-in reports tell where it still runs,
// the end of the move parks it, and nodes whose running pods hold the resource under other ids wait.
import type { V1DaemonSet, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { takeoverWrite } from "../../../../src/operator/controllers/steps/takeover.js";
import {
  incumbentAsRevision,
  incumbentIn,
  INCUMBENT_REVISION,
  parseTakeoverRecord,
} from "../../../../src/operator/model/takeover.js";
import { parseUpgradeState } from "../../../../src/operator/upgrade/daemonset-state.js";
import { decide, NEW, newRev, node, pod, RESOURCE, report, stored, written } from "./rollout-support.js";

const FROM_INCUMBENT = { from: INCUMBENT_REVISION, rollingBack: false };

/** The incumbent as the takeover readied it, and as the rollout sees it. */
function incumbent(): { live: V1DaemonSet; asRevision: V1DaemonSet } {
  const live = incumbentIn(
    {
      metadata: {
        name: "nvidia-device-plugin",
        namespace: "kube-system",
        uid: "uid-inc",
        resourceVersion: "9",
      },
      spec: {
        selector: { matchLabels: { app: "nvidia" } },
        updateStrategy: { type: "RollingUpdate" },
        template: { metadata: { labels: { app: "nvidia" } }, spec: { containers: [{ name: "c" }] } },
      },
    },
    "foo",
    "Serving",
  )!;
  live.metadata!.creationTimestamp = new Date("2026-01-01T00:00:00Z");
  return { live, asRevision: incumbentAsRevision(live) };
}

/** The incumbent's pod on a node, and the stand-in report the takeover step makes of it when it is ready. */
function incumbentPod(ds: V1DaemonSet, nodeName: string): { pod: V1Pod; report: DeviceNodeState } {
  const p = pod(ds, nodeName);
  p.status = { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };
  return {
    pod: p,
    report: {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: { name: `foo.${nodeName}.incumbent` },
      spec: { configName: "foo", nodeName, resourceName: RESOURCE, revision: INCUMBENT_REVISION },
      status: {
        registration: { state: "Registered" },
        podUID: p.metadata!.uid!,
        advertised: Number.MAX_SAFE_INTEGER,
        devices: [],
      },
    } as unknown as DeviceNodeState,
  };
}

describe("decideRollout over an incumbent", () => {
  it("starts the takeover with dpo's revision on no node, its state naming the incumbent", () => {
    const { asRevision } = incumbent();
    const d = decide({ config: NEW, daemonSets: [asRevision], nodes: [node("a"), node("b")] });
    expect(written(d)).toEqual(["Create NEW moving"]);
    const created = d.writes[0]!.kind === "Create" ? d.writes[0]!.daemonSet : undefined;
    expect(parseUpgradeState(created, INCUMBENT_REVISION)).toEqual({ ...FROM_INCUMBENT, legacyNodes: {} });
    expect(d.status).toMatchObject({
      phase: "Progressing",
      currentRevision: INCUMBENT_REVISION,
      summary: "0/2",
    });
  });

  it("surges a node beside the incumbent, then takes it off once the kubelet advertises dpo's plugin", () => {
    const { asRevision } = incumbent();
    const next = stored(NEW, "moving", FROM_INCUMBENT, "2026-11-02T00:00:00Z");
    const a = incumbentPod(asRevision, "a");
    const b = incumbentPod(asRevision, "b");
    const start = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [node("a"), node("b")],
      pods: [a.pod, b.pod],
      reports: [a.report, b.report],
    });
    expect(written(start)).toEqual(["Node a surge=NEW +record"]);

    const dpoPod = pod(next, "a");
    const surged = node("a", "v1.37.0", 4, {
      revision: INCUMBENT_REVISION,
      surge: newRev,
      record: { from: INCUMBENT_REVISION, startedAt: Date.parse("2026-11-23T11:59:50Z"), baseline: 4 },
    });
    const handover = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [surged, node("b")],
      pods: [a.pod, b.pod, dpoPod],
      reports: [a.report, b.report, report(NEW, dpoPod)],
    });
    expect(written(handover)[0]).toBe("Node a revision=NEW surge=-");
  });

  it("ends by deleting the incumbent, which the takeover step turns into parking it", () => {
    const { live, asRevision } = incumbent();
    const next = stored(NEW, "moving", FROM_INCUMBENT, "2026-11-02T00:00:00Z");
    const pa = pod(next, "a");
    const pb = pod(next, "b");
    const d = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [node("a", "v1.37.0", 4, { revision: newRev }), node("b", "v1.37.0", 4, { revision: newRev })],
      pods: [pa, pb],
      reports: [report(NEW, pa), report(NEW, pb)],
    });
    expect(written(d)).toEqual(["Delete incumbent", "Update NEW base"]);
    const park = takeoverWrite(d.writes[0]!, { incumbent: live, asRevision, pods: [], reports: [] }, "foo");
    expect(park?.kind).toBe("Park");
    if (park?.kind === "Park") expect(parseTakeoverRecord(park.daemonSet)?.phase).toBe("Parked");
    // The config's own DaemonSets are written as they are.
    expect(
      takeoverWrite(d.writes[1]!, { incumbent: live, asRevision, pods: [], reports: [] }, "foo"),
    ).toBeUndefined();
  });

  it("leaves a node whose running pods hold the resource under the incumbent's ids, and says why", () => {
    const { asRevision } = incumbent();
    const next = stored(NEW, "moving", FROM_INCUMBENT, "2026-11-02T00:00:00Z");
    const a = incumbentPod(asRevision, "a");
    const b = incumbentPod(asRevision, "b");
    const d = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [node("a"), node("b")],
      pods: [a.pod, b.pod],
      reports: [a.report, b.report],
      startHeld: new Map([["a", "1 pod(s) hold vendor.example/foo"]]),
    });
    expect(written(d)).toEqual(["Node b surge=NEW +record"]);
    expect(d.problems).toContainEqual({
      node: "a",
      reason: "TakeoverWaitsForPods",
      message: "1 pod(s) hold vendor.example/foo",
    });
  });

  it("gives a rolled-back node to the incumbent again, and lets dpo's plugin go once the incumbent is ready there", () => {
    const { asRevision } = incumbent();
    const next = stored(
      NEW,
      "moving",
      { from: INCUMBENT_REVISION, rollingBack: true },
      "2026-11-02T00:00:00Z",
    );
    const dpoPod = pod(next, "a");
    const moved = node("a", "v1.37.0", 4, {
      revision: newRev,
      record: {
        from: INCUMBENT_REVISION,
        startedAt: Date.parse("2026-11-23T11:00:00Z"),
        baseline: 4,
        failed: true,
      },
    });
    const back = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [moved],
      pods: [dpoPod],
      reports: [report(NEW, dpoPod)],
    });
    // Its labels name the incumbent again beside dpo's revision: the incumbent's DaemonSet starts its pod there.
    expect(written(back)).toEqual([`Node a surge=${INCUMBENT_REVISION}`]);

    const a = incumbentPod(asRevision, "a");
    const both = node("a", "v1.37.0", 4, {
      revision: newRev,
      surge: INCUMBENT_REVISION,
      record: {
        from: INCUMBENT_REVISION,
        startedAt: Date.parse("2026-11-23T11:00:00Z"),
        baseline: 4,
        failed: true,
      },
    });
    const gone = decide({
      config: NEW,
      daemonSets: [asRevision, next],
      nodes: [both],
      pods: [dpoPod, a.pod],
      reports: [report(NEW, dpoPod), a.report],
    });
    expect(written(gone)[0]).toBe(`Node a revision=${INCUMBENT_REVISION} surge=-`);
  });
});
