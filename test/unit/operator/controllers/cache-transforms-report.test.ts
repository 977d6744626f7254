// What the operator's report informer keeps of a DeviceNodeState: an 8-GPU node's report enters the cache
// with only the device attributes node labels are made of, while every field the status, the stale-report
// cleanup and the upgrade read stays, so each of them answers the same on the cached report as on the whole
// one (the node-label, self-heal, rollout and rediscovery readers: cache-transforms-readers.test.ts).
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState, ReportedDevice } from "../../../../src/api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import { Informer, ManualClock, type ListResult } from "../../../../src/kube/index.js";
import { slimReportForCache } from "../../../../src/operator/controllers/cache-transforms.js";
import { findStaleReports } from "../../../../src/operator/controllers/stale-reports.js";
import { chooseReport, evaluateNode } from "../../../../src/operator/status/node-health.js";

const RESOURCE = "nvidia.com/gpu";
const HASH = "h1";

/** A GPU as the NVIDIA backend reports it, with its attributes in text, typed and as capacities. */
function gpu(index: number, over: Partial<ReportedDevice> = {}): ReportedDevice {
  return {
    id: `GPU-0000000${index}-0000-4a2b-9c3d-00000000000${index}`,
    health: "Healthy",
    since: "2026-01-01T00:00:00Z",
    numaNode: index < 4 ? 0 : 1,
    replicas: 1,
    attributes: {
      cudaVersion: "12.4",
      driverVersion: "550.90.07",
      index: String(index),
      memoryMiB: "81559",
      migMode: "Disabled",
      minor: String(index),
      model: "NVIDIA H100 80GB HBM3",
      pciBusId: `0000:1${index}:00.0`,
    },
    typedAttributes: {
      cudaVersion: { string: "12.4" },
      driverVersion: { string: "550.90.07" },
      index: { int: index },
      memoryMiB: { int: 81559 },
      migMode: { string: "Disabled" },
      minor: { int: index },
      model: { string: "NVIDIA H100 80GB HBM3" },
      numaNode: { int: index < 4 ? 0 : 1 },
      pciBusId: { string: `0000:1${index}:00.0` },
    },
    ...over,
  };
}

/** What the cache keeps of gpu()'s attributes: those node labels are made of. */
const LABELLED = {
  cudaVersion: "12.4",
  driverVersion: "550.90.07",
  memoryMiB: "81559",
  migMode: "Disabled",
  model: "NVIDIA H100 80GB HBM3",
};

function fullReport(
  node: string,
  devices: ReportedDevice[],
  over: Partial<NonNullable<DeviceNodeState["status"]>> = {},
): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: {
      name: deviceNodeStateName("gpu", node, "r1"),
      namespace: "dpo-system",
      uid: `uid-${node}`,
      resourceVersion: "12",
      generation: 1,
      creationTimestamp: "2026-01-01T00:00:00Z",
      labels: { "dpo.dev/config": "gpu" },
      ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "dpo-gpu-abc", uid: "pod-uid" }],
      managedFields: [{ manager: "dpo-plugin", operation: "Apply" }],
    },
    spec: { configName: "gpu", nodeName: node, resourceName: RESOURCE, revision: "r1" },
    status: {
      pluginVersion: "1.2.3",
      kubeletAPIVersion: "v1beta1",
      registration: {
        state: "Registered",
        since: "2026-01-01T00:00:01Z",
        socket: "/var/lib/kubelet/device-plugins/dpo-gpu.sock",
      },
      configHash: HASH,
      podUID: "pod-uid",
      advertised: devices.reduce((n, d) => n + d.replicas, 0),
      healthy: devices.filter((d) => d.health === "Healthy").reduce((n, d) => n + d.replicas, 0),
      allocated: 3,
      devices,
      updateTime: "2026-01-01T00:05:00Z",
      ...over,
    },
  };
}

