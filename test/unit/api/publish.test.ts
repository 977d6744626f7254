// spec.publish and spec.dra: the driver and DeviceClass names a spec gives, in both API versions.
import { describe, expect, it } from "vitest";
import { validateAnyVersion } from "../../../src/api/validate.js";
import {
  checkDefaultDriverName,
  defaultDriverName,
  draDeviceClassName,
  draDriverName,
} from "../../../src/api/v1beta1/spec.js";

describe("the default DRA driver name", () => {
  it.each([
    ["nvidia.com/gpu", "gpu.nvidia.com", true],
    ["vendor.example/foo", "foo.vendor.example", true],
    ["vendor.example/Foo", "Foo.vendor.example", false],
    ["vendor.example/a_b", "a_b.vendor.example", false],
    ["vendor.example/a.b-c", "a.b-c.vendor.example", true],
    [`vendor.example/${"g".repeat(49)}`, `${"g".repeat(49)}.vendor.example`, false],
  ])("%s gives %s (usable: %s)", (resource, driver, usable) => {
    expect(defaultDriverName(resource)).toBe(driver);
    expect(checkDefaultDriverName(resource) === undefined).toBe(usable);
  });

  it("names the default it cannot use", () => {
    expect(checkDefaultDriverName("vendor.example/Foo")).toBe(
      'must be set: the default "Foo.vendor.example" from the resource name is not a lowercase DNS subdomain of at most 63 characters',
    );
  });

  it("is replaced by the spec's driver name, and the class defaults to the driver", () => {
    const spec = { resourceName: "vendor.example/foo" };
    expect(draDriverName(spec)).toBe("foo.vendor.example");
    expect(draDeviceClassName(spec)).toBe("foo.vendor.example");
    const named = { ...spec, dra: { driverName: "d.vendor.example", deviceClass: { selectors: [] } } };
    expect(draDriverName(named)).toBe("d.vendor.example");
    expect(draDeviceClassName(named)).toBe("d.vendor.example");
    const classed = { ...spec, dra: { deviceClass: { name: "big", selectors: [] } } };
    expect(draDeviceClassName(classed)).toBe("big");
  });
});

const manifest = (apiVersion: string, spec: Record<string, unknown>) => ({
  apiVersion: `dpo.dev/${apiVersion}`,
  kind: "DevicePluginConfig",
  metadata: { name: "x" },
  spec,
});

describe("publish validation in both versions", () => {
  const beta = { resourceName: "vendor.example/foo", backend: { type: "Mock", mock: { devices: 1 } } };
  const alpha = { resourceName: "vendor.example/foo", backend: "Mock", mock: { devices: 1 } };
  it.each([
    ["v1beta1", { ...beta }, []],
    ["v1beta1", { ...beta, publish: "DRA" }, []],
    // Time-slicing means the same in both modes (a device shared by several allocations in DRA mode), so
    // switching is one field.
    ["v1beta1", { ...beta, publish: "DRA", sharing: { strategy: "TimeSlicing", replicas: 2 } }, []],
    ["v1beta1", { ...beta, publish: "DevicePlugin", sharing: { strategy: "TimeSlicing", replicas: 2 } }, []],
    ["v1beta1", { ...beta, resourceName: "vendor.example/Foo", publish: "DRA" }, ["spec.dra.driverName"]],
    ["v1beta1", { ...beta, resourceName: "vendor.example/Foo", publish: "DevicePlugin" }, []],
    [
      "v1beta1",
      {
        ...beta,
        resourceName: "vendor.example/Foo",
        publish: "DRA",
        dra: { driverName: "foo.vendor.example" },
      },
      [],
    ],
    ["v1beta1", { ...beta, publish: "DRA", dra: { driverName: "Foo" } }, ["spec.dra.driverName"]],
    [
      "v1beta1",
      { ...beta, publish: "DRA", dra: { deviceClass: { selectors: [{ cel: { expression: "" } }] } } },
      ["spec.dra.deviceClass.selectors[0].cel.expression"],
    ],
    ["v1alpha1", { ...alpha, publish: "DRA" }, []],
    ["v1alpha1", { ...alpha, publish: "DRA", sharedDevNum: 2 }, []],
    ["v1alpha1", { ...alpha, publish: "DRA", sharedDevNum: 0 }, ["spec.sharedDevNum"]],
    ["v1alpha1", { ...alpha, publish: "DRA", sharedDevNum: 1 }, []],
    ["v1alpha1", { ...alpha, resourceName: "vendor.example/Foo", publish: "DRA" }, ["spec.dra.driverName"]],
  ])("%s %j refuses %j", (version, spec, paths) => {
    const result = validateAnyVersion(manifest(version, spec));
    expect(result.ok ? [] : result.errors.map((e) => e.path)).toEqual(paths);
  });
});
