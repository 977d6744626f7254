// Which nodes a config's plugin runs on: selector matching and taints, by the DaemonSet controller's rule.
import type { V1Node, V1Taint, V1Toleration } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { Toleration } from "../../../../src/api/v1beta1/spec.js";
import {
  nodeMatchesSelector,
  pluginRunsOnNode,
  toleratesTaint,
} from "../../../../src/operator/model/targeting.js";

function node(labels: Record<string, string>, taints: V1Taint[] = []): V1Node {
  return { metadata: { name: "n1", labels }, spec: { taints } };
}

describe("nodeMatchesSelector", () => {
  it.each<{ labels: Record<string, string>; selector: Record<string, string>; want: boolean }>([
    { labels: {}, selector: {}, want: true },
    { labels: { a: "1" }, selector: {}, want: true },
    { labels: { a: "1", b: "2" }, selector: { a: "1" }, want: true },
    { labels: { a: "1" }, selector: { a: "2" }, want: false },
    { labels: { a: "1" }, selector: { a: "1", b: "2" }, want: false },
    { labels: { a: "" }, selector: { a: "" }, want: true },
    { labels: {}, selector: { a: "" }, want: false },
  ])("labels $labels, selector $selector → $want", ({ labels, selector, want }) => {
    expect(nodeMatchesSelector(node(labels), selector)).toBe(want);
  });

  it("treats a node without labels as having none", () => {
    expect(nodeMatchesSelector({ metadata: { name: "bare" } }, {})).toBe(true);
    expect(nodeMatchesSelector({ metadata: { name: "bare" } }, { a: "1" })).toBe(false);
  });
});

describe("toleratesTaint", () => {
  const taint: V1Taint = { key: "gpu", value: "yes", effect: "NoSchedule" };
  it.each<{ toleration: V1Toleration; want: boolean }>([
    { toleration: { operator: "Exists" }, want: true },
    { toleration: { key: "gpu", operator: "Exists" }, want: true },
    { toleration: { key: "gpu", operator: "Equal", value: "yes" }, want: true },
    { toleration: { key: "gpu", value: "yes", effect: "NoSchedule" }, want: true },
    { toleration: { key: "gpu", operator: "Equal", value: "no" }, want: false },
    { toleration: { key: "gpu", operator: "Exists", effect: "NoExecute" }, want: false },
    { toleration: { key: "other", operator: "Exists" }, want: false },
  ])("$toleration → $want", ({ toleration, want }) => {
    expect(toleratesTaint(toleration, taint)).toBe(want);
  });
});

describe("pluginRunsOnNode", () => {
  const controlPlane: V1Taint = { key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" };
  it.each<{ name: string; taints: V1Taint[]; tolerations: Toleration[]; want: boolean }>([
    { name: "untainted node", taints: [], tolerations: [], want: true },
    { name: "control plane, not tolerated", taints: [controlPlane], tolerations: [], want: false },
    {
      name: "control plane, tolerated",
      taints: [controlPlane],
      tolerations: [{ key: "node-role.kubernetes.io/control-plane", operator: "Exists" }],
      want: true,
    },
    {
      name: "cordoned (daemon pods tolerate it)",
      taints: [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }],
      tolerations: [],
      want: true,
    },
    {
      name: "not ready (NoExecute, daemon pods tolerate it)",
      taints: [{ key: "node.kubernetes.io/not-ready", effect: "NoExecute" }],
      tolerations: [],
      want: true,
    },
    {
      name: "PreferNoSchedule never keeps a daemon pod away",
      taints: [{ key: "x", effect: "PreferNoSchedule" }],
      tolerations: [],
      want: true,
    },
    {
      name: "a rollout's Replace fence, this config's or another's, keeps the node targeted",
      taints: [{ key: "replace.dpo.dev/other-config", effect: "NoSchedule", value: "abc" }],
      tolerations: [],
      want: true,
    },
    {
      name: "custom NoExecute taint",
      taints: [{ key: "x", effect: "NoExecute" }],
      tolerations: [],
      want: false,
    },
  ])("$name → $want", ({ taints, tolerations, want }) => {
    expect(pluginRunsOnNode(node({ a: "1" }, taints), { nodeSelector: { a: "1" }, tolerations })).toBe(want);
  });

  it("needs the selector to match first", () => {
    expect(pluginRunsOnNode(node({ a: "2" }), { nodeSelector: { a: "1" }, tolerations: [] })).toBe(false);
  });
});
