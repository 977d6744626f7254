// The DeviceClass's extended resource name (KEP-5004): when it is rendered, the ExtendedResourceMapping
// condition that says why not, whether a switch to DRA may start, and how drift is judged with it.
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSchema, type DevicePluginConfig } from "../../../../src/api/v1beta1/config.js";
import { decideDeviceClass, renderDeviceClass } from "../../../../src/operator/controllers/dra.js";
import {
  EXTENDED_RESOURCE_MAPPING,
  extendedResourceMapping,
  extendedResourceNameKept,
  type ExtendedResourceFacts,
} from "../../../../src/operator/status/extended-resource.js";

function config(): DevicePluginConfig {
  return DevicePluginConfigSchema.parse({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "gpu", uid: "uid-1", generation: 1 },
    spec: {
      resourceName: "example.com/gpu",
      backend: { type: "Mock", mock: { devices: 2 } },
      publish: "DRA",
    },
  });
}

const SERVED: ExtendedResourceFacts = {
  resourceName: "example.com/gpu",
  resourceApiServed: true,
  fieldKept: true,
};

describe("extendedResourceMapping", () => {
  const cases: {
    name: string;
    facts: ExtendedResourceFacts;
    mapped: string | undefined;
    status: string;
    reason: string;
    mayStart: boolean;
    says: string;
  }[] = [
    {
      name: "maps the resource name where the API server keeps the field",
      facts: SERVED,
      mapped: "example.com/gpu",
      status: "True",
      reason: "ExtendedResourceMapped",
      mayStart: true,
      says: "maps example.com/gpu",
    },
    {
      name: "DevicePlugin mode where the field is kept: True, saying a switch would map the name",
      facts: { ...SERVED, publish: "DevicePlugin" },
      mapped: "example.com/gpu",
      status: "True",
      reason: "ExtendedResourceMapped",
      mayStart: true,
      says: "the device plugin serves example.com/gpu; the API server keeps DeviceClass spec.extendedResourceName, so after a switch to DRA",
    },
    {
      name: "DevicePlugin mode where the field is dropped: False, the device plugin keeps serving",
      facts: { ...SERVED, publish: "DevicePlugin", fieldKept: false },
      mapped: undefined,
      status: "False",
      reason: "ExtendedResourceUnsupported",
      mayStart: false,
      says: "the device plugin path keeps serving",
    },
    {
      name: "maps the name the user chose instead",
      facts: { ...SERVED, choice: "example.com/accelerator" },
      mapped: "example.com/accelerator",
      status: "True",
      reason: "ExtendedResourceMapped",
      mayStart: true,
      says: "maps example.com/accelerator",
    },
    {
      name: "the API server drops the field (1.35 defaults): no name, no switch",
      facts: { ...SERVED, fieldKept: false },
      mapped: undefined,
      status: "False",
      reason: "ExtendedResourceUnsupported",
      mayStart: false,
      says: "DRAExtendedResource is off",
    },
    {
      name: "not probed yet: Unknown, and the switch waits",
      facts: { ...SERVED, fieldKept: undefined },
      mapped: undefined,
      status: "Unknown",
      reason: "ExtendedResourceSupportUnknown",
      mayStart: false,
      says: "a switch to DRA waits",
    },
    {
      name: "resource.k8s.io/v1 not served",
      facts: { ...SERVED, resourceApiServed: false, fieldKept: undefined },
      mapped: undefined,
      status: "False",
      reason: "ResourceAPIUnavailable",
      mayStart: false,
      says: "does not serve resource.k8s.io/v1",
    },
    {
      name: "turned off by the user: no name, and the switch may start (pods use claims)",
      facts: { ...SERVED, choice: "", fieldKept: false },
      mapped: undefined,
      status: "False",
      reason: "ExtendedResourceMappingDisabled",
      mayStart: true,
      says: "spec.dra.deviceClass.extendedResourceName is empty",
    },
    {
      name: "a chosen name that is no extended resource name names the field",
      facts: { ...SERVED, choice: "kubernetes.io/gpu" },
      mapped: undefined,
      status: "False",
      reason: "InvalidExtendedResourceName",
      mayStart: false,
      says: 'spec.dra.deviceClass.extendedResourceName: "kubernetes.io/gpu" must not be in the kubernetes.io domain',
    },
  ];
  it.each(cases)("$name", ({ facts, mapped, status, reason, mayStart, says }) => {
    const got = extendedResourceMapping(facts);
    expect(got.name).toBe(mapped);
    expect(got.condition.type).toBe(EXTENDED_RESOURCE_MAPPING);
    expect(got.condition.status).toBe(status);
    expect(got.condition.reason).toBe(reason);
    expect(got.condition.message).toContain(says);
    expect(got.switchToDraMayStart).toBe(mayStart);
  });
});

describe("extendedResourceNameKept", () => {
  const sent = { spec: { extendedResourceName: "example.com/gpu" } };
  it.each([
    { name: "kept as sent", stored: { spec: { extendedResourceName: "example.com/gpu" } }, want: true },
    { name: "dropped by the API server", stored: { spec: {} }, want: false },
    { name: "no spec in the answer", stored: {}, want: false },
  ])("$name", ({ stored, want }) => {
    expect(extendedResourceNameKept(sent, stored)).toBe(want);
  });
  it("says nothing when nothing was sent", () => {
    expect(extendedResourceNameKept({ spec: {} }, { spec: {} })).toBeUndefined();
  });
});

describe("the DeviceClass with an extended resource name", () => {
  it("is rendered only when a name is given", () => {
    expect(renderDeviceClass(config()).spec).not.toHaveProperty("extendedResourceName");
    expect(renderDeviceClass(config(), "example.com/gpu").spec?.extendedResourceName).toBe("example.com/gpu");
  });

  const stored = (spec: Record<string, unknown>) => {
    const cls = renderDeviceClass(config());
    return { ...cls, metadata: { ...cls.metadata, resourceVersion: "7" }, spec: { ...cls.spec, ...spec } };
  };
  it.each([
    {
      name: "name wanted and stored",
      spec: { extendedResourceName: "example.com/gpu" },
      want: "example.com/gpu",
      kind: "None",
    },
    { name: "name wanted, stored without", spec: {}, want: "example.com/gpu", kind: "Update" },
    {
      name: "name wanted, another stored",
      spec: { extendedResourceName: "example.com/x" },
      want: "example.com/gpu",
      kind: "Update",
    },
    {
      name: "no name wanted, one stored (someone added it)",
      spec: { extendedResourceName: "example.com/gpu" },
      want: undefined,
      kind: "Update",
    },
    { name: "no name wanted, none stored", spec: {}, want: undefined, kind: "None" },
  ])("$name: $kind", ({ spec, want, kind }) => {
    const action = decideDeviceClass(config(), stored(spec), want);
    expect(action.kind).toBe(kind);
    if (action.kind === "Update") {
      expect(action.object.spec?.extendedResourceName).toBe(want);
      expect(action.object.metadata?.resourceVersion).toBe("7");
    }
  });

  it("a new class carries the name", () => {
    const action = decideDeviceClass(config(), undefined, "example.com/gpu");
    expect(action).toMatchObject({
      kind: "Create",
      object: { spec: { extendedResourceName: "example.com/gpu" } },
    });
  });
});
