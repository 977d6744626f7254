// `kubectl dpo status` and `kubectl dpo describe node` from objects as the API server holds them: each
// node's revision, registration, devices and holders, and the reason it waits, most pressing first.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState, ReportedDevice } from "../../../src/api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigStatus } from "../../../src/api/v1beta1/status.js";
import {
  formatNodeDescription,
  formatStatus,
  formatTable,
  nodeWaitReason,
  type ConfigObject,
} from "../../../src/cli/status-view.js";

const T = "2026-01-01T00:00:00Z";

function node(
  name: string,
  more: { ready?: string; taints?: string[]; unschedulable?: boolean } = {},
): V1Node {
  return {
    metadata: { name },
    spec: {
      ...(more.unschedulable ? { unschedulable: true } : {}),
      ...(more.taints ? { taints: more.taints.map((key) => ({ key, effect: "NoSchedule" })) } : {}),
    },
    status: { conditions: [{ type: "Ready", status: more.ready ?? "True" }] },
  };
}

function device(id: string, more: Partial<ReportedDevice> = {}): ReportedDevice {
  return { id, health: "Healthy", since: T, replicas: 1, ...more };
}

function report(
  config: string,
  nodeName: string,
  revision: string,
  more: {
    state?: "Registered" | "NotRegistered" | "StandingBy";
    lastError?: string;
    devices?: ReportedDevice[];
    allocated?: number;
  } = {},
): DeviceNodeState {
  const devices = more.devices ?? [device("d0"), device("d1")];
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `${config}-${nodeName}-${revision}`, namespace: "dpo-system" },
    spec: { configName: config, nodeName, resourceName: "example.com/gpu", revision },
    status: {
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      registration: {
        state: more.state ?? "Registered",
        since: T,
        ...(more.lastError ? { lastError: more.lastError } : {}),
      },
      advertised: devices.length,
      healthy: devices.filter((d) => d.health === "Healthy").length,
      ...(more.allocated === undefined ? {} : { allocated: more.allocated }),
      devices,
      updateTime: T,
    },
  };
}

function config(name: string, status: Partial<DevicePluginConfigStatus> = {}): ConfigObject {
  return {
    metadata: { name, generation: 1 },
    spec: { resourceName: "example.com/gpu" },
    status: {
      observedGeneration: 1,
      conditions: [{ type: "Ready", status: "True", reason: "Ready", message: "", lastTransitionTime: T }],
      ...status,
    },
  };
}

const rolling = config("gpu", {
  upgrade: {
    phase: "Progressing",
    currentRevision: "aaa",
    updateRevision: "bbb",
    updated: 1,
    total: 3,
    summary: "1/3",
    inFlight: ["n2"],
    failed: ["n4"],
    message: "node(s) n4 did not get the new plugin advertised within 60s",
  },
  problems: [{ node: "n3", reason: "UnhealthyDevices", message: "1 unhealthy", devices: ["d1"] }],
});

describe("nodeWaitReason", () => {
  it.each<[string, ConfigObject, string, V1Node | undefined, DeviceNodeState[], RegExp | ""]>([
    ["serving: nothing holds it", config("gpu"), "n1", node("n1"), [report("gpu", "n1", "aaa")], ""],
    ["the Node is gone", config("gpu"), "n1", undefined, [], /Node object is gone/],
    [
      "the node is not Ready, before anything else",
      rolling,
      "n2",
      node("n2", { ready: "Unknown" }),
      [],
      /not Ready \(Unknown\)/,
    ],
    ["the rollout failed on it", rolling, "n4", node("n4"), [], /rollout failed here: node\(s\) n4/],
    [
      "fenced by the config's Replace taint",
      rolling,
      "n2",
      node("n2", { taints: ["replace.dpo.dev/gpu"] }),
      [],
      /^fenced/,
    ],
    [
      "another config's fence is not this one's",
      rolling,
      "n1",
      node("n1", { taints: ["replace.dpo.dev/other"] }),
      [report("gpu", "n1", "bbb")],
      "",
    ],
    ["in flight", rolling, "n2", node("n2"), [], /moving it to revision bbb/],
    [
      "the operator's problem, with its devices",
      rolling,
      "n3",
      node("n3"),
      [report("gpu", "n3", "aaa")],
      /^UnhealthyDevices: 1 unhealthy \[d1\]$/,
    ],
    ["no report", config("gpu"), "n1", node("n1"), [], /no report from the plugin yet/],
    [
      "standing by",
      config("gpu"),
      "n1",
      node("n1"),
      [report("gpu", "n1", "bbb", { state: "StandingBy" })],
      /standing by/,
    ],
    [
      "one revision registered while the other stands by: serving",
      config("gpu"),
      "n1",
      node("n1"),
      [report("gpu", "n1", "bbb", { state: "StandingBy" }), report("gpu", "n1", "aaa")],
      "",
    ],
    [
      "not registered, with the kubelet's error",
      config("gpu"),
      "n1",
      node("n1"),
      [report("gpu", "n1", "aaa", { state: "NotRegistered", lastError: "connection refused" })],
      /not registered: connection refused/,
    ],
    [
      "cordoned",
      config("gpu"),
      "n1",
      node("n1", { unschedulable: true }),
      [report("gpu", "n1", "aaa")],
      /cordoned/,
    ],
  ])("%s", (_what, cfg, nodeName, n, reports, want) => {
    const reason = nodeWaitReason(cfg, nodeName, n, reports);
    if (want === "") expect(reason).toBe("");
    else expect(reason).toMatch(want);
  });
});

