// aggregateStatus's informational conditions for DRA: DRASharing (whether a time-sliced config's devices
// are shared) and ExtendedResourceMapping (whether the DeviceClass maps the resource name).
import { describe, expect, it } from "vitest";
import { type DevicePluginConfigStatus } from "../../../../src/api/v1beta1/status.js";
import { aggregateStatus } from "../../../../src/operator/status/aggregate.js";
import {
  condition,
  conditionSummary,
  configWith,
  input,
  RESOURCE,
  T0,
  versions,
} from "./aggregate-support.js";

describe("aggregateStatus: version-dependent features say in the status why they are off", () => {
  describe("DRASharing: whether a time-sliced DRA config's devices are shared (informational)", () => {
    const draInput = (sharing: Record<string, unknown>) => ({
      ...input(
        configWith({ publish: "DRA", sharing }),
        versions("v1.37.2", "v1.37.2", "v1.37.2").map((s) => ({
          ...s,
          capacity: undefined,
          allocatable: undefined,
        })),
      ),
      deviceTruth: {
        kind: "ResourceSlices" as const,
        driver: "foo.hardware-vendor.example",
        published: new Map(Object.entries({ n1: 4, n2: 4, n3: 4 })),
        // Each published device is one device for `replicas` claims, as the reports count replicas.
        sharesPerDevice: typeof sharing.replicas === "number" ? sharing.replicas : 1,
      },
      resourceApiServed: true,
    });
    it.each([
      { kept: true, want: "DRASharing=True/SharedAllocations" },
      { kept: false, want: "DRASharing=False/SharedAllocationsUnsupported" },
      { kept: undefined, want: "DRASharing=Unknown/SharedAllocationsUnknown" },
    ])("kept $kept: $want, and Ready, Stalled and the events stay as they were", ({ kept, want }) => {
      const base = draInput({ strategy: "TimeSlicing", replicas: 4 });
      const without = aggregateStatus(draInput({ strategy: "None" }));
      const { status, events } = aggregateStatus({ ...base, sharedAllocationsKept: kept });
      expect(conditionSummary(status)).toEqual([...conditionSummary(without.status), want]);
      expect(events).toEqual(without.events);
      expect(condition(status, "Ready").status).toBe("True");
      expect(condition(status, "Stalled").status).toBe("False");
    });

    it("counts a time-sliced published device once per share, or the nodes read as mismatched", () => {
      const base = draInput({ strategy: "TimeSlicing", replicas: 4 });
      const unscaled = aggregateStatus({
        ...base,
        deviceTruth: { ...base.deviceTruth, sharesPerDevice: undefined },
        sharedAllocationsKept: true,
      });
      expect(condition(unscaled.status, "Degraded").reason).toBe("CapacityMismatch");
    });

    it("is not set on a config that does not time-slice, nor in DevicePlugin mode", () => {
      for (const config of [
        configWith({ publish: "DRA" }),
        configWith({ sharing: { strategy: "TimeSlicing", replicas: 4 } }),
      ]) {
        const { status } = aggregateStatus({
          ...input(config, versions("v1.37.2", "v1.37.2", "v1.37.2")),
          resourceApiServed: config.spec.publish === "DRA" ? true : undefined,
          sharedAllocationsKept: false,
        });
        expect(status.conditions?.map((c) => c.type)).not.toContain("DRASharing");
      }
    });
  });

  describe("ExtendedResourceMapping: whether the DeviceClass maps the resource name (informational)", () => {
    const DRIVER = "foo.hardware-vendor.example";
    const draTruth = {
      deviceTruth: {
        kind: "ResourceSlices" as const,
        driver: DRIVER,
        published: new Map(Object.entries({ n1: 4, n2: 4, n3: 4 })),
      },
    };
    const draNodes = versions("v1.37.2", "v1.37.2", "v1.37.2").map((s) => ({
      ...s,
      capacity: undefined,
      allocatable: undefined,
    }));
    const cases: {
      name: string;
      publish: "DevicePlugin" | "DRA";
      resourceApiServed: boolean;
      fieldKept: boolean | undefined;
      want: string;
      says: string;
    }[] = [
      {
        name: "DRA, the field kept (1.37): True, the class maps the name",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: true,
        want: "ExtendedResourceMapping=True/ExtendedResourceMapped",
        says: `the DeviceClass maps ${RESOURCE}`,
      },
      {
        name: "DRA, the field dropped (1.35 defaults): False, unsupported",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: false,
        want: "ExtendedResourceMapping=False/ExtendedResourceUnsupported",
        says: "feature gate DRAExtendedResource is off",
      },
      {
        name: "DRA, not probed yet: Unknown",
        publish: "DRA",
        resourceApiServed: true,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=Unknown/ExtendedResourceSupportUnknown",
        says: "not known yet",
      },
      {
        name: "DRA, resource.k8s.io/v1 not served: False (Stalled comes from DRAPublishing alone)",
        publish: "DRA",
        resourceApiServed: false,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=False/ResourceAPIUnavailable",
        says: "does not serve resource.k8s.io/v1",
      },
      {
        name: "DevicePlugin, the field kept: True, a switch to DRA would map the name",
        publish: "DevicePlugin",
        resourceApiServed: true,
        fieldKept: true,
        want: "ExtendedResourceMapping=True/ExtendedResourceMapped",
        says: `spec.publish is DevicePlugin, so the device plugin serves ${RESOURCE}`,
      },
      {
        name: "DevicePlugin, the field dropped: False, the device plugin keeps serving",
        publish: "DevicePlugin",
        resourceApiServed: true,
        fieldKept: false,
        want: "ExtendedResourceMapping=False/ExtendedResourceUnsupported",
        says: "the device plugin path keeps serving",
      },
      {
        name: "DevicePlugin, resource.k8s.io/v1 not served: False, and the config is not Stalled",
        publish: "DevicePlugin",
        resourceApiServed: false,
        fieldKept: undefined,
        want: "ExtendedResourceMapping=False/ResourceAPIUnavailable",
        says: "the device plugin path keeps serving it",
      },
    ];
    it.each(cases)("$name", ({ publish, resourceApiServed, fieldKept, want, says }) => {
      const base =
        publish === "DRA"
          ? {
              ...input(configWith({ publish: "DRA" }), draNodes),
              ...draTruth,
              resourceApiServed,
            }
          : input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2"));
      const without = aggregateStatus(base);
      const { status, events } = aggregateStatus({
        ...base,
        extendedResource: { resourceApiServed, fieldKept },
      });
      // The condition is added last; every other condition and the events stay as they were without it.
      expect(conditionSummary(status)).toEqual([...conditionSummary(without.status), want]);
      expect(conditionSummary(without.status)).not.toContain(want);
      expect(events).toEqual(without.events);
      expect(condition(status, "ExtendedResourceMapping")).toMatchObject({ observedGeneration: 2 });
      expect(condition(status, "ExtendedResourceMapping").message).toContain(says);
      if (publish === "DevicePlugin") {
        expect(condition(status, "Ready").status).toBe("True");
        expect(condition(status, "Stalled").status).toBe("False");
      }
    });

    it("is not set while the config yields its resource name to another", () => {
      const { status } = aggregateStatus({
        ...input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2")),
        conflictWith: "other",
        extendedResource: { resourceApiServed: true, fieldKept: true },
      });
      expect(status.conditions?.map((c) => c.type)).not.toContain("ExtendedResourceMapping");
    });

    it("keeps its transition time while it stays, and takes a new one when it turns", () => {
      const base = input(configWith({}), versions("v1.37.2", "v1.37.2", "v1.37.2"));
      const first = aggregateStatus({
        ...base,
        extendedResource: { resourceApiServed: true, fieldKept: undefined },
      }).status;
      const later = new Date(T0.getTime() + 60_000);
      const same = aggregateStatus({
        ...base,
        previous: first,
        now: later,
        extendedResource: { resourceApiServed: true, fieldKept: undefined },
      }).status;
      const turned = aggregateStatus({
        ...base,
        previous: first,
        now: later,
        extendedResource: { resourceApiServed: true, fieldKept: true },
      }).status;
      const at = (st: DevicePluginConfigStatus) =>
        condition(st, "ExtendedResourceMapping").lastTransitionTime;
      expect(at(same)).toBe(at(first));
      expect(at(turned)).toBe(later.toISOString().replace(/\.\d{3}Z$/, "Z"));
    });
  });
});
