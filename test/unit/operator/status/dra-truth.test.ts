// DRA mode's device truth: the ResourceSlices a config's plugins publish, counted per node (the pool's
// current generation only), and a node judged against them instead of Node.status.capacity.
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState, DeviceNodeStateStatus } from "../../../../src/api/v1beta1/devicenodestate.js";
import {
  evaluateNode,
  kubeletTruth,
  nodeDeviceCounts,
  publishedDevicesByNode,
  slimResourceSliceForCache,
  type DeviceTruth,
  type SlimResourceSlice,
} from "../../../../src/operator/status/index.js";

const DRIVER = "foo.example.com";

function slice(
  node: string | undefined,
  devices: number,
  opts: { pool?: string; generation?: number; driver?: string; deleting?: boolean } = {},
): SlimResourceSlice {
  return {
    metadata: {
      name: `s-${node}-${opts.pool ?? node}-${opts.generation ?? 1}-${devices}`,
      ...(opts.deleting ? { deletionTimestamp: new Date("2025-01-02T00:00:00Z") } : {}),
    },
    spec: {
      driver: opts.driver ?? DRIVER,
      ...(node === undefined ? {} : { nodeName: node }),
      pool: { name: opts.pool ?? node ?? "all", generation: opts.generation ?? 1, resourceSliceCount: 1 },
      devices: Array.from({ length: devices }, (_, i) => ({ name: `d${i}` })),
    },
  };
}

/** The slice with the named devices marked tainted, as slimResourceSliceForCache marks them. */
function tainted(s: SlimResourceSlice, names: readonly string[]): SlimResourceSlice {
  return {
    ...s,
    spec: {
      ...s.spec,
      devices: s.spec.devices.map((d) => (names.includes(d.name) ? { ...d, tainted: true as const } : d)),
    },
  };
}

describe("publishedDevicesByNode", () => {
  it.each<{ case: string; slices: SlimResourceSlice[]; want: Record<string, number> }>([
    { case: "no slices", slices: [], want: {} },
    { case: "one slice per node", slices: [slice("n1", 4), slice("n2", 2)], want: { n1: 4, n2: 2 } },
    {
      case: "a pool of several slices sums them",
      slices: [slice("n1", 128), slice("n1", 128), slice("n1", 3)],
      want: { n1: 259 },
    },
    {
      case: "only the pool's highest generation counts, whatever the order",
      slices: [
        slice("n1", 2, { generation: 3 }),
        slice("n1", 8, { generation: 2 }),
        slice("n1", 1, { generation: 3 }),
      ],
      want: { n1: 3 },
    },
    {
      case: "other drivers are not counted",
      slices: [slice("n1", 4), slice("n1", 5, { driver: "other.example.com" })],
      want: { n1: 4 },
    },
    { case: "a slice being deleted is not counted", slices: [slice("n1", 4, { deleting: true })], want: {} },
    { case: "a slice for no single node is not counted", slices: [slice(undefined, 4)], want: {} },
    {
      case: "two pools of a node are summed",
      slices: [slice("n1", 4, { pool: "a" }), slice("n1", 1, { pool: "b", generation: 7 })],
      want: { n1: 5 },
    },
    { case: "an empty pool publishes zero", slices: [slice("n1", 0)], want: { n1: 0 } },
    {
      case: "a tainted device (unhealthy, kept in the slice) is not counted",
      slices: [tainted(slice("n1", 4), ["d1"])],
      want: { n1: 3 },
    },
    {
      case: "every device tainted: zero",
      slices: [tainted(slice("n1", 2), ["d0", "d1"])],
      want: { n1: 0 },
    },
  ])("$case", ({ slices, want }) => {
    expect(Object.fromEntries(publishedDevicesByNode(slices, DRIVER))).toEqual(want);
  });
});