describe("formatStatus", () => {
  it("says so when there is no config", () => {
    expect(formatStatus([], [], [])).toBe("No DevicePluginConfigs found.\n");
  });

  it("prints a headline and a row per node and revision, with devices, allocations and holders", () => {
    const text = formatStatus(
      [rolling],
      [
        report("gpu", "n1", "bbb", {
          allocated: 1,
          devices: [device("d0"), device("d1", { heldBy: "DRA", replicas: 0 })],
        }),
        report("gpu", "n3", "aaa", {
          devices: [device("d0"), device("d1", { health: "Unhealthy", reason: "XID 79" })],
        }),
        report("other", "n1", "ccc"),
      ],
      [node("n1"), node("n2", { taints: ["replace.dpo.dev/gpu"] }), node("n3"), node("n4")],
    );
    const lines = text.split("\n");
    expect(lines[0]).toMatch(
      /^config gpu {2}example.com\/gpu {2}revision bbb \(Progressing from aaa: 1\/3\) {2}Ready=True$/,
    );
    const rows = lines.filter((l) => /^ {2}n\d/.test(l)).map((l) => l.trim().split(/ {2,}/));
    expect(rows).toEqual([
      ["n1", "bbb", "Registered", "2/2", "1", "DRA:1", "-"],
      ["n2", "-", "-", "-", "-", "-", "fenced: the rollout is replacing the plugin"],
      ["n3", "aaa", "Registered", "1/2", "-", "-", "UnhealthyDevices: 1 unhealthy [d1]"],
      ["n4", "-", "-", "-", "-", "-", expect.stringMatching(/^the rollout failed here/) as string],
    ]);
    expect(text).not.toContain("ccc");
  });
});

describe("formatNodeDescription", () => {
  it("lists every config on the node, each device with its health and reason", () => {
    const text = formatNodeDescription(
      "n3",
      node("n3", { taints: ["replace.dpo.dev/gpu"] }),
      [rolling, config("other"), config("elsewhere")],
      [
        report("gpu", "n3", "aaa", {
          devices: [device("d0"), device("d1", { health: "Unhealthy", reason: "XID 79" })],
        }),
        report("other", "n3", "ccc", { devices: [device("x0", { health: "Unhealthy" })] }),
        report("elsewhere", "n9", "ddd"),
      ],
    );
    expect(text).toContain("Taints: replace.dpo.dev/gpu:NoSchedule");
    expect(text).toContain("Config: gpu (example.com/gpu)");
    expect(text).toContain("Waiting: fenced: the rollout is replacing the plugin");
    expect(text).toMatch(/d1 +Unhealthy +1 +- +2026-01-01T00:00:00Z +XID 79/);
    expect(text).toContain("Config: other");
    expect(text).toMatch(/x0 +Unhealthy .* no reason given/);
    expect(text).not.toContain("elsewhere");
  });

  it("says when no config runs a plugin there", () => {
    expect(formatNodeDescription("n1", node("n1"), [config("gpu")], [])).toContain(
      "No DevicePluginConfig runs a plugin on this node.",
    );
  });
});

describe("formatTable", () => {
  it("pads each column to its widest cell, two spaces apart, no trailing blanks", () => {
    expect(
      formatTable(
        ["A", "LONGER"],
        [
          ["wide-cell", "x"],
          ["b", ""],
        ],
      ),
    ).toBe("A          LONGER\nwide-cell  x\nb\n");
  });
});
