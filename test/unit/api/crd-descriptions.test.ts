// Every field under a DevicePluginConfig's spec, in both served versions, has a description for
// `kubectl explain` (test/integration/explain.test.ts asks the API server the same, path by path).
import { describe, expect, it } from "vitest";
import { devicePluginConfigCrd, type StructuralSchema } from "../../../src/api/crd.js";
import { explainPaths } from "../../cluster/explain-paths.js";

const crd = devicePluginConfigCrd();
const specOf = (version: string): StructuralSchema => {
  const spec = crd.spec.versions.find((v) => v.name === version)?.schema.openAPIV3Schema.properties?.["spec"];
  if (!spec) throw new Error(`the CRD has no spec in ${version}`);
  return spec;
};

describe.each(crd.spec.versions.filter((v) => v.served).map((v) => v.name))("%s spec", (version) => {
  const paths = explainPaths(specOf(version));

  it("reaches the nested fields kubectl explain reaches", () => {
    const names = paths.map((p) => p.path);
    expect(names).toContain("spec.resourceName");
    expect(names).toContain("spec.tolerations.tolerationSeconds");
    expect(names).toContain("spec.dra.deviceClass.selectors.cel.expression");
    expect(names.length).toBeGreaterThan(40);
  });

  it("has a description on every field", () => {
    const missing = paths.filter((p) => (p.schema.description ?? "").trim() === "").map((p) => p.path);
    expect(missing).toEqual([]);
  });
});

describe("explainPaths", () => {
  it("walks through lists but not into map values", () => {
    const schema: StructuralSchema = {
      type: "object",
      properties: {
        list: { type: "array", items: { type: "object", properties: { a: { type: "string" } } } },
        map: {
          type: "object",
          additionalProperties: { type: "object", properties: { b: { type: "string" } } },
        },
        scalar: { type: "integer" },
      },
    };
    expect(explainPaths(schema).map((p) => p.path)).toEqual([
      "spec",
      "spec.list",
      "spec.list.a",
      "spec.map",
      "spec.scalar",
    ]);
  });
});
