// The incumbent DaemonSet of a takeover: the three fields the takeover changes, where its pods run in each
// phase (by the DaemonSet controller's rule: the required node affinity of its template), and giving it back
// exactly as it was.
import type { V1DaemonSet, V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { nodeMatchesTerms } from "../../../../src/operator/model/node-terms.js";
import {
  ANNOTATION_TAKEOVER,
  incumbentAsRevision,
  incumbentIn,
  incumbentRestored,
  INCUMBENT_REVISION,
  LABEL_TAKEOVER,
  parseTakeoverRecord,
  takenOverByOther,
} from "../../../../src/operator/model/takeover.js";
import { nodeKeys } from "../../../../src/operator/model/targeting.js";
import { revisionOfDaemonSet, roleOfDaemonSet } from "../../../../src/operator/upgrade/daemonset-state.js";

const KEYS = nodeKeys("gpu");

/** NVIDIA's device plugin DaemonSet as its chart renders it (the parts the takeover reads), as stored. */
function incumbent(overrides: { affinity?: V1DaemonSet["spec"]; noStrategy?: boolean } = {}): V1DaemonSet {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: {
      name: "nvidia-device-plugin",
      namespace: "kube-system",
      uid: "uid-incumbent",
      resourceVersion: "41",
      labels: { "app.kubernetes.io/name": "nvidia-device-plugin" },
      annotations: { "deprecated.daemonset.template.generation": "3" },
    },
    spec: {
      selector: { matchLabels: { "app.kubernetes.io/name": "nvidia-device-plugin" } },
      ...(overrides.noStrategy
        ? {}
        : { updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } } }),
      template: {
        metadata: { labels: { "app.kubernetes.io/name": "nvidia-device-plugin" } },
        spec: {
          containers: [
            { name: "nvidia-device-plugin-ctr", image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.0" },
          ],
          tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  {
                    matchExpressions: [
                      {
                        key: "feature.node.kubernetes.io/pci-10de.present",
                        operator: "In",
                        values: ["true"],
                      },
                    ],
                  },
                  { matchExpressions: [{ key: "nvidia.com/gpu.present", operator: "In", values: ["true"] }] },
                ],
              },
            },
            podAntiAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] },
          },
        },
      },
    },
    status: { desiredNumberScheduled: 3, currentNumberScheduled: 3, numberMisscheduled: 0, numberReady: 3 },
  };
}

function gpuNode(labels: Record<string, string>): V1Node {
  return { metadata: { name: "n", labels: { "nvidia.com/gpu.present": "true", ...labels } } };
}

/** Whether the DaemonSet controller keeps (or starts) the incumbent's pod on the node. */
function runsOn(ds: V1DaemonSet, node: V1Node): boolean {
  const terms =
    ds.spec?.template.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
      ?.nodeSelectorTerms;
  return nodeMatchesTerms(node, terms);
}

