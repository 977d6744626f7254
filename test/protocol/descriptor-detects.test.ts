// The .proto comparison detects a changed contract: of the device plugin and registration services, of
// PodResources and of DRA, so the match in test/protocol/descriptor.test.ts proves something.
import { readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import {
  locateUpstreamProtoFiles,
  OUR_PROTO_FILES,
  type UpstreamProtoFiles,
} from "../../tools/proto/upstream.js";
import {
  repoRoot,
  describeContract,
  diffContracts,
  parseProtoText,
  loadProtoFile,
} from "./descriptor-support.js";

let upstream: UpstreamProtoFiles;

beforeAll(() => {
  upstream = locateUpstreamProtoFiles();
});

describe("the comparison detects a changed contract", () => {
  // Each mutation breaks one aspect of our device-plugin file; the diff must name the element.
  const mutations = [
    {
      aspect: "field number",
      from: "int32 allocation_size = 3;",
      to: "int32 allocation_size = 4;",
      expectedKey: "message v1beta1.ContainerPreferredAllocationRequest field allocation_size",
    },
    {
      aspect: "field name case",
      from: "string ID = 1;",
      to: "string id = 1;",
      expectedKey: "message v1beta1.Device field ID",
    },
    {
      aspect: "scalar type",
      from: "int64 ID = 1;",
      to: "int32 ID = 1;",
      expectedKey: "message v1beta1.NUMANode field ID",
    },
    {
      aspect: "message type",
      from: "repeated Mount mounts = 2;",
      to: "repeated DeviceSpec mounts = 2;",
      expectedKey: "message v1beta1.ContainerAllocateResponse field mounts",
    },
    {
      aspect: "repeated label",
      from: "repeated string deviceIDs = 1;",
      to: "string deviceIDs = 1;",
      expectedKey: "message v1beta1.ContainerPreferredAllocationResponse field deviceIDs",
    },
    {
      aspect: "map value type",
      from: "map<string, string> annotations = 4;",
      to: "map<string, bytes> annotations = 4;",
      expectedKey: "message v1beta1.ContainerAllocateResponse field annotations",
    },
    {
      aspect: "oneof",
      from: "string health = 2;",
      to: "oneof state { string health = 2; }",
      expectedKey: "message v1beta1.Device oneof state",
    },
    {
      aspect: "server streaming",
      from: "returns (stream ListAndWatchResponse)",
      to: "returns (ListAndWatchResponse)",
      expectedKey: "service v1beta1.DevicePlugin method ListAndWatch",
    },
    {
      aspect: "request type",
      from: "rpc Allocate(AllocateRequest)",
      to: "rpc Allocate(PreStartContainerRequest)",
      expectedKey: "service v1beta1.DevicePlugin method Allocate",
    },
    {
      aspect: "package name",
      from: "package v1beta1;",
      to: "package deviceplugin.v1beta1;",
      expectedKey: "service v1beta1.DevicePlugin method Allocate",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.devicePlugin), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.devicePlugin));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});

describe("the comparison detects a changed PodResources contract", () => {
  const mutations = [
    {
      aspect: "field number after a removed field",
      from: "string claim_name = 2;",
      to: "string claim_name = 1;",
      expectedKey: "message v1.DynamicResource field claim_name",
    },
    {
      aspect: "field name",
      from: "repeated string device_ids = 2;",
      to: "repeated string deviceIDs = 2;",
      expectedKey: "message v1.ContainerDevices field device_ids",
    },
    {
      aspect: "unsigned scalar",
      from: "uint64 size = 2;",
      to: "int64 size = 2;",
      expectedKey: "message v1.ContainerMemory field size",
    },
    {
      aspect: "method",
      from: "rpc Get(GetPodResourcesRequest) returns (GetPodResourcesResponse) {}",
      to: "",
      expectedKey: "service v1.PodResourcesLister method Get",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.podResources), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.podResources));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});

describe("the comparison detects a changed DRA contract", () => {
  const mutations = [
    {
      aspect: "field number",
      from: "repeated string cdi_device_ids = 4;",
      to: "repeated string cdi_device_ids = 6;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Device field cdi_device_ids",
    },
    {
      aspect: "field name",
      from: "string uid = 2;",
      to: "string UID = 2;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Claim field uid",
    },
    {
      // Only gogoproto options are left out of the comparison; any other option still counts.
      aspect: "an option that is not gogoproto's",
      from: "string uid = 2;",
      to: "string uid = 2 [deprecated = true];",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.Claim field uid",
    },
    {
      aspect: "map value type",
      from: "map<string, NodeUnprepareResourceResponse> claims = 1;",
      to: "map<string, NodePrepareResourceResponse> claims = 1;",
      expectedKey: "message k8s.io.kubelet.pkg.apis.dra.v1.NodeUnprepareResourcesResponse field claims",
    },
    {
      aspect: "package name",
      from: "package k8s.io.kubelet.pkg.apis.dra.v1;",
      to: "package v1;",
      expectedKey: "service k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin method NodePrepareResources",
    },
  ];

  it.each(mutations)("$aspect", ({ from, to, expectedKey }) => {
    const ourText = readFileSync(path.join(repoRoot, OUR_PROTO_FILES.draV1), "utf8");
    expect(ourText, `mutation source text not found: ${from}`).toContain(from);
    const mutated = describeContract(parseProtoText(ourText.replace(from, to)));
    const upstreamContract = describeContract(loadProtoFile(upstream.draV1));

    const diff = diffContracts(upstreamContract, mutated);
    expect(
      diff.some((line) => line.includes(`${expectedKey}:`)),
      diff.join("\n"),
    ).toBe(true);
  });
});
