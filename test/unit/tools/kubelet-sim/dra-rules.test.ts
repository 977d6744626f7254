// The kubelet simulator's DRA rules: the service a kubelet of each version chooses, the claims of a pod
// and which driver each goes to.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  chooseDraService,
  claimsByDriver,
  isReservedForPod,
  kubeletDraServices,
  kubeletMinor,
  podClaimNames,
  type ClaimForPrepare,
} from "../../../../tools/kubelet-sim/dra-rules.js";
import {
  containerDeviceRequests,
  simulatorRunsPod,
  usesResourceClaims,
} from "../../../../tools/kubelet-sim/pod-admission.js";
import { rewritePluginArgs, simulatedPluginEnv } from "../../../../tools/kubelet-sim/plugin-pod.js";

const BOTH = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

describe("the DRA service a kubelet chooses", () => {
  it("reads the minor version of kubeletVersion", () => {
    expect(kubeletMinor("v1.34.4")).toBe(34);
    expect(kubeletMinor("v1.33.0-kwok")).toBe(33);
    expect(kubeletMinor("1.32")).toBe(32);
    expect(kubeletMinor("garbage")).toBeUndefined();
  });

  it.each([
    ["v1.34.4", BOTH, "v1.DRAPlugin"],
    // 1.34 follows the plugin's order.
    ["v1.34.4", ["v1beta1.DRAPlugin", "v1.DRAPlugin"], "v1beta1.DRAPlugin"],
    ["v1.34.4", ["v1beta1.DRAPlugin"], "v1beta1.DRAPlugin"],
    ["v1.34.4", ["v2.DRAPlugin", "v1.DRAPlugin"], "v1.DRAPlugin"],
    // 1.32 and 1.33 know no v1: the first of their own list the plugin offers.
    ["v1.33.2", BOTH, "v1beta1.DRAPlugin"],
    ["v1.32.0", BOTH, "v1beta1.DRAPlugin"],
    // An unreadable version is taken for the pinned 1.34.
    ["", BOTH, "v1.DRAPlugin"],
  ])("%s with %j → %s", (version, offered, service) => {
    expect(chooseDraService(version, offered)).toEqual({ service });
  });

  it("refuses a plugin that offers nothing the kubelet speaks, with the kubelet's message", () => {
    expect(chooseDraService("v1.33.2", ["v1.DRAPlugin"])).toEqual({
      error:
        'none of services supported by the plugin (["v1.DRAPlugin"]) are supported by the kubelet (["v1beta1.DRAPlugin"])',
    });
    expect(chooseDraService("v1.34.4", [])).toEqual({
      error: "empty list of supported gRPC services (aka supported versions)",
    });
    expect(kubeletDraServices("v1.34.0")).toEqual(BOTH);
  });
});

const pod = (spec: Partial<V1Pod["spec"]>, status: V1Pod["status"] = {}): V1Pod => ({
  metadata: { name: "p", namespace: "ns", uid: "pod-uid" },
  spec: { containers: [{ name: "c" }], ...spec },
  status,
});

