import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { SelfHealEvents } from "../../../../src/operator/status/self-heals.js";

const NOW = Date.parse("2026-01-01T12:00:00Z");
const MESSAGE = "kubelet advertised 0 of 4 healthy devices for 30 s; registered again";

function report(
  node: string,
  heal?: { count: number; lastTime: string; healedTime?: string },
): DeviceNodeState {
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name: `gpu-${node}` },
    spec: { configName: "gpu", nodeName: node, resourceName: "example.com/gpu" },
    status: {
      pluginVersion: "v",
      kubeletAPIVersion: "v1beta1",
      registration: {
        state: "Registered",
        since: "2026-01-01T11:00:00Z",
        ...(heal ? { selfHeal: { ...heal, message: MESSAGE } } : {}),
      },
      advertised: 4,
      healthy: 4,
      devices: [],
      updateTime: "2026-01-01T11:59:00Z",
    },
  };
}

describe("SelfHealEvents", () => {
  it("a Warning naming the node when the plugin registered again, a Normal one once healed, each once", () => {
    const e = new SelfHealEvents();
    expect(e.events("gpu", [report("n1")], NOW)).toEqual([]);
    const healing = report("n1", { count: 1, lastTime: "2026-01-01T11:59:30Z" });
    expect(e.events("gpu", [healing], NOW)).toEqual([
      { type: "Warning", reason: "CapacityLost", message: `node n1: ${MESSAGE}` },
    ]);
    expect(e.events("gpu", [healing], NOW)).toEqual([]);
    const healed = report("n1", {
      count: 1,
      lastTime: "2026-01-01T11:59:30Z",
      healedTime: "2026-01-01T11:59:31.5Z",
    });
    expect(e.events("gpu", [healed], NOW)).toEqual([
      {
        type: "Normal",
        reason: "CapacityRestored",
        message:
          "node n1: the kubelet lists every healthy device again, 1.5 s after the plugin registered again (1 self-heals since it started)",
      },
    ]);
    expect(e.events("gpu", [healed], NOW)).toEqual([]);
  });

  it("a heal already over when first seen gives both events; the next heal on the node gives them again", () => {
    const e = new SelfHealEvents();
    const first = report("n2", {
      count: 1,
      lastTime: "2026-01-01T11:58:00Z",
      healedTime: "2026-01-01T11:58:01Z",
    });
    expect(e.events("gpu", [first], NOW).map((x) => x.reason)).toEqual(["CapacityLost", "CapacityRestored"]);
    const second = report("n2", { count: 2, lastTime: "2026-01-01T11:59:00Z" });
    expect(e.events("gpu", [second], NOW).map((x) => x.reason)).toEqual(["CapacityLost"]);
  });

  it("a heal older than the window, first seen after an operator restart, is history: no event", () => {
    const e = new SelfHealEvents();
    const old = report("n3", {
      count: 1,
      lastTime: "2026-01-01T11:00:00Z",
      healedTime: "2026-01-01T11:00:01Z",
    });
    expect(e.events("gpu", [old], NOW)).toEqual([]);
  });

  it("forgets a deleted config's nodes", () => {
    const e = new SelfHealEvents();
    const r = report("n4", { count: 1, lastTime: "2026-01-01T11:59:30Z" });
    expect(e.events("gpu", [r], NOW)).toHaveLength(1);
    e.forget("gpu");
    expect(e.events("gpu", [r], NOW)).toHaveLength(1);
  });
});