describe("incumbentIn", () => {
  it("sets OnDelete, tolerates the fence and keeps its own terms, its other affinity and its other fields", () => {
    const ds = incumbent();
    const serving = incumbentIn(ds, "gpu", "Serving")!;
    expect(serving.spec?.updateStrategy).toEqual({ type: "OnDelete" });
    expect(serving.spec?.template.spec?.tolerations).toEqual([
      { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
      { key: KEYS.replace, operator: "Exists", effect: "NoSchedule" },
    ]);
    expect(serving.spec?.template.spec?.affinity?.podAntiAffinity).toEqual(
      ds.spec?.template.spec?.affinity?.podAntiAffinity,
    );
    expect(serving.spec?.template.spec?.containers).toEqual(ds.spec?.template.spec?.containers);
    expect(serving.spec?.template.metadata).toEqual(ds.spec?.template.metadata);
    expect(serving.metadata?.resourceVersion).toBe("41");
    expect(serving.status).toBeUndefined();
    expect(serving.metadata?.labels?.[LABEL_TAKEOVER]).toBe("gpu");
    expect(parseTakeoverRecord(serving)).toMatchObject({ config: "gpu", phase: "Serving" });
    // Nothing else of the template changes: its pods elsewhere are not replaced whatever the strategy was.
    const { affinity: _a, tolerations: _t, ...rest } = serving.spec!.template.spec!;
    const { affinity: _b, tolerations: _u, ...was } = ds.spec!.template.spec!;
    expect(rest).toEqual(was);
  });

  it.each<{ labels: Record<string, string>; serving: boolean; parked: boolean; what: string }>([
    { labels: {}, serving: true, parked: false, what: "a node no rollout touched" },
    {
      labels: { [KEYS.revision]: INCUMBENT_REVISION },
      serving: true,
      parked: true,
      what: "a node whose labels name it",
    },
    {
      labels: { [KEYS.revision]: INCUMBENT_REVISION, [KEYS.surge]: "r2" },
      serving: true,
      parked: true,
      what: "a node surging to dpo",
    },
    { labels: { [KEYS.revision]: "r2" }, serving: false, parked: false, what: "a node handed over" },
    { labels: { [KEYS.revision]: "none" }, serving: false, parked: false, what: "a node in a Replace's gap" },
    {
      labels: { "nvidia.com/gpu.present": "false" },
      serving: false,
      parked: false,
      what: "a node its own terms leave out",
    },
  ])("runs on $what: serving $serving, parked $parked", ({ labels, serving, parked }) => {
    const ds = incumbent();
    expect(runsOn(incumbentIn(ds, "gpu", "Serving")!, gpuNode(labels))).toBe(serving);
    expect(runsOn(incumbentIn(ds, "gpu", "Parked")!, gpuNode(labels))).toBe(parked);
  });

  it("is written once: the readied DaemonSet is what it wants, and parking keeps the first record", () => {
    const serving = incumbentIn(incumbent(), "gpu", "Serving")!;
    expect(incumbentIn(serving, "gpu", "Serving")).toBeUndefined();
    const parked = incumbentIn(serving, "gpu", "Parked")!;
    expect(parseTakeoverRecord(parked)?.original).toEqual(parseTakeoverRecord(serving)?.original);
    expect(parseTakeoverRecord(parked)?.phase).toBe("Parked");
    expect(incumbentIn(parked, "gpu", "Parked")).toBeUndefined();
  });

  it("with no node affinity of its own, runs where the placement says", () => {
    const ds = incumbent();
    delete ds.spec!.template.spec!.affinity;
    const serving = incumbentIn(ds, "gpu", "Serving")!;
    expect(runsOn(serving, { metadata: { name: "n", labels: {} } })).toBe(true);
    expect(runsOn(serving, { metadata: { name: "n", labels: { [KEYS.revision]: "r2" } } })).toBe(false);
  });
});

describe("incumbentRestored", () => {
  it.each<{ what: string; make: () => V1DaemonSet }>([
    { what: "as the chart renders it", make: () => incumbent() },
    { what: "without an update strategy", make: () => incumbent({ noStrategy: true }) },
    {
      what: "without affinity or tolerations",
      make: () => {
        const ds = incumbent();
        delete ds.spec!.template.spec!.affinity;
        delete ds.spec!.template.spec!.tolerations;
        return ds;
      },
    },
  ])("gives back exactly what it took, $what, from either phase", ({ make }) => {
    const original = make();
    const { status: _s, ...was } = original;
    for (const phase of ["Serving", "Parked"] as const) {
      const restored = incumbentRestored(incumbentIn(original, "gpu", phase)!, "gpu")!;
      expect(restored).toEqual(was);
    }
  });

  it("leaves a DaemonSet alone that another config, or none, took over", () => {
    const serving = incumbentIn(incumbent(), "gpu", "Serving")!;
    expect(incumbentRestored(serving, "other")).toBeUndefined();
    expect(incumbentRestored(incumbent(), "gpu")).toBeUndefined();
    expect(takenOverByOther(serving, "other")).toBe("gpu");
    expect(takenOverByOther(serving, "gpu")).toBeUndefined();
  });

  it("reads a record it cannot parse as none", () => {
    const ds = incumbent();
    ds.metadata!.annotations![ANNOTATION_TAKEOVER] = "{not json";
    expect(parseTakeoverRecord(ds)).toBeUndefined();
  });
});

describe("incumbentAsRevision", () => {
  it("stands as the base revision named incumbent while it serves", () => {
    const view = incumbentAsRevision(incumbentIn(incumbent(), "gpu", "Serving")!);
    expect(revisionOfDaemonSet(view)).toBe(INCUMBENT_REVISION);
    expect(roleOfDaemonSet(view)).toBe("base");
  });
});