describe("slimResourceSliceForCache", () => {
  it.each([
    { effect: "NoSchedule", tainted: true },
    { effect: "NoExecute", tainted: true },
    { effect: "None", tainted: false },
  ])("a device with a $effect taint is marked tainted: $tainted", ({ effect, tainted: want }) => {
    const slim = slimResourceSliceForCache({
      metadata: { name: "s" },
      spec: {
        driver: DRIVER,
        nodeName: "n1",
        pool: { name: "n1", generation: 1, resourceSliceCount: 1 },
        devices: [
          {
            name: "d0",
            taints: [{ key: "dpo.dev/unhealthy", value: "ECC", effect, timeAdded: "2026-11-27T10:00:00Z" }],
          },
          { name: "d1" },
        ],
      },
    });
    expect(slim.spec.devices).toEqual([
      want ? { name: "d0", tainted: true } : { name: "d0" },
      { name: "d1" },
    ]);
  });

  it("keeps labels, driver, node, pool and device names; drops attributes, capacities, managedFields", () => {
    const full = {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: {
        name: "dpo-0123456789abcdef",
        uid: "u1",
        resourceVersion: "7",
        labels: { "dpo.dev/config": "foo" },
        managedFields: [{ manager: "dpo-plugin" }],
        annotations: { a: "b" },
      },
      spec: {
        driver: DRIVER,
        nodeName: "n1",
        pool: { name: "n1", generation: 2, resourceSliceCount: 1 },
        devices: [
          { name: "d0", attributes: { model: { string: "X100" } }, capacity: { memory: { value: "80Gi" } } },
        ],
      },
    };
    expect(slimResourceSliceForCache(full)).toEqual({
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: {
        name: "dpo-0123456789abcdef",
        uid: "u1",
        resourceVersion: "7",
        labels: { "dpo.dev/config": "foo" },
      },
      spec: {
        driver: DRIVER,
        nodeName: "n1",
        pool: { name: "n1", generation: 2, resourceSliceCount: 1 },
        devices: [{ name: "d0" }],
      },
    });
  });
});

const node = (name: string, capacity?: string): V1Node => ({
  metadata: { name },
  status:
    capacity === undefined
      ? {}
      : { capacity: { "example.com/foo": capacity }, allocatable: { "example.com/foo": capacity } },
});
const readyPod: V1Pod = {
  metadata: { name: "p", annotations: { "dpo.dev/config-hash": "h" }, labels: {} },
  spec: { nodeName: "n1", containers: [] },
  status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
};
function report(healthy: number, unhealthy: number, advertised = healthy + unhealthy): DeviceNodeState {
  const since = "2025-01-01T00:00:00Z";
  const status: DeviceNodeStateStatus = {
    pluginVersion: "0.1.0",
    kubeletAPIVersion: "v1",
    registration: { state: "Registered", since },
    advertised,
    healthy,
    devices: [
      ...Array.from({ length: healthy }, (_, i) => ({
        id: `h${i}`,
        health: "Healthy" as const,
        replicas: 1,
        since,
      })),
      ...Array.from({ length: unhealthy }, (_, i) => ({
        id: `u${i}`,
        health: "Unhealthy" as const,
        replicas: 1,
        since,
        reason: "XID",
      })),
    ],
    updateTime: since,
  };
  return {
    metadata: { name: "r" },
    spec: { configName: "foo", nodeName: "n1", resourceName: "example.com/foo" },
    status,
  } as DeviceNodeState;
}
/** The report with devices the device plugin's pods hold, listed with 0 replicas as the DRA plugin does. */
function withHeld(
  r: DeviceNodeState,
  ids: string[],
  health: "Healthy" | "Unhealthy" = "Healthy",
): DeviceNodeState {
  const status = r.status!;
  const since = status.updateTime;
  return {
    ...r,
    status: {
      ...status,
      devices: [
        ...status.devices,
        ...ids.map((id) => ({ id, health, replicas: 0, heldBy: "DevicePlugin" as const, since })),
      ],
    },
  };
}
const slices = (published: Record<string, number>): DeviceTruth => ({
  kind: "ResourceSlices",
  driver: DRIVER,
  published: new Map(Object.entries(published)),
});

