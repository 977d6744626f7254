// One node's health for a config: the kubelet's counts, the plugin pod, the plugin's report.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeStateStatus } from "../../../../src/api/v1beta1/devicenodestate.js";
import { parseCountQuantity } from "../../../../src/api/quantity.js";
import { deviceNodeStateName, unhealthyAdvertisedCount } from "../../../../src/contract/node-state.js";
import {
  choosePluginPod,
  chooseReport,
  unhealthyAdvertisedIds,
} from "../../../../src/operator/status/node-health.js";

describe("parseCountQuantity", () => {
  it.each<{ quantity: string | undefined; want: number | undefined }>([
    { quantity: undefined, want: undefined },
    { quantity: "0", want: 0 },
    { quantity: "4", want: 4 },
    { quantity: "1500", want: 1500 },
    { quantity: "2k", want: 2000 },
    { quantity: "1.5k", want: 1500 },
    { quantity: "1Ki", want: 1024 },
    { quantity: "3e3", want: 3000 },
    { quantity: "500m", want: undefined },
    { quantity: "1.5", want: undefined },
    { quantity: "-1", want: undefined },
    { quantity: "lots", want: undefined },
  ])("$quantity → $want", ({ quantity, want }) => {
    expect(parseCountQuantity(quantity)).toBe(want);
  });
});

function pod(
  name: string,
  opts: { hash?: string; ready?: boolean; deleting?: boolean; phase?: string; created?: string },
): V1Pod {
  const ready = opts.ready ?? true;
  return {
    metadata: {
      name,
      annotations: { "dpo.dev/config-hash": opts.hash ?? "new" },
      creationTimestamp: (opts.created ?? "2025-01-01T00:00:00Z") as unknown as Date,
      ...(opts.deleting ? { deletionTimestamp: "2025-01-02T00:00:00Z" as unknown as Date } : {}),
    },
    spec: { nodeName: "n1", containers: [] },
    status: {
      phase: opts.phase ?? "Running",
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
    },
  };
}

describe("choosePluginPod", () => {
  it.each<{ case: string; pods: V1Pod[]; want: string | undefined }>([
    { case: "no pods", pods: [], want: undefined },
    { case: "finished pods never count", pods: [pod("done", { phase: "Succeeded" })], want: undefined },
    {
      case: "a live pod over a terminating one",
      pods: [pod("old", { deleting: true }), pod("new", { ready: false })],
      want: "new",
    },
    {
      case: "the current config over an old one",
      pods: [pod("old", { hash: "old" }), pod("new", { ready: false })],
      want: "new",
    },
    { case: "ready over not ready", pods: [pod("b", { ready: false }), pod("a", {})], want: "a" },
    {
      case: "then the newest",
      pods: [
        pod("older", { created: "2025-01-01T00:00:00Z" }),
        pod("newer", { created: "2025-01-03T00:00:00Z" }),
      ],
      want: "newer",
    },
  ])("$case", ({ pods, want }) => {
    expect(choosePluginPod(pods, "new")?.metadata?.name).toBe(want);
  });
});

function report(devices: DeviceNodeStateStatus["devices"]): DeviceNodeStateStatus {
  const advertised = devices.reduce((s, d) => s + d.replicas, 0);
  return {
    pluginVersion: "0.1.0",
    kubeletAPIVersion: "v1beta1",
    registration: { state: "Registered", since: "2025-01-01T00:00:00Z" },
    advertised,
    healthy: devices.reduce((s, d) => (d.health === "Healthy" ? s + d.replicas : s), 0),
    devices,
    updateTime: "2025-01-01T00:00:00Z",
  };
}
const device = (id: string, health: "Healthy" | "Unhealthy", replicas = 1) => ({
  id,
  health,
  replicas,
  since: "2025-01-01T00:00:00Z",
});

describe("unhealthy advertised devices", () => {
  it.each([
    { case: "none", devices: [device("foo-0", "Healthy")], ids: [], count: 0 },
    {
      case: "without sharing: the physical id",
      devices: [device("foo-0", "Healthy"), device("foo-1", "Unhealthy")],
      ids: ["foo-1"],
      count: 1,
    },
    {
      case: "time-sliced: every replica id",
      devices: [device("foo-0", "Healthy", 3), device("foo-1", "Unhealthy", 3)],
      ids: ["foo-1::0", "foo-1::1", "foo-1::2"],
      count: 3,
    },
    {
      case: "held by the other publish path (0 replicas): advertised under no id here",
      devices: [device("foo-0", "Unhealthy", 0), device("foo-1", "Unhealthy")],
      ids: ["foo-1"],
      count: 1,
    },
  ])("$case", ({ devices, ids, count }) => {
    expect(unhealthyAdvertisedIds(report(devices), 32)).toEqual(ids);
    expect(unhealthyAdvertisedCount(report(devices))).toBe(count);
  });

  it("stops listing at the limit but counts everything", () => {
    const devices = [device("a", "Unhealthy", 20), device("b", "Unhealthy", 20), device("c", "Unhealthy")];
    const ids = unhealthyAdvertisedIds(report(devices), 32);
    expect(ids).toHaveLength(32);
    expect(ids.at(-1)).toBe("b::11");
    expect(unhealthyAdvertisedCount(report(devices))).toBe(41);
  });
});

describe("chooseReport", () => {
  it("takes the most recently updated report of a node", () => {
    const at = (name: string, updateTime: string) => ({
      apiVersion: "dpo.dev/v1beta1" as const,
      kind: "DeviceNodeState" as const,
      metadata: { name },
      spec: { configName: "c", nodeName: "n1", resourceName: "vendor.example/foo" },
      status: { ...report([]), updateTime },
    });
    expect(
      chooseReport([at("old", "2025-01-01T00:00:00Z"), at("new", "2025-01-02T00:00:00Z")])?.metadata.name,
    ).toBe("new");
    expect(chooseReport([])).toBeUndefined();
  });

  it("takes the report under the current name over any other, however recent", () => {
    const named = (name: string, updateTime: string) => ({
      apiVersion: "dpo.dev/v1beta1" as const,
      kind: "DeviceNodeState" as const,
      metadata: { name },
      spec: { configName: "c", nodeName: "n1", resourceName: "vendor.example/foo" },
      status: { ...report([]), updateTime },
    });
    const current = deviceNodeStateName("c", "n1");
    for (const reports of [
      [named("c-n1", "2025-01-02T00:00:00Z"), named(current, "2025-01-01T00:00:00Z")],
      [named(current, "2025-01-01T00:00:00Z"), named("c-n1", "2025-01-02T00:00:00Z")],
    ]) {
      expect(chooseReport(reports)?.metadata.name).toBe(current);
    }
  });
});
