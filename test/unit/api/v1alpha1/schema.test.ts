// The v1alpha1 schema is ready for a CRD version: structural, with the same CEL rules and bounds as v1beta1.
import { describe, expect, it } from "vitest";
import { devicePluginConfigCrd, structuralSchemaOf } from "../../../../src/api/crd.js";
import { DevicePluginConfigStatusV1alpha1Schema } from "../../../../src/api/v1alpha1/config.js";
import { DevicePluginConfigSpecV1alpha1Schema } from "../../../../src/api/v1alpha1/spec.js";
import { DevicePluginConfigSpecSchema } from "../../../../src/api/v1beta1/spec.js";
import { DevicePluginConfigStatusSchema } from "../../../../src/api/v1beta1/status.js";

const alpha = structuralSchemaOf(DevicePluginConfigSpecV1alpha1Schema, "spec");
const beta = structuralSchemaOf(DevicePluginConfigSpecSchema, "spec");

/** A member's schema without the given fields and the rules that read them (v1beta1-only fields). */
function withoutFields(schema: typeof beta | undefined, fields: string[]): typeof beta | undefined {
  if (schema === undefined) return undefined;
  const { "x-kubernetes-validations": rules, ...rest } = schema;
  const kept = (rules ?? []).filter((r) => !fields.some((f) => r.rule.includes(`self.${f}`)));
  return {
    ...rest,
    properties: Object.fromEntries(
      Object.entries(schema.properties ?? {}).filter(([k]) => !fields.includes(k)),
    ),
    ...(kept.length > 0 ? { "x-kubernetes-validations": kept } : {}),
  };
}

describe("the v1alpha1 spec as a structural schema", () => {
  it("has every field of the zod schema", () => {
    expect(Object.keys(alpha.properties ?? {}).sort()).toEqual(
      Object.keys(DevicePluginConfigSpecV1alpha1Schema.shape).sort(),
    );
    expect(alpha.required).toEqual(["resourceName", "backend"]);
  });

  it("requires the member backend names and forbids the others, at the member's path", () => {
    const backendRules = (alpha["x-kubernetes-validations"] ?? []).filter((r) =>
      r.rule.includes("self.backend"),
    );
    expect(backendRules.map((r) => [r.rule, r.fieldPath, r.reason])).toEqual([
      ["self.backend != 'Mock' || has(self.mock)", ".mock", "FieldValueRequired"],
      ["self.backend == 'Mock' || !has(self.mock)", ".mock", "FieldValueForbidden"],
      ["self.backend != 'DevFS' || has(self.devfs)", ".devfs", "FieldValueRequired"],
      ["self.backend == 'DevFS' || !has(self.devfs)", ".devfs", "FieldValueForbidden"],
      ["self.backend != 'PCI' || has(self.pci)", ".pci", "FieldValueRequired"],
      ["self.backend == 'PCI' || !has(self.pci)", ".pci", "FieldValueForbidden"],
    ]);
  });

  it("shares resourceName's pattern and CEL rules, the members and tolerations with v1beta1", () => {
    const a = alpha.properties ?? {};
    const b = beta.properties ?? {};
    expect(a.resourceName).toEqual(b.resourceName);
    expect(a.mock).toEqual(b.backend?.properties?.mock);
    // v1beta1's DevFS and PCI members have fields v1alpha1 lacks (ADR 0010); the rest is the same.
    expect(a.devfs).toEqual(
      withoutFields(b.backend?.properties?.devFS, ["sysfsRoot", "pciVendor", "groupBy", "sharedPaths"]),
    );
    expect(a.pci).toEqual(withoutFields(b.backend?.properties?.pci, ["drivers", "physicalFunctions"]));
    expect(a.tolerations).toEqual(b.tolerations && { ...b.tolerations, default: undefined });
    expect({ ...a.nodeSelector }).toEqual({ ...b.nodeSelector, default: undefined });
  });

  it("bounds sharedDevNum as v1beta1 bounds sharing.replicas, and spells the policies its own way", () => {
    expect(alpha.properties?.sharedDevNum).toMatchObject({ type: "integer", minimum: 1, maximum: 1024 });
    expect(beta.properties?.sharing?.properties?.replicas).toMatchObject({ maximum: 1024 });
    expect(alpha.properties?.preferredAllocationPolicy?.enum).toEqual(["none", "packed", "balanced", "numa"]);
    expect(alpha.properties?.backend?.enum).toEqual(["Mock", "DevFS", "PCI", "NVIDIA"]);
  });

  it("has no defaults of its own: an absent field converts to an absent field, and v1beta1's defaults apply", () => {
    const defaulted = Object.entries(alpha.properties ?? {}).filter(([, p]) => p.default !== undefined);
    expect(defaulted.map(([name]) => name)).toEqual([]);
  });

  it("shares the v1beta1 status", () => {
    expect(structuralSchemaOf(DevicePluginConfigStatusV1alpha1Schema, "status")).toEqual(
      structuralSchemaOf(DevicePluginConfigStatusSchema, "status"),
    );
  });

  it("is served by the CRD beside v1beta1, which stays the storage version", () => {
    const versions = devicePluginConfigCrd().spec.versions;
    expect(versions.map((v) => [v.name, v.storage])).toEqual([
      ["v1beta1", true],
      ["v1alpha1", false],
    ]);
    const { description, ...served } = versions[1]?.schema.openAPIV3Schema.properties?.spec ?? {};
    expect(description).toContain("v1alpha1");
    expect(served).toEqual(alpha);
  });
});
