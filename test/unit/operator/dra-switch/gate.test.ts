// switchStartBlocked: whether a switch of the publish mode may start its nodes, and why not.
import { describe, expect, it } from "vitest";
import { switchStartBlocked, type SwitchGateInput } from "../../../../src/operator/dra-switch/gate.js";
import { extendedResourceMapping } from "../../../../src/operator/status/extended-resource.js";

describe("switchStartBlocked: whether a switch's nodes may start", () => {
  const mapped = {
    switchToDraMayStart: true,
    status: "True",
    reason: "ExtendedResourceMapped",
    message: "m",
  };
  const off = {
    switchToDraMayStart: false,
    status: "False",
    reason: "ExtendedResourceUnsupported",
    message: "the API server drops it",
  };
  const cases: { name: string; input: SwitchGateInput; blocked: RegExp | undefined }[] = [
    { name: "no switch (DRA upgrade)", input: { from: "DRA", to: "DRA", mapping: off }, blocked: undefined },
    {
      name: "no switch (device plugin upgrade)",
      input: { from: "DevicePlugin", to: "DevicePlugin", mapping: undefined },
      blocked: undefined,
    },
    {
      name: "to DRA, mapping True",
      input: { from: "DevicePlugin", to: "DRA", mapping: mapped },
      blocked: undefined,
    },
    {
      name: "to DRA, mapping False",
      input: { from: "DevicePlugin", to: "DRA", mapping: off },
      blocked:
        /waits for ExtendedResourceMapping \(now False, ExtendedResourceUnsupported: the API server drops it\); the device plugin keeps serving/,
    },
    {
      name: "to DRA, mapping not judged",
      input: { from: "DevicePlugin", to: "DRA", mapping: undefined },
      blocked: /not known yet.*device plugin keeps serving/,
    },
    {
      name: "back to the device plugin, mapping False",
      input: { from: "DRA", to: "DevicePlugin", mapping: off },
      blocked: undefined,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = switchStartBlocked(c.input);
      if (c.blocked === undefined) expect(got).toBeUndefined();
      else expect(got).toMatch(c.blocked);
    });
  }

  // The gate read through the condition the reconciler computes, for each cluster the docs name.
  const clusters: {
    name: string;
    served: boolean;
    kept: boolean | undefined;
    mayStart: boolean;
    reason: string;
  }[] = [
    {
      name: "1.37: the field is kept",
      served: true,
      kept: true,
      mayStart: true,
      reason: "ExtendedResourceMapped",
    },
    {
      name: "1.35 default: the field is dropped",
      served: true,
      kept: false,
      mayStart: false,
      reason: "ExtendedResourceUnsupported",
    },
    {
      name: "no probe answered yet",
      served: true,
      kept: undefined,
      mayStart: false,
      reason: "ExtendedResourceSupportUnknown",
    },
    {
      name: "resource.k8s.io/v1 not served",
      served: false,
      kept: undefined,
      mayStart: false,
      reason: "ResourceAPIUnavailable",
    },
  ];
  for (const c of clusters) {
    it(`through ExtendedResourceMapping: ${c.name}`, () => {
      const m = extendedResourceMapping({
        resourceName: "example.com/gpu",
        publish: "DRA",
        resourceApiServed: c.served,
        fieldKept: c.kept,
      });
      const got = switchStartBlocked({
        from: "DevicePlugin",
        to: "DRA",
        mapping: { switchToDraMayStart: m.switchToDraMayStart, ...m.condition },
      });
      expect(m.condition.reason).toBe(c.reason);
      if (c.mayStart) expect(got).toBeUndefined();
      else expect(got).toContain(c.reason);
    });
  }
});