describe("evaluateNode against the ResourceSlices (DRA mode)", () => {
  it.each<{
    case: string;
    truth: DeviceTruth;
    report: DeviceNodeState;
    want: {
      capacity: number | undefined;
      allocatable: number | undefined;
      ready: boolean;
      reason?: string;
      message?: string;
    };
  }>([
    {
      case: "all published and healthy: no problem, whatever the Node's capacity says",
      truth: slices({ n1: 4 }),
      report: report(4, 0),
      want: { capacity: 4, allocatable: 4, ready: true },
    },
    {
      case: "an unhealthy device left out of the slice: UnhealthyDevices, capacity counts it",
      truth: slices({ n1: 3 }),
      report: report(3, 1),
      want: { capacity: 4, allocatable: 3, ready: true, reason: "UnhealthyDevices" },
    },
    {
      case: "devices held by device-plugin pods since a switch (left out): capacity counts them, not unhealthy",
      truth: slices({ n1: 2 }),
      report: withHeld(report(2, 0), ["d0", "d1"]),
      want: { capacity: 4, allocatable: 2, ready: true },
    },
    {
      case: "a held device that is unhealthy too is counted once, held",
      truth: slices({ n1: 2 }),
      report: withHeld(report(2, 0), ["d0"], "Unhealthy"),
      want: { capacity: 3, allocatable: 2, ready: true },
    },
    {
      case: "a plugin whose advertised leaves the unhealthy out is judged the same",
      truth: slices({ n1: 3 }),
      report: report(3, 1, 3),
      want: { capacity: 4, allocatable: 3, ready: true, reason: "UnhealthyDevices" },
    },
    {
      case: "nothing published while the plugin has healthy devices: NoCapacity naming the driver",
      truth: slices({}),
      report: report(2, 0),
      want: {
        capacity: undefined,
        allocatable: undefined,
        ready: false,
        reason: "NoCapacity",
        message: `no ResourceSlice of driver ${DRIVER} publishes a device of the node; the plugin advertises 2, 2 healthy`,
      },
    },
    {
      case: "published differs from healthy: CapacityMismatch",
      truth: slices({ n1: 2 }),
      report: report(4, 0),
      want: {
        capacity: 2,
        allocatable: 2,
        ready: false,
        reason: "CapacityMismatch",
        message: `the ResourceSlices of driver ${DRIVER} publish 2 devices of the node; the plugin advertises 4, 4 healthy`,
      },
    },
    {
      case: "no devices at all and nothing published: fine",
      truth: slices({}),
      report: report(0, 0),
      want: { capacity: undefined, allocatable: undefined, ready: true },
    },
    {
      case: "the kubelet truth still reads the Node (DevicePlugin mode unchanged)",
      truth: kubeletTruth("example.com/foo"),
      report: report(4, 0),
      want: { capacity: 8, allocatable: 8, ready: false, reason: "CapacityMismatch" },
    },
  ])("$case", ({ truth, report: r, want }) => {
    const health = evaluateNode(
      { node: node("n1", "8"), pods: [readyPod], reports: [r] },
      "example.com/foo",
      "h",
      truth,
    );
    expect({ capacity: health.capacity, allocatable: health.allocatable, ready: health.ready }).toEqual({
      capacity: want.capacity,
      allocatable: want.allocatable,
      ready: want.ready,
    });
    expect(health.problem?.reason).toBe(want.reason);
    if (want.message !== undefined) expect(health.problem?.message).toBe(want.message);
  });

  it("nodeDeviceCounts without a report: published devices only", () => {
    const counts = nodeDeviceCounts(node("n1"), slices({ n1: 5 }));
    expect([counts.capacity, counts.allocatable]).toEqual([5, 5]);
  });
});

describe("health counts the same in both modes", () => {
  // One node, four devices, one unhealthy ("XID"): as the kubelet advertises a device plugin's, as a DRA
  // plugin's slice holds them with taints kept (1.36+), and with taints dropped (1.35: left out).
  const fullSlice = (devices: { name: string; taints?: { key: string; effect: string }[] }[]) =>
    slimResourceSliceForCache({
      metadata: { name: "s" },
      spec: {
        driver: DRIVER,
        nodeName: "n1",
        pool: { name: "n1", generation: 1, resourceSliceCount: 1 },
        devices,
      },
    });
  const unhealthyTaint = [{ key: "dpo.dev/unhealthy", effect: "NoSchedule" }];
  const modes: { mode: string; node: V1Node; truth: DeviceTruth }[] = [
    {
      mode: "DevicePlugin (the kubelet: capacity 4, allocatable 3)",
      node: {
        metadata: { name: "n1" },
        status: { capacity: { "example.com/foo": "4" }, allocatable: { "example.com/foo": "3" } },
      },
      truth: kubeletTruth("example.com/foo"),
    },
    {
      mode: "DRA, the unhealthy device tainted in the slice",
      node: node("n1"),
      truth: {
        kind: "ResourceSlices",
        driver: DRIVER,
        published: publishedDevicesByNode(
          [
            fullSlice([
              { name: "h0" },
              { name: "h1" },
              { name: "h2" },
              { name: "u0", taints: unhealthyTaint },
            ]),
          ],
          DRIVER,
        ),
      },
    },
    {
      mode: "DRA, the unhealthy device left out (taints dropped)",
      node: node("n1"),
      truth: {
        kind: "ResourceSlices",
        driver: DRIVER,
        published: publishedDevicesByNode(
          [fullSlice([{ name: "h0" }, { name: "h1" }, { name: "h2" }])],
          DRIVER,
        ),
      },
    },
  ];

  it.each(modes)("$mode", ({ node: n, truth }) => {
    const health = evaluateNode(
      { node: n, pods: [readyPod], reports: [report(3, 1)] },
      "example.com/foo",
      "h",
      truth,
    );
    expect({
      capacity: health.capacity,
      allocatable: health.allocatable,
      unhealthy: health.unhealthy,
      ready: health.ready,
      problem: health.problem,
    }).toEqual({
      capacity: 4,
      allocatable: 3,
      unhealthy: 1,
      ready: true,
      problem: {
        node: "n1",
        reason: "UnhealthyDevices",
        message: "1 of 4 devices unhealthy: XID",
        devices: ["u0"],
      },
    });
  });
});
