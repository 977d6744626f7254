// The config reconciler records a plugin's self-heal as Events on the config, once each, even when the
// config's status stays as it was.
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../../../src/contract/node-state.js";
import { config, NS, setup } from "./reconciler-support.js";

const NOW = "2026-01-01T00:00:00Z";

function report(node: string, healedTime?: string): DeviceNodeState {
  const name = deviceNodeStateName("foo", node);
  return {
    apiVersion: "dpo.dev/v1beta1",
    kind: "DeviceNodeState",
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: { configName: "foo", nodeName: node, resourceName: "vendor.example/foo" },
    status: {
      pluginVersion: "0.1.0",
      kubeletAPIVersion: "v1beta1",
      registration: {
        state: "Registered",
        since: NOW,
        selfHeal: {
          count: 1,
          lastTime: NOW,
          message: "kubelet advertised 0 of 4 healthy devices for 30 s; registered again",
          ...(healedTime !== undefined ? { healedTime } : {}),
        },
      },
      advertised: 4,
      healthy: 4,
      devices: [],
      updateTime: NOW,
    },
  };
}

describe("ConfigReconciler", () => {
  it("records CapacityLost, then CapacityRestored once healed, each once across passes", async () => {
    const t = setup();
    t.configs.put(config("foo", NOW, { nodeSelector: { "feature.example/foo": "true" } }));
    t.nodes.put({ metadata: { name: "n1", labels: { "feature.example/foo": "true" } } });
    t.reports.put(report("n1"));
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("foo");
    expect(t.events.filter((e) => e.includes("Capacity"))).toEqual(["Warning/CapacityLost"]);
    t.reports.put(report("n1", "2026-01-01T00:00:01Z"));
    await t.reconciler.reconcile("foo");
    await t.reconciler.reconcile("foo");
    expect(t.events.filter((e) => e.includes("Capacity"))).toEqual([
      "Warning/CapacityLost",
      "Normal/CapacityRestored",
    ]);
  });
});