describe("slimReportForCache", () => {
  it("drops the devices' other attributes and the rest the operator never reads, and keeps what it reads", () => {
    const report = fullReport("n1", [gpu(0), gpu(1, { health: "Unhealthy", reason: "XID79" })], {
      registration: { state: "NotRegistered", since: "2026-01-01T00:00:01Z", lastError: "kubelet refused" },
    });
    expect(slimReportForCache(report)).toEqual({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: {
        name: report.metadata.name,
        namespace: "dpo-system",
        uid: "uid-n1",
        resourceVersion: "12",
        creationTimestamp: "2026-01-01T00:00:00Z",
      },
      spec: { configName: "gpu", nodeName: "n1", resourceName: RESOURCE, revision: "r1" },
      status: {
        registration: { state: "NotRegistered", lastError: "kubelet refused" },
        podUID: "pod-uid",
        advertised: 2,
        healthy: 1,
        allocated: 3,
        devices: [
          { id: gpu(0).id, health: "Healthy", replicas: 1, attributes: LABELLED },
          { id: gpu(1).id, health: "Unhealthy", reason: "XID79", replicas: 1, attributes: LABELLED },
        ],
        updateTime: "2026-01-01T00:05:00Z",
      },
    });
  });

  it("keeps a device the DRA path holds as held out, not unhealthy", () => {
    const slim = slimReportForCache(fullReport("n1", [gpu(0, { replicas: 0, heldBy: "DRA" })]));
    expect(slim.status?.devices).toEqual([
      { id: gpu(0).id, health: "Healthy", replicas: 0, heldBy: "DRA", attributes: LABELLED },
    ]);
  });

  it("tolerates a report the plugin has not given a status yet", () => {
    const report = fullReport("n1", []);
    delete report.status;
    expect(slimReportForCache(report)).toEqual({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DeviceNodeState",
      metadata: {
        name: report.metadata.name,
        namespace: "dpo-system",
        uid: "uid-n1",
        resourceVersion: "12",
        creationTimestamp: "2026-01-01T00:00:00Z",
      },
      spec: report.spec,
    });
  });
});

/** The node with the kubelet advertising what `report` says, so its health turns on the report alone. */
function node(name: string, report: DeviceNodeState): V1Node {
  return {
    metadata: { name, labels: {} },
    status: {
      capacity: { [RESOURCE]: String(report.status?.advertised ?? 0) },
      allocatable: { [RESOURCE]: String(report.status?.healthy ?? 0) },
      conditions: [{ type: "Ready", status: "True" }],
    },
  };
}

