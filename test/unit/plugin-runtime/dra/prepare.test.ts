// The DRA plugin's pure parts: device and file naming, the CDI kind, claim references, and the plan for
// preparing a claim (which results are ours, which are refused, the CDI spec and the answer).
import type { ResourceV1ResourceClaim } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { cdiTransientSpecFileName, type CdiContainerEdits } from "../../../../src/cdi/index.js";
import type { ContainerAllocation } from "../../../../src/plugin-runtime/devices/types.js";
import type { DraResourceClaim } from "../../../../src/plugin-runtime/dra/claim.js";
import {
  allocationEdits,
  draDeviceName,
  draDevicesOf,
  type DraNodeDevice,
} from "../../../../src/plugin-runtime/dra/devices.js";
import {
  baseRequestName,
  claimCdiDeviceName,
  claimReferenceProblem,
  claimSpecFileName,
  draCdiKind,
  planClaimPreparation,
  requestCdiDeviceName,
} from "../../../../src/plugin-runtime/dra/prepare.js";

describe("draDeviceName", () => {
  it.each([
    { id: "foo-0", name: "foo-0" },
    { id: "gpu0", name: "gpu0" },
    { id: "ttyUSB0", name: /^ttyusb0-[0-9a-f]{8}$/ },
    { id: "0000:3b:00.0", name: /^0000-3b-00-0-[0-9a-f]{8}$/ },
    { id: "foo-0::1", name: /^foo-0-1-[0-9a-f]{8}$/ },
    { id: "::", name: /^d-[0-9a-f]{8}$/ },
    { id: "x".repeat(70), name: new RegExp(`^x{54}-[0-9a-f]{8}$`) },
  ])("$id", ({ id, name }) => {
    const got = draDeviceName(id);
    if (typeof name === "string") expect(got).toBe(name);
    else expect(got).toMatch(name);
    // Always a DNS label, as ResourceSlice device names must be.
    expect(got).toMatch(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/);
  });

  it("gives ids that differ only in case or punctuation names of their own", () => {
    expect(draDeviceName("ttyUSB0")).not.toBe(draDeviceName("ttyusb0"));
    expect(draDeviceName("a:b")).not.toBe(draDeviceName("a.b"));
    expect(draDeviceName("ttyUSB0")).toBe(draDeviceName("ttyUSB0"));
  });
});

describe("draDevicesOf", () => {
  it("names the backend's devices, keeps their health, and leaves out a device without CDI edits", () => {
    const backend = {
      devices: () => [
        { id: "ttyUSB0", numaNode: undefined, health: "Healthy" as const, reason: "", attributes: {} },
        { id: "gone", numaNode: 0, health: "Unhealthy" as const, reason: "unplugged", attributes: {} },
        { id: "foo-1", numaNode: 0, health: "Unhealthy" as const, reason: "hot", attributes: {} },
      ],
      cdiContainerEdits: (id: string) => (id === "gone" ? undefined : { env: [`X=${id}`] }),
    };
    expect(draDevicesOf(backend)).toEqual([
      {
        name: draDeviceName("ttyUSB0"),
        physicalId: "ttyUSB0",
        health: "Healthy",
        reason: "",
        containerEdits: { env: ["X=ttyUSB0"] },
      },
      {
        name: "foo-1",
        physicalId: "foo-1",
        health: "Unhealthy",
        reason: "hot",
        containerEdits: { env: ["X=foo-1"] },
      },
    ]);
  });
});