describe("a pod's claims", () => {
  it("names claims directly or through the controller's status; a template not made yet has no name", () => {
    const p = pod(
      {
        resourceClaims: [
          { name: "direct", resourceClaimName: "shared" },
          { name: "made", resourceClaimTemplateName: "t" },
          { name: "pending", resourceClaimTemplateName: "t" },
          { name: "none-needed", resourceClaimTemplateName: "t" },
        ],
      },
      {
        resourceClaimStatuses: [{ name: "made", resourceClaimName: "p-made-x7k2q" }, { name: "none-needed" }],
      },
    );
    expect(podClaimNames(p)).toEqual([
      { podClaimName: "direct", claimName: "shared" },
      { podClaimName: "made", claimName: "p-made-x7k2q" },
      { podClaimName: "pending", claimName: undefined },
    ]);
  });

  it("sends each claim to every driver with a result in it, in the claims' order", () => {
    const claim = (name: string, drivers: string[]): ClaimForPrepare => ({
      metadata: { name },
      status: { allocation: { devices: { results: drivers.map((driver) => ({ driver })) } } },
    });
    const a = claim("a", ["foo.example.com", "foo.example.com"]);
    const b = claim("b", ["bar.example.com", "foo.example.com"]);
    const c = claim("c", []);
    expect(claimsByDriver([a, b, c])).toEqual(
      new Map([
        ["foo.example.com", [a, b]],
        ["bar.example.com", [b]],
      ]),
    );
  });

  it("checks the claim is reserved for the pod by uid", () => {
    const p = pod({});
    expect(
      isReservedForPod(p, { status: { reservedFor: [{ resource: "pods", name: "p", uid: "pod-uid" }] } }),
    ).toBe(true);
    expect(
      isReservedForPod(p, { status: { reservedFor: [{ resource: "pods", name: "p", uid: "other" }] } }),
    ).toBe(false);
    expect(isReservedForPod(p, {})).toBe(false);
  });

  it("pods with claims are the simulator's to run", () => {
    expect(simulatorRunsPod(pod({ resourceClaims: [{ name: "x", resourceClaimTemplateName: "t" }] }))).toBe(
      true,
    );
    expect(simulatorRunsPod(pod({}))).toBe(false);
  });
});

describe("a pod whose extended resource the scheduler mapped to DRA (KEP-5004)", () => {
  const GPU = "example.com/gpu";
  const NIC = "example.com/nic";
  const asking = pod({
    containers: [
      { name: "a", resources: { limits: { [GPU]: "1", [NIC]: "2" } } },
      { name: "b", resources: { limits: { [GPU]: "2" } } },
    ],
  });
  const mapped = (status: object): V1Pod =>
    ({ ...asking, status: { extendedResourceClaimStatus: status } }) as unknown as V1Pod;
  const gpuToDra = mapped({
    resourceClaimName: "p-extended-resources-x7k2q",
    requestMappings: [{ containerName: "a", resourceName: GPU, requestName: "container-0-request-0" }],
  });

  it.each([
    [
      "no status: the device manager's",
      asking,
      [
        [
          [GPU, 1],
          [NIC, 2],
        ],
        [[GPU, 2]],
      ],
      false,
      [],
    ],
    // A name mapped once is DRA's in every container; the other name stays the device manager's.
    [
      "the gpu mapped: DRA's, and its claim prepared",
      gpuToDra,
      [[[NIC, 2]], []],
      true,
      [{ podClaimName: "p-extended-resources-x7k2q", claimName: "p-extended-resources-x7k2q" }],
    ],
    // No claim name: nothing is mapped (the kubelet's extendedResourceAllocationModeForPod).
    [
      "a status without a claim name: ignored",
      mapped({ requestMappings: [{ containerName: "a", resourceName: GPU }] }),
      [
        [
          [GPU, 1],
          [NIC, 2],
        ],
        [[GPU, 2]],
      ],
      false,
      [],
    ],
  ])("%s", (_what, p, devices, claims, names) => {
    expect(containerDeviceRequests(p).map((c) => c.resources)).toEqual(devices);
    expect(usesResourceClaims(p)).toBe(claims);
    expect(podClaimNames(p)).toEqual(names);
  });
});

describe("a plugin process's DRA plugins directory", () => {
  const paths = {
    configFile: "/n/config",
    devicePluginDir: "/n/dp",
    pluginsRegistryDir: "/n/reg",
    draPluginsDir: "/n/plugins",
  };
  it("reaches the process through DPO_DRA_PLUGINS_DIR, never as an added flag (older builds refuse unknown flags)", () => {
    expect(simulatedPluginEnv(paths)).toEqual({ DPO_DRA_PLUGINS_DIR: "/n/plugins" });
    expect(rewritePluginArgs(["plugin"], paths)).not.toContain("--dra-plugins-dir");
  });
  it("replaces the flag where the pod's args name it", () => {
    expect(rewritePluginArgs(["plugin", "--dra-plugins-dir=/var/lib/kubelet/plugins"], paths)).toContain(
      "--dra-plugins-dir=/n/plugins",
    );
  });
});
