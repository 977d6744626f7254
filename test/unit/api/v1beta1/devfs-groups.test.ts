// DevFS device groups in the spec (ADR 0010): what v1beta1 accepts, the errors naming the field, and
// v1alpha1, which lacks the fields and carries them in the conversion annotation.
import { describe, expect, it } from "vitest";
import { toV1alpha1, toV1beta1, type BetaObject } from "../../../../src/api/conversion/index.js";
import {
  validateDevicePluginConfig,
  validateDevicePluginConfigV1alpha1,
} from "../../../../src/api/validate.js";

const beta = (devFS: Record<string, unknown>): BetaObject => ({
  apiVersion: "dpo.dev/v1beta1" as const,
  kind: "DevicePluginConfig" as const,
  metadata: { name: "amd" },
  spec: { resourceName: "amd.com/gpu", backend: { type: "DevFS", devFS: devFS as { paths: [] } } },
});
const paths = [{ glob: "/dev/dri/card*" }, { glob: "/dev/dri/renderD*" }];

function errors(devFS: Record<string, unknown>): string[] {
  const result = validateDevicePluginConfig(beta(devFS));
  return result.ok ? [] : result.errors.map((e) => `${e.path}: ${e.message}`);
}

describe("DevFS groups in v1beta1", () => {
  it("accepts a group by PCI function with sysfs, a vendor and a shared node", () => {
    const devFS = {
      sysfsRoot: "/sys",
      pciVendor: "1002",
      paths,
      groupBy: { key: "PCIAddress" },
      sharedPaths: [{ glob: "/dev/kfd" }],
    };
    expect(errors(devFS)).toEqual([]);
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      "a sysfs key without sysfsRoot",
      { paths, groupBy: { key: "PCISlot" } },
      "spec.backend.devFS.sysfsRoot: must be set when groupBy.key is PCISlot",
    ],
    [
      "pciVendor without sysfsRoot",
      { paths, pciVendor: "1002" },
      "spec.backend.devFS.sysfsRoot: must be set when pciVendor is set",
    ],
    [
      "Pattern without pattern",
      { paths, groupBy: { key: "Pattern" } },
      "spec.backend.devFS.groupBy.pattern: must be set when key is Pattern",
    ],
    [
      "pattern with another key",
      { sysfsRoot: "/sys", paths, groupBy: { key: "SysfsParent", pattern: "a(b)" } },
      "spec.backend.devFS.groupBy.pattern: must not be set when key is SysfsParent",
    ],
    [
      "a pattern without a group",
      { paths, groupBy: { key: "Pattern", pattern: "/dev/accel" } },
      "spec.backend.devFS.groupBy.pattern: must have one capture group and no other parentheses: the group names the device, e.g. accel(\\d+)",
    ],
    [
      "a pattern that does not compile",
      { paths, groupBy: { key: "Pattern", pattern: "/dev/[(x)" } },
      "spec.backend.devFS.groupBy.pattern: must be a regular expression",
    ],
    [
      "slots with groupBy",
      {
        paths: [{ glob: "/dev/x*", maxContainersPerDevice: 2 }],
        groupBy: { key: "Pattern", pattern: "x(\\d+)" },
      },
      "spec.backend.devFS.paths: maxContainersPerDevice must be 1 in every entry with groupBy",
    ],
    [
      "a relative shared glob",
      { paths, sharedPaths: [{ glob: "dev/kfd" }] },
      "spec.backend.devFS.sharedPaths[0].glob: must be an absolute path",
    ],
  ])("refuses %s, naming the field", (_what, devFS, want) => {
    expect(errors(devFS).join("\n")).toContain(want);
  });
});

describe("DevFS groups and PCI selectors through v1alpha1", () => {
  it("travel in the conversion annotation and come back whole", () => {
    const original = beta({
      sysfsRoot: "/sys",
      pciVendor: "1002",
      paths,
      groupBy: { key: "PCIAddress" },
      sharedPaths: [{ glob: "/dev/kfd" }],
    });
    const alpha = toV1alpha1(original);
    expect(alpha.spec.devfs).toEqual({ paths });
    expect(validateDevicePluginConfigV1alpha1(alpha).ok).toBe(true);
    const back = toV1beta1(alpha);
    expect(back.ok && back.value).toEqual(original);
  });

  it("PCI drivers and physicalFunctions too", () => {
    const original = {
      ...beta({}),
      spec: {
        resourceName: "intel.com/e810_vf",
        backend: {
          type: "PCI" as const,
          pci: { vendor: "8086", drivers: ["iavf"], physicalFunctions: ["0000:3b:00.0"] },
        },
      },
    };
    const alpha = toV1alpha1(original);
    expect(alpha.spec.pci).toEqual({ vendor: "8086" });
    const back = toV1beta1(alpha);
    expect(back.ok && back.value).toEqual(original);
  });

  it("a v1alpha1 manifest written with them is refused, naming the field v1alpha1 does not have", () => {
    const alpha = {
      ...toV1alpha1(beta({ paths })),
      spec: {
        resourceName: "amd.com/gpu",
        backend: "DevFS",
        devfs: { paths, groupBy: { key: "PCIAddress" } },
      },
    };
    const result = validateDevicePluginConfigV1alpha1(alpha);
    expect(result.ok ? [] : result.errors.map((e) => e.path)).toContain("spec.devfs.groupBy");
  });
});