describe("naming", () => {
  it.each([
    { driver: "foo.example.com", kind: "foo.example.com/device" },
    { driver: "gpu.vendor-x.io", kind: "gpu.vendor-x.io/device" },
  ])("draCdiKind($driver)", ({ driver, kind }) => {
    expect(draCdiKind(driver)).toEqual({ ok: true, kind });
  });

  it.each(["1foo.example.com", "foo.example.com-", ""])("draCdiKind refuses %j", (driver) => {
    expect(draCdiKind(driver)).toMatchObject({
      ok: false,
      problem: expect.stringContaining(`driver '${driver}'`),
    });
  });

  it.each([
    { kind: "foo.example.com/device", id: "uid-1", file: "foo.example.com-device_uid-1.json" },
    { kind: "vendor.example/foo", id: "a/b", file: "vendor.example-foo_a_b.json" },
  ])("cdiTransientSpecFileName($kind, $id)", ({ kind, id, file }) => {
    expect(cdiTransientSpecFileName(kind, id)).toBe(file);
  });

  it("claim spec files and CDI device names carry the claim uid", () => {
    expect(claimSpecFileName("foo.example.com/device", "0b5c")).toBe("foo.example.com-device_0b5c.json");
    expect(claimCdiDeviceName("0b5c", "foo-0")).toBe("0b5c-foo-0");
  });

  it.each([
    { request: "gpu", base: "gpu" },
    { request: "gpu/large", base: "gpu" },
    { request: "", base: "" },
  ])("baseRequestName($request)", ({ request, base }) => {
    expect(baseRequestName(request)).toBe(base);
  });

  it.each([
    { ref: { namespace: "ns", name: "c", uid: "0b5c6a9e-1c1f-4d53-9c2a-6f0c8d1e2f3a" }, problem: undefined },
    { ref: { namespace: "", name: "c", uid: "u" }, problem: "claim reference has no namespace" },
    { ref: { namespace: "", name: "", uid: "" }, problem: "claim reference has no namespace, name, uid" },
    { ref: { namespace: "ns", name: "c", uid: "../x" }, problem: 'claim uid "../x" is not a uid' },
    { ref: { namespace: "ns", name: "c", uid: "a/b" }, problem: 'claim uid "a/b" is not a uid' },
    { ref: { namespace: "ns", name: "c", uid: "u-" }, problem: 'claim uid "u-" is not a uid' },
    {
      ref: { namespace: "ns", name: "c", uid: "u".repeat(129) },
      problem: `claim uid "${"u".repeat(128)}" is not a uid`,
    },
  ])("claimReferenceProblem($ref.uid)", ({ ref, problem }) => {
    expect(claimReferenceProblem(ref)).toBe(problem);
  });
});

