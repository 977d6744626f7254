// Pods the kubelet rejected at admission (UnexpectedAdmissionError, as after a node reboot on the device
// plugin path): which the operator keeps and indexes, and how a config's status, Event and metric name them.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  admissionRejectedProblem,
  NAMED_PODS,
  rejectedPodsByNode,
  rejectedResources,
  slimFailedPodForCache,
} from "../../../../src/operator/status/admission-rejections.js";
import { aggregateStatus } from "../../../../src/operator/status/aggregate.js";
import { configSeries } from "../../../../src/operator/status/config-series.js";
import { condition, config, input, RESOURCE, three } from "./aggregate-support.js";

function failed(name: string, node: string, reason: string, limits: Record<string, string>): V1Pod {
  return {
    metadata: { name, namespace: "team", uid: `uid-${name}`, labels: { app: "x" }, annotations: { a: "b" } },
    spec: {
      nodeName: node,
      containers: [
        { name: "main", image: "busybox", env: [{ name: "A", value: "1" }], resources: { limits } },
      ],
    },
    status: {
      phase: "Failed",
      reason,
      message: `Pod was rejected: Allocate failed due to cannot allocate unregistered device ${RESOURCE}, which is unexpected`,
      hostIP: "10.0.0.1",
    },
  };
}

const rejected = (name: string, node = "n1"): V1Pod =>
  failed(name, node, "UnexpectedAdmissionError", { [RESOURCE]: "1", cpu: "1" });

describe("pods rejected at admission", () => {
  it("keeps only a failed pod's name, node, requests and reason", () => {
    expect(slimFailedPodForCache(rejected("a"))).toEqual({
      metadata: { name: "a", namespace: "team", uid: "uid-a" },
      spec: {
        nodeName: "n1",
        containers: [{ name: "main", resources: { limits: { [RESOURCE]: "1", cpu: "1" } } }],
      },
      status: { phase: "Failed", reason: "UnexpectedAdmissionError", message: rejected("a").status!.message },
    });
  });

  it("indexes a rejected pod by the extended resources it asked for, and no other failed pod", () => {
    expect(rejectedResources(rejected("a"))).toEqual([RESOURCE]);
    expect(rejectedResources(failed("b", "n1", "Evicted", { [RESOURCE]: "1" }))).toEqual([]);
    expect(rejectedResources(failed("c", "n1", "UnexpectedAdmissionError", { cpu: "1" }))).toEqual([]);
  });

  it("groups the pods rejected for a resource by node", () => {
    const pods = [
      rejected("b", "n2"),
      rejected("a", "n2"),
      rejected("c", "n1"),
      failed("d", "n1", "UnexpectedAdmissionError", { "other.example/x": "1" }),
    ];
    expect(rejectedPodsByNode(pods, RESOURCE)).toEqual(
      new Map([
        ["n2", ["team/a", "team/b"]],
        ["n1", ["team/c"]],
      ]),
    );
  });

  it("names at most NAMED_PODS pods, counts the rest and points to DRA", () => {
    const names = Array.from({ length: NAMED_PODS + 3 }, (_, i) => `team/p${i}`);
    const problem = admissionRejectedProblem("n1", names);
    expect(problem.reason).toBe("AdmissionRejected");
    expect(problem.message).toContain(`rejected ${NAMED_PODS + 3} pod(s)`);
    expect(problem.message).toContain(`team/p${NAMED_PODS - 1} and 3 more`);
    expect(problem.message).not.toContain(`team/p${NAMED_PODS},`);
    expect(problem.message).toContain("publish: DRA");
    expect(admissionRejectedProblem("n1", [`team/${"x".repeat(2000)}`]).message!.length).toBe(1024);
  });

  it("reports the rejected pods of a healthy node in the status, an Event and the metric's count", () => {
    const cfg = config();
    const result = aggregateStatus(
      input(cfg, three(), {
        admissionRejections: new Map([
          ["n2", ["team/a", "team/b"]],
          ["elsewhere", ["team/z"]],
        ]),
      }),
    );
    expect(result.status.problems).toEqual([admissionRejectedProblem("n2", ["team/a", "team/b"])]);
    expect(condition(result.status, "Degraded")).toMatchObject({
      status: "True",
      reason: "AdmissionRejected",
    });
    expect(result.events).toContainEqual(
      expect.objectContaining({
        type: "Warning",
        reason: "AdmissionRejected",
        message: expect.stringContaining("node n2: the kubelet rejected 2 pod(s)") as unknown,
      }),
    );
    // Only the targeted nodes' pods count.
    expect(result.admissionRejectedPods).toBe(2);
    expect(configSeries(result.status, result.problemCounts, result.admissionRejectedPods)).toMatchObject({
      admissionRejectedPods: 2,
      problemNodes: { AdmissionRejected: 1 },
    });
  });

  it("leaves a node's own problem first: the rejections show once the plugin registered", () => {
    const cfg = config();
    const { status } = aggregateStatus(
      input(cfg, three({ n2: { report: { state: "NotRegistered" } } }), {
        admissionRejections: new Map([["n2", ["team/a"]]]),
      }),
    );
    expect(status.problems?.map((p) => `${p.node}/${p.reason}`)).toEqual(["n2/PluginNotRegistered"]);
  });
});
