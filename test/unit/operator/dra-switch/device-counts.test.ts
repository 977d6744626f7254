// The device counts during a publish switch: each node's are those of its plugin's path.
import { describe, expect, it } from "vitest";
import {
  kubeletTruth,
  nodeDeviceCounts,
  type DeviceTruth,
  type PathTruth,
} from "../../../../src/operator/status/node-health.js";

describe("device counts during a switch: each node on its plugin's path", () => {
  const node = (name: string, allocatable?: string) => ({
    metadata: { name },
    status:
      allocatable === undefined
        ? {}
        : { capacity: { "x/gpu": allocatable }, allocatable: { "x/gpu": allocatable } },
  });
  const truth: DeviceTruth = {
    kind: "PerNode",
    byNode: new Map<string, PathTruth>([["on-dp", kubeletTruth("x/gpu")]]),
    rest: { kind: "ResourceSlices", driver: "x.example", published: new Map([["on-dra", 2]]) },
  };
  const cases: { name: string; node: ReturnType<typeof node>; allocatable: number | undefined }[] = [
    {
      name: "a node whose device plugin still runs: its allocatable",
      node: node("on-dp", "4"),
      allocatable: 4,
    },
    { name: "a node on DRA: its slices, not a stale allocatable", node: node("on-dra", "4"), allocatable: 2 },
    { name: "a node with neither", node: node("between"), allocatable: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(nodeDeviceCounts(c.node, truth).allocatable).toBe(c.allocatable);
    });
  }
});