describe("planClaimPreparation", () => {
  const node = { driver: "foo.example.com", pool: "node-1", cdiKind: "foo.example.com/device" };
  const dev = (name: string, health: "Healthy" | "Unhealthy" = "Healthy", reason = ""): DraNodeDevice => ({
    name,
    physicalId: name,
    health,
    reason,
    containerEdits: { env: [`D=${name}`] },
  });
  const devices = new Map([dev("foo-0"), dev("foo-1"), dev("foo-2", "Unhealthy")].map((d) => [d.name, d]));
  const ref = { namespace: "ns", name: "c", uid: "uid-1" };
  const claimWith = (
    results: { request?: string; driver?: string; pool?: string; device: string }[],
    uid = "uid-1",
  ): DraResourceClaim => ({
    metadata: { namespace: "ns", name: "c", uid },
    status: {
      allocation: {
        devices: {
          results: results.map((r) => ({
            request: r.request ?? "r",
            driver: r.driver ?? node.driver,
            pool: r.pool ?? node.pool,
            device: r.device,
          })),
        },
      },
    },
  });

  it("prepares our results: one CDI entry per device, one answer entry per result", () => {
    const plan = planClaimPreparation(
      ref,
      claimWith([
        { request: "a", device: "foo-1" },
        { request: "b/x", device: "foo-0" },
        // The same device for a second request: answered twice, written once.
        { request: "c", device: "foo-0" },
      ]),
      node,
      devices,
    );
    expect(plan).toEqual({
      ok: true,
      fileName: "foo.example.com-device_uid-1.json",
      devices: [
        {
          requestNames: ["a"],
          poolName: "node-1",
          deviceName: "foo-1",
          cdiDeviceIds: ["foo.example.com/device=uid-1-foo-1"],
        },
        {
          requestNames: ["b"],
          poolName: "node-1",
          deviceName: "foo-0",
          cdiDeviceIds: ["foo.example.com/device=uid-1-foo-0"],
        },
        {
          requestNames: ["c"],
          poolName: "node-1",
          deviceName: "foo-0",
          cdiDeviceIds: ["foo.example.com/device=uid-1-foo-0"],
        },
      ],
      spec: {
        cdiVersion: "0.3.0",
        kind: "foo.example.com/device",
        devices: [
          { name: "uid-1-foo-0", containerEdits: { env: ["D=foo-0"] } },
          { name: "uid-1-foo-1", containerEdits: { env: ["D=foo-1"] } },
        ],
      },
    });
  });

  it("adds each request's edits as a whole once, named by the request's first answer entry", () => {
    const requestEdits = (ids: readonly string[]) => ({ env: [`IDS=${ids.join(",")}`] });
    const plan = planClaimPreparation(
      ref,
      claimWith([
        { request: "a", device: "foo-1" },
        { request: "a", device: "foo-0" },
        { request: "b/x", device: "foo-0" },
      ]),
      { ...node, requestEdits },
      devices,
    );
    expect(plan.ok && plan.devices.map((d) => d.cdiDeviceIds)).toEqual([
      ["foo.example.com/device=uid-1-foo-1", "foo.example.com/device=uid-1_a"],
      ["foo.example.com/device=uid-1-foo-0"],
      ["foo.example.com/device=uid-1-foo-0", "foo.example.com/device=uid-1_b"],
    ]);
    expect(plan.ok && plan.spec?.devices).toEqual([
      // The spec lists its devices by name (buildCdiSpec).
      { name: "uid-1_a", containerEdits: { env: ["IDS=foo-1,foo-0"] } },
      { name: "uid-1_b", containerEdits: { env: ["IDS=foo-0"] } },
      { name: "uid-1-foo-0", containerEdits: { env: ["D=foo-0"] } },
      { name: "uid-1-foo-1", containerEdits: { env: ["D=foo-1"] } },
    ]);
    // Device names are DNS labels: a request's entry can never take a device's name.
    expect(requestCdiDeviceName("uid-1", "foo-0")).not.toBe(claimCdiDeviceName("uid-1", "foo-0"));
  });

  it("adds no request entry when the request's edits are empty", () => {
    const plan = planClaimPreparation(
      ref,
      claimWith([{ request: "a", device: "foo-1" }]),
      {
        ...node,
        requestEdits: () => ({}),
      },
      devices,
    );
    expect(plan.ok && plan.devices.map((d) => d.cdiDeviceIds)).toEqual([
      ["foo.example.com/device=uid-1-foo-1"],
    ]);
    expect(plan.ok && plan.spec?.devices.map((d) => d.name)).toEqual(["uid-1-foo-1"]);
  });

  it.each([
    {
      case: "another driver's results only",
      claim: claimWith([{ driver: "other.example", device: "x" }]),
      plan: { ok: true, devices: [], spec: undefined, fileName: "foo.example.com-device_uid-1.json" },
    },
    {
      case: "no results at all",
      claim: claimWith([]),
      plan: { ok: true, devices: [], spec: undefined, fileName: "foo.example.com-device_uid-1.json" },
    },
    {
      case: "replaced claim",
      claim: claimWith([{ device: "foo-0" }], "uid-2"),
      plan: { ok: false, error: 'ResourceClaim ns/c has uid "uid-2", not uid-1: it was replaced' },
    },
    {
      case: "claim without uid",
      claim: { metadata: { name: "c" } },
      plan: { ok: false, error: 'ResourceClaim ns/c has uid "", not uid-1: it was replaced' },
    },
    {
      case: "not allocated",
      claim: { metadata: { uid: "uid-1" }, status: {} },
      plan: { ok: false, error: "ResourceClaim ns/c is not allocated" },
    },
    {
      case: "every bad device named",
      claim: claimWith([
        { device: "foo-0" },
        { device: "foo-9" },
        { device: "foo-2" },
        { device: "foo-1", pool: "node-7" },
        { driver: "other.example", device: "foo-9" },
      ]),
      plan: {
        ok: false,
        error:
          'ResourceClaim ns/c: device "foo-9" is not a device of foo.example.com on node-1; device "foo-2" is unhealthy; ' +
          'device "foo-1" is in pool "node-7", not this node\'s pool node-1',
      },
    },
  ])("$case", ({ claim, plan }) => {
    expect(planClaimPreparation(ref, claim, node, devices)).toEqual(plan);
  });

  it("says why an unhealthy device is unhealthy, and refuses a device whose edits a runtime would refuse", () => {
    const more = new Map([
      ["hot", dev("hot", "Unhealthy", "temperature 95C")],
      ["empty", { ...dev("empty"), containerEdits: {} }],
    ]);
    expect(planClaimPreparation(ref, claimWith([{ device: "hot" }]), node, more)).toEqual({
      ok: false,
      error: 'ResourceClaim ns/c: device "hot" is unhealthy: temperature 95C',
    });
    expect(planClaimPreparation(ref, claimWith([{ device: "empty" }]), node, more)).toEqual({
      ok: false,
      error:
        'ResourceClaim ns/c: device "empty": no container edits (runtimes refuse a device that changes nothing)',
    });
  });

  it("needs CDI 0.5.0 when the claim uid starts with a digit or a device node has a host path", () => {
    const digits = { ...ref, uid: "4f1b" };
    const plan = planClaimPreparation(digits, claimWith([{ device: "foo-0" }], "4f1b"), node, devices);
    expect(plan.ok && plan.spec?.cdiVersion).toBe("0.5.0");
    const withNode = new Map([
      ["n", { ...dev("n"), containerEdits: { deviceNodes: [{ path: "/dev/n", hostPath: "/dev/n0" }] } }],
    ]);
    const nodePlan = planClaimPreparation(ref, claimWith([{ device: "n" }]), node, withNode);
    expect(nodePlan.ok && nodePlan.spec?.cdiVersion).toBe("0.5.0");
  });

  it("takes a ResourceClaim as @kubernetes/client-node reads it", () => {
    const fromClient: ResourceV1ResourceClaim = {
      metadata: { namespace: "ns", name: "c", uid: "uid-1" },
      spec: {},
      status: {
        allocation: {
          devices: { results: [{ request: "r", driver: node.driver, pool: "node-1", device: "foo-0" }] },
        },
      },
    };
    const plan = planClaimPreparation(ref, fromClient, node, devices);
    expect(plan.ok).toBe(true);
  });
});

