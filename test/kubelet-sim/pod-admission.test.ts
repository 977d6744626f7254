// The simulated kubelet's admission rules as pure functions: which pods it runs instead of KWOK, what
// each container asks of the device manager, and the statuses it writes.
import type { V1Container, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { reportsDeviceHealthInPodStatus } from "../../tools/kubelet-sim/kubelet-rules.js";
import {
  allocatedResourcesStatus,
  containerDeviceRequests,
  rejectedPodStatus,
  runningPodStatus,
  simulatorRunsPod,
  unexpectedAdmissionMessage,
} from "../../tools/kubelet-sim/pod-admission.js";

function pod(containers: V1Container[], extra: Partial<V1Pod> = {}): V1Pod {
  return { metadata: { name: "p", namespace: "ns", uid: "u" }, spec: { containers }, ...extra };
}

const container = (
  name: string,
  limits?: Record<string, string>,
  requests?: Record<string, string>,
): V1Container => ({
  name,
  image: "img",
  resources: { ...(limits ? { limits } : {}), ...(requests ? { requests } : {}) },
});

describe("simulatorRunsPod", () => {
  it.each([
    {
      name: "a plugin pod",
      pod: pod([container("c")], { metadata: { labels: { "app.kubernetes.io/name": "dpo-plugin" } } }),
      want: true,
    },
    {
      name: "a pod asking for an extended resource in its limits",
      pod: pod([container("c", { "example.com/foo": "1" })]),
      want: true,
    },
    {
      name: "a pod asking in its requests only",
      pod: pod([container("c", undefined, { "example.com/foo": "1" })]),
      want: true,
    },
    {
      name: "an init container asking",
      pod: {
        ...pod([container("c")]),
        spec: { containers: [container("c")], initContainers: [container("i", { "example.com/foo": "1" })] },
      },
      want: true,
    },
    {
      name: "native resources only (cpu, memory, hugepages)",
      pod: pod([container("c", { cpu: "1", memory: "1Gi", "hugepages-2Mi": "2Mi" })]),
      want: false,
    },
    { name: "no resources", pod: pod([{ name: "c" }]), want: false },
  ])("$name: $want", ({ pod, want }) => {
    expect(simulatorRunsPod(pod)).toBe(want);
  });
});

describe("containerDeviceRequests", () => {
  it("lists init containers first, from limits, extended resources only, sorted by name", () => {
    const p: V1Pod = {
      metadata: { name: "p" },
      spec: {
        initContainers: [
          container("setup", { "example.com/foo": "2" }),
          { ...container("sidecar", { "example.com/bar": "1" }), restartPolicy: "Always" },
        ],
        containers: [container("main", { "example.com/foo": "1", cpu: "2", "b.example/x": "3" })],
      },
    };
    expect(containerDeviceRequests(p)).toEqual([
      { name: "setup", init: true, restartable: false, resources: [["example.com/foo", 2]] },
      { name: "sidecar", init: true, restartable: true, resources: [["example.com/bar", 1]] },
      {
        name: "main",
        init: false,
        restartable: false,
        resources: [
          ["b.example/x", 3],
          ["example.com/foo", 1],
        ],
      },
    ]);
  });
});

describe("pod statuses", () => {
  it("a rejected pod is Failed with the kubelet's reason and message", () => {
    expect(rejectedPodStatus("UnexpectedAdmissionError", unexpectedAdmissionMessage("boom"))).toEqual({
      phase: "Failed",
      reason: "UnexpectedAdmissionError",
      message: "Pod was rejected: Allocate failed due to boom, which is unexpected",
    });
  });

  it.each([
    {
      name: "ready",
      ready: true,
      exited: undefined,
      want: { ready: "True", started: true, state: "running" },
    },
    {
      name: "not ready yet",
      ready: false,
      exited: undefined,
      want: { ready: "False", started: true, state: "running" },
    },
    {
      name: "exited: not ready whatever the probe said",
      ready: true,
      exited: { exitCode: 137, reason: "Error" },
      want: { ready: "False", started: false, state: "terminated" },
    },
  ])("a running pod, $name", ({ ready, exited, want }) => {
    const p = pod([container("c")], { spec: { containers: [container("c")], hostNetwork: true } });
    const status = runningPodStatus(p, { now: "t1", startedAt: "t0", hostIP: "10.0.0.1", ready, exited });
    expect(status.phase).toBe("Running");
    expect(status.podIP).toBe("10.0.0.1");
    expect(status.conditions?.find((c) => c.type === "Ready")?.status).toBe(want.ready);
    expect(status.conditions?.find((c) => c.type === "ContainersReady")?.status).toBe(want.ready);
    const c = status.containerStatuses?.[0];
    expect({ started: c?.started, state: Object.keys(c?.state ?? {})[0] }).toEqual({
      started: want.started,
      state: want.state,
    });
    expect(c?.ready).toBe(want.ready === "True");
  });
});

describe("allocatedResourcesStatus", () => {
  it("lists each resource a container holds with every device's health, as the kubelet's device manager does", () => {
    const health: Record<string, string> = { "a/x::foo-1": "Unhealthy" };
    expect(
      allocatedResourcesStatus(
        { "a/x": ["foo-1", "foo-0"], "b/y": ["bar-0"], "c/z": [] },
        (r, id) => health[`${r}::${id}`] ?? "Healthy",
      ),
    ).toEqual([
      {
        name: "a/x",
        resources: [
          { resourceID: "foo-0", health: "Healthy" },
          { resourceID: "foo-1", health: "Unhealthy" },
        ],
      },
      { name: "b/y", resources: [{ resourceID: "bar-0", health: "Healthy" }] },
    ]);
  });

  it("counts a device the kubelet no longer knows as Healthy, as the kubelet does", () => {
    expect(allocatedResourcesStatus({ "a/x": ["gone"] }, () => undefined)).toEqual([
      { name: "a/x", resources: [{ resourceID: "gone", health: "Healthy" }] },
    ]);
  });

  it.each([
    ["v1.35.4", false],
    ["v1.36.0", true],
    ["v1.37.2+k3s1", true],
    ["not-a-version", true],
  ])("a %s kubelet writes device health in pod status: %s", (version, want) => {
    expect(reportsDeviceHealthInPodStatus(version)).toBe(want);
  });
});
