// aggregateStatus for a config that publishes through DRA: the ResourceSlices are the devices' truth, a
// DeviceClass it does not own stalls it, and DRAPublishing says whether the API and the kubelets allow it.
import { describe, expect, it } from "vitest";
import { aggregateStatus } from "../../../../src/operator/status/aggregate.js";
import {
  condition,
  conditionSummary,
  config,
  configWith,
  input,
  versions,
  type NodeSetup,
} from "./aggregate-support.js";

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

describe("aggregateStatus: version-dependent features say in the status why they are off", () => {
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
});