function pod(nodeName: string, uid: string, ready: boolean): V1Pod {
  return {
    metadata: { name: `p-${uid}`, uid, annotations: { "dpo.dev/config-hash": HASH } },
    spec: { nodeName, containers: [] },
    status: { phase: "Running", conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  };
}

describe("the cached report", () => {
  const eight = Array.from({ length: 8 }, (_, i) => gpu(i));
  // Each variant turns on a field a node's health is judged by.
  const variants: Array<[string, DeviceNodeState, V1Pod]> = [
    ["all healthy", fullReport("n1", eight), pod("n1", "pod-uid", true)],
    [
      "unhealthy devices with reasons, one time-sliced",
      fullReport("n1", [
        ...eight.slice(0, 6),
        gpu(6, { health: "Unhealthy", reason: "XID79", replicas: 4 }),
        gpu(7, { health: "Unhealthy", reason: "GPULost" }),
      ]),
      pod("n1", "pod-uid", true),
    ],
    [
      "devices the DRA path holds",
      fullReport("n1", [...eight.slice(0, 7), gpu(7, { replicas: 0, heldBy: "DRA" })]),
      pod("n1", "pod-uid", true),
    ],
    [
      "not registered, with the kubelet's error",
      fullReport("n1", eight, {
        registration: { state: "NotRegistered", since: "2026-01-01T00:00:01Z", lastError: "refused" },
      }),
      pod("n1", "pod-uid", false),
    ],
    [
      "standing by",
      fullReport("n1", eight, { registration: { state: "StandingBy", since: "2026-01-01T00:00:01Z" } }),
      pod("n1", "pod-uid", false),
    ],
  ];

  it.each(variants)("gives the node's health the same as the whole report: %s", (name, report, p) => {
    const observe = (r: DeviceNodeState) =>
      evaluateNode({ node: node("n1", report), pods: [p], reports: [r] }, RESOURCE, HASH);
    const whole = observe(report);
    expect(observe(slimReportForCache(report))).toEqual(whole);
    // Each variant is judged by the fields it turns on, not stopped short by a count mismatch.
    if (name.startsWith("unhealthy")) expect(whole.problem?.reason).toBe("UnhealthyDevices");
  });

  it("is chosen as the whole report is: by its pod's uid, else the newest", () => {
    const older = fullReport("n1", eight, { podUID: "old-pod", updateTime: "2026-01-01T00:01:00Z" });
    const newer = fullReport("n1", eight, { podUID: "new-pod", updateTime: "2026-01-01T00:09:00Z" });
    newer.metadata.name = `${newer.metadata.name}-b`;
    const slim = [older, newer].map(slimReportForCache);
    for (const p of [pod("n1", "old-pod", true), pod("n1", "new-pod", true), undefined]) {
      expect(chooseReport(slim, p)?.status?.podUID).toBe(chooseReport([older, newer], p)?.status?.podUID);
    }
  });

  it("is judged stale as the whole report is, by its age and name", () => {
    const report = fullReport("gone", eight);
    const judge = (r: DeviceNodeState, now: number) =>
      findStaleReports({
        configName: "gpu",
        spec: { nodeSelector: {}, tolerations: [] },
        reports: [r],
        node: () => undefined,
        nodesSynced: true,
        limit: 10,
        now,
      });
    const created = Date.parse("2026-01-01T00:00:00Z");
    // Young: waits for its node (the recheck); old: NodeGone, deleted under its uid.
    for (const now of [created + 1_000, created + 60_000]) {
      const slim = judge(slimReportForCache(report), now);
      const whole = judge(report, now);
      expect({ ...slim, stale: slim.stale.map((s) => s.reason) }).toEqual({
        ...whole,
        stale: whole.stale.map((s) => s.reason),
      });
      expect(slim.stale.map((s) => s.report.metadata["uid"])).toEqual(
        whole.stale.map((s) => s.report.metadata["uid"]),
      );
    }
  });

  it("enters the informer's cache from list and watch with only the attributes labels are made of", async () => {
    const clock = new ManualClock();
    let onEvent: ((type: string, object: unknown) => void) | undefined;
    const informer = new Informer<DeviceNodeState>({
      path: "/apis/dpo.dev/v1beta1/namespaces/dpo-system/devicenodestates",
      list: (): Promise<ListResult<DeviceNodeState>> =>
        Promise.resolve({ items: [fullReport("listed", eight)], metadata: { resourceVersion: "5" } }),
      watch: (_path, _query, handler) => {
        onEvent = handler;
        return Promise.resolve({ abort: () => undefined });
      },
      clock,
      transform: slimReportForCache,
    });
    informer.start();
    try {
      await informer.waitForSync();
      await clock.advance(0);
      onEvent!("ADDED", fullReport("watched", eight));
      for (const name of ["listed", "watched"]) {
        const cached = informer.get(`dpo-system/${deviceNodeStateName("gpu", name, "r1")}`)!;
        expect(cached.metadata["managedFields"]).toBeUndefined();
        expect(cached.status?.devices.map((d) => d.typedAttributes)).toEqual(eight.map(() => undefined));
        expect(cached.status?.devices.map((d) => d.attributes)).toEqual(eight.map(() => LABELLED));
        expect(cached.status?.devices.map((d) => d.health)).toEqual(eight.map(() => "Healthy"));
        expect(cached.status?.podUID).toBe("pod-uid");
      }
    } finally {
      await informer.stop();
    }
  });
});