describe("allocationEdits", () => {
  const none: ContainerAllocation = { envs: {}, mounts: [], devices: [], annotations: {} };
  it.each<{ case: string; allocation: ContainerAllocation; edits: CdiContainerEdits }>([
    {
      case: "env only: the backend's and DPO_<RESOURCE> naming the ids",
      allocation: { ...none, envs: { MOCK_DEVICE_IDS: "s-1,s-2" } },
      edits: { env: ["MOCK_DEVICE_IDS=s-1,s-2", "DPO_VENDOR_EXAMPLE_GPU=s-1,s-2"] },
    },
    {
      case: "mounts keep their mode, device nodes their host path only where it differs",
      allocation: {
        ...none,
        mounts: [
          { containerPath: "/lib/x", hostPath: "/opt/x", readOnly: true },
          { containerPath: "/data", hostPath: "/data", readOnly: false },
        ],
        devices: [
          { containerPath: "/dev/foo0", hostPath: "/dev/foo0", permissions: "rw" },
          { containerPath: "/dev/bar", hostPath: "/dev/foo1", permissions: "rwm" },
        ],
        annotations: { "vendor.example/x": "dropped" },
      },
      edits: {
        env: ["DPO_VENDOR_EXAMPLE_GPU=s-1,s-2"],
        mounts: [
          { hostPath: "/opt/x", containerPath: "/lib/x", options: ["bind", "ro"] },
          { hostPath: "/data", containerPath: "/data", options: ["bind", "rw"] },
        ],
        deviceNodes: [
          { path: "/dev/foo0", permissions: "rw" },
          { path: "/dev/bar", hostPath: "/dev/foo1", permissions: "rwm" },
        ],
      },
    },
    {
      case: "the resource env wins over a backend env of the same name",
      allocation: { ...none, envs: { DPO_VENDOR_EXAMPLE_GPU: "other" } },
      edits: { env: ["DPO_VENDOR_EXAMPLE_GPU=s-1,s-2"] },
    },
  ])("$case", ({ allocation, edits }) => {
    expect(allocationEdits(allocation, "vendor.example/gpu", ["s-1", "s-2"])).toEqual(edits);
  });
});
