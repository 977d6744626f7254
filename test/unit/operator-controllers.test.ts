// Pure pieces of the operator's controller: drift detection and which node updates matter.
import type { V1Node } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { containsDesired } from "../../src/operator/controllers/drift.js";
import { nodeChangeMatters, ownerConfigName } from "../../src/operator/controllers/mapping.js";

describe("containsDesired", () => {
  it.each([
    ["equal scalars", 1, 1, true],
    ["different scalars", 1, 2, false],
    ["int-or-string", 8080, "8080", true],
    ["extra server fields are fine", { a: 1 }, { a: 1, b: 2 }, true],
    ["missing field", { a: 1, b: 2 }, { a: 1 }, false],
    ["zero value dropped by omitempty", { readOnly: false, n: 0, s: "" }, {}, true],
    ["empty object absent", { annotations: {} }, {}, true],
    ["empty array absent", { tolerations: [] }, {}, true],
    ["array length differs", { a: [1, 2] }, { a: [1] }, false],
    ["array element differs", { a: [{ x: 1 }] }, { a: [{ x: 2 }] }, false],
    ["array elements with server defaults", { a: [{ x: 1 }] }, { a: [{ x: 1, y: "default" }] }, true],
    ["object vs scalar", { a: { b: 1 } }, { a: 1 }, false],
    ["nothing cached", { a: 1 }, undefined, false],
    [
      "drift in a nested field",
      { spec: { template: { image: "a" } } },
      { spec: { template: { image: "b" } } },
      false,
    ],
  ])("%s", (_name, desired, actual, want) => {
    expect(containsDesired(desired, actual)).toBe(want);
  });
});

function node(
  patch: Partial<{
    labels: Record<string, string>;
    ready: string;
    capacity: Record<string, string>;
    heartbeat: string;
    taints: { key: string; effect: string }[];
  }>,
): V1Node {
  return {
    metadata: { name: "n", labels: patch.labels ?? { a: "1" } },
    spec: { taints: patch.taints },
    status: {
      capacity: patch.capacity ?? { cpu: "4" },
      allocatable: patch.capacity ?? { cpu: "4" },
      conditions: [
        {
          type: "Ready",
          status: patch.ready ?? "True",
          lastHeartbeatTime: new Date(patch.heartbeat ?? "2026-01-01T00:00:00Z"),
        },
      ],
    },
  };
}

describe("nodeChangeMatters", () => {
  it.each([
    ["heartbeat only", node({}), node({ heartbeat: "2026-01-01T00:00:10Z" }), false],
    ["label change", node({}), node({ labels: { a: "2" } }), true],
    ["Ready flips", node({}), node({ ready: "False" }), true],
    ["capacity of a resource", node({}), node({ capacity: { cpu: "4", "vendor.example/foo": "4" } }), true],
    ["taint added", node({}), node({ taints: [{ key: "k", effect: "NoSchedule" }] }), true],
  ])("%s", (_name, old, cur, want) => {
    expect(nodeChangeMatters(old, cur)).toBe(want);
  });
});

describe("ownerConfigName", () => {
  it("finds the DevicePluginConfig owner and ignores others", () => {
    expect(
      ownerConfigName({
        ownerReferences: [
          { apiVersion: "apps/v1", kind: "DaemonSet", name: "x", uid: "1" },
          { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", name: "foo", uid: "2" },
        ],
      }),
    ).toBe("foo");
    expect(ownerConfigName({ ownerReferences: [] })).toBeUndefined();
    expect(ownerConfigName(undefined)).toBeUndefined();
  });
});
