// decideRollout's gate: when a surged node counts as upgraded, from the Node's allocatable, or in DRA mode
// from the ResourceSlices the new plugin published.
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { DeviceNodeState } from "../../../../src/api/v1beta1/devicenodestate.js";
import { pluginRevision } from "../../../../src/operator/render/index.js";
import { serializeNodeRecord } from "../../../../src/operator/upgrade/node-labels.js";
import {
  config,
  ctx,
  decide,
  FRESH,
  KEYS,
  NEW,
  newRev,
  node,
  NOW,
  OLD,
  pod,
  recordWritten,
  report,
  stored,
  written,
} from "./rollout-support.js";

describe("decideRollout's gate", () => {
  it("holds at what the new plugin advertises when the spec itself advertises fewer devices", () => {
    // 6 devices before the node was touched; the new spec has 4, and the kubelet advertises those 4.
    const base = stored(OLD, "base");
    const next = stored(NEW, "moving", FRESH, "2026-11-02T00:00:00Z");
    const newPod = pod(next, "a");
    const surging = (allocatable: number) =>
      node("a", "v1.37.0", allocatable, { surge: newRev, record: { startedAt: NOW - 5_000, baseline: 6 } });
    const d = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [surging(4)],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod)],
    });
    expect(written(d)).toEqual(["Node a revision=NEW surge=-"]);
    // Below what the plugin itself advertises, the gate still waits.
    const short = decide({
      config: NEW,
      daemonSets: [base, next],
      nodes: [surging(3)],
      pods: [pod(base, "a"), newPod],
      reports: [report(NEW, newPod)],
    });
    expect(short.writes).toEqual([]);
  });
});

describe("decideRollout's gate in DRA mode: the published ResourceSlices instead of allocatable", () => {
  const DRA_OLD = config({ publish: "DRA", plugin: { logLevel: "info" } });
  const DRA_NEW = config({ publish: "DRA", plugin: { logLevel: "debug" } });
  const draOld = pluginRevision(DRA_OLD, ctx);
  const draNew = pluginRevision(DRA_NEW, ctx);
  const base = stored(DRA_OLD, "base");
  const next = stored(DRA_NEW, "moving", { from: draOld, rollingBack: false }, "2026-11-02T00:00:00Z");
  const draNode = (name: string, allocatable: number, surging: boolean): V1Node => {
    const n = node(name, "v1.37.0", allocatable, surging ? { surge: draNew } : {});
    if (surging) {
      n.metadata!.annotations = {
        [KEYS.upgrade]: serializeNodeRecord({
          from: draOld,
          to: draNew,
          startedAt: NOW - 5_000,
          baseline: 4,
        }),
      };
    }
    return n;
  };
  /** A registered new plugin on `a`, with `unhealthy` of its 4 devices unhealthy. */
  const newReport = (p: V1Pod, unhealthy = 0): DeviceNodeState => {
    const r = report(DRA_NEW, p);
    r.status!.healthy = 4 - unhealthy;
    r.status!.devices = Array.from({ length: 4 }, (_, i) => ({
      id: `d${i}`,
      health: i < unhealthy ? ("Unhealthy" as const) : ("Healthy" as const),
      replicas: 1,
      since: "2026-11-23T11:00:00Z",
    }));
    return r;
  };

  it("records the baseline from the node's published devices, not from a Node that advertises none", () => {
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [draNode("a", 0, false), draNode("b", 0, false)],
      pods: [pod(base, "a"), pod(base, "b")],
      reports: [],
      publishedDevices: new Map([
        ["a", 4],
        ["b", 4],
      ]),
    });
    expect(written(d)).toEqual([`Node a surge=${draNew} +record`]);
    expect(recordWritten(d, "a")).toEqual({ from: draOld, to: draNew, startedAt: NOW, baseline: 4 });
  });

  it.each<{
    case: string;
    published: number | undefined;
    allocatable: number;
    unhealthy: number;
    moves: boolean;
  }>([
    {
      case: "published back at the baseline: the node is upgraded",
      published: 4,
      allocatable: 0,
      unhealthy: 0,
      moves: true,
    },
    {
      case: "published below the baseline: it waits",
      published: 2,
      allocatable: 4,
      unhealthy: 0,
      moves: false,
    },
    {
      case: "no slice yet: it waits, whatever allocatable says",
      published: undefined,
      allocatable: 4,
      unhealthy: 0,
      moves: false,
    },
    {
      case: "below only by the unhealthy devices left out: upgraded",
      published: 3,
      allocatable: 0,
      unhealthy: 1,
      moves: true,
    },
    {
      case: "below by more than the unhealthy ones: it waits",
      published: 2,
      allocatable: 0,
      unhealthy: 1,
      moves: false,
    },
  ])("$case", ({ published, allocatable, unhealthy, moves }) => {
    const newPod = pod(next, "a");
    const d = decide({
      config: DRA_NEW,
      daemonSets: [base, next],
      nodes: [draNode("a", allocatable, true), draNode("b", 0, false)],
      pods: [pod(base, "a"), newPod, pod(base, "b")],
      reports: [newReport(newPod, unhealthy)],
      publishedDevices: new Map(
        published === undefined
          ? [["b", 4]]
          : [
              ["a", published],
              ["b", 4],
            ],
      ),
    });
    expect(written(d)).toEqual(moves ? [`Node a revision=${draNew} surge=-`] : []);
  });
});
