// Allocate checks (what a request may ask for, and why one is refused) and the natural order of device ids.
import { describe, expect, it } from "vitest";
import type { Sharing } from "../../../../src/api/v1beta1/spec.js";
import {
  checkAllocateRequest,
  describeAllocateRejection,
  type AllocateRejection,
} from "../../../../src/plugin-runtime/devices/allocation.js";
import { naturalCompare } from "../../../../src/plugin-runtime/devices/policies.js";
import { timeSlicing, node } from "./allocation-support.js";

describe("checkAllocateRequest", () => {
  const devices = node(
    [
      ["foo-0", 0],
      ["foo-1", 1, false],
      ["foo-2", 0],
    ],
    timeSlicing(3),
  );

  it.each([
    {
      name: "replicas of two devices: the distinct physical devices, first seen first",
      ids: ["foo-2::1", "foo-0::0", "foo-2::0"],
      sharing: timeSlicing(3),
      want: { kind: "Ok", physicalIds: ["foo-2", "foo-0"] },
    },
    { name: "no ids", ids: [], sharing: timeSlicing(3), want: { kind: "Empty" } },
    {
      name: "ids that were never advertised",
      ids: ["ghost::0", "foo-0::0", "foo-9::1", "ghost::0"],
      sharing: timeSlicing(3),
      want: { kind: "Unknown", ids: ["ghost::0", "foo-9::1"] },
    },
    {
      name: "the same id twice",
      ids: ["foo-0::1", "foo-2::0", "foo-0::1"],
      sharing: timeSlicing(3),
      want: { kind: "Duplicate", ids: ["foo-0::1"] },
    },
    {
      name: "more than one replica when failRequestsGreaterThanOne is set",
      ids: ["foo-0::0", "foo-2::0"],
      sharing: timeSlicing(3, true),
      want: { kind: "TooManyReplicas", requested: 2 },
    },
    {
      name: "one replica when failRequestsGreaterThanOne is set",
      ids: ["foo-0::2"],
      sharing: timeSlicing(3, true),
      want: { kind: "Ok", physicalIds: ["foo-0"] },
    },
    {
      name: "failRequestsGreaterThanOne only applies to shared devices",
      ids: ["foo-0::0", "foo-2::0"],
      sharing: { strategy: "None", failRequestsGreaterThanOne: true } satisfies Sharing,
      want: { kind: "Ok", physicalIds: ["foo-0", "foo-2"] },
    },
    {
      name: "a replica of an unhealthy device",
      ids: ["foo-0::0", "foo-1::2"],
      sharing: timeSlicing(3),
      want: { kind: "Unhealthy", ids: ["foo-1::2"] },
    },
    {
      name: "unknown ids are reported before unhealthy ones",
      ids: ["foo-1::0", "nope"],
      sharing: timeSlicing(3),
      want: { kind: "Unknown", ids: ["nope"] },
    },
    {
      name: "too many replicas is reported before unhealthy ones",
      ids: ["foo-1::0", "foo-1::1"],
      sharing: timeSlicing(3, true),
      want: { kind: "TooManyReplicas", requested: 2 },
    },
  ])("$name", ({ ids, sharing, want }) => {
    expect(checkAllocateRequest(ids, devices, sharing)).toEqual(want);
  });

  it.each<{ rejection: AllocateRejection; want: RegExp }>([
    { rejection: { kind: "Empty" }, want: /no device ids/ },
    { rejection: { kind: "Unknown", ids: ["a", "b"] }, want: /unknown device ids: a, b/ },
    { rejection: { kind: "Duplicate", ids: ["a"] }, want: /more than once: a/ },
    {
      rejection: { kind: "TooManyReplicas", requested: 3 },
      want: /3 shared devices.*failRequestsGreaterThanOne/,
    },
    { rejection: { kind: "Unhealthy", ids: ["foo-1::2"] }, want: /unhealthy devices: foo-1::2/ },
  ])("describes $rejection.kind", ({ rejection, want }) => {
    expect(describeAllocateRejection(rejection)).toMatch(want);
  });
});

describe("naturalCompare", () => {
  it.each([
    { list: ["dev-10", "dev-2", "dev-1"], want: ["dev-1", "dev-2", "dev-10"] },
    {
      list: ["foo-1::10", "foo-1::9", "foo-10::0", "foo-9::3"],
      want: ["foo-1::9", "foo-1::10", "foo-9::3", "foo-10::0"],
    },
    { list: ["a01", "a1", "a001", "a2"], want: ["a001", "a01", "a1", "a2"] },
    { list: ["b", "a10", "a", "a9b"], want: ["a", "a9b", "a10", "b"] },
    {
      list: ["x99999999999999999999", "x100000000000000000000", "x9007199254740993"],
      want: ["x9007199254740993", "x99999999999999999999", "x100000000000000000000"],
    },
  ])("$list", ({ list, want }) => {
    expect([...list].sort(naturalCompare)).toEqual(want);
  });
});
