// The generated CRD schemas are structural and RE2-safe: every node typed, every pattern one the API server's
// regex engine accepts with the same meaning, and what a structural schema cannot say refused.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  allCrds,
  CrdSchemaError,
  re2Incompatibility,
  structuralSchemaOf,
  type StructuralSchema,
} from "../../../src/api/crd.js";
import { checkExtendedResourceName, EXTENDED_RESOURCE_NAME_PATTERN } from "../../../src/api/v1beta1/spec.js";
import { rootSchema, walk } from "./crd-support.js";

describe.each(allCrds().map((crd) => [crd.metadata.name, crd] as const))("%s is structural", (_name, crd) => {
  const nodes = walk(rootSchema(crd), "<root>");
  const allowedKeys = new Set([
    "type",
    "description",
    "format",
    "nullable",
    "default",
    "enum",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "x-kubernetes-int-or-string",
  ]);

  it("gives every node a type, but for int-or-string nodes, which carry CEL rules for their bounds", () => {
    const untyped = nodes.filter(
      ({ node }) =>
        !["object", "array", "string", "integer", "number", "boolean"].includes(node.type as string) &&
        !(
          node.type === undefined &&
          node["x-kubernetes-int-or-string"] === true &&
          Array.isArray(node["x-kubernetes-validations"])
        ),
    );
    expect(untyped.map((n) => n.path)).toEqual([]);
  });

  it("uses only keywords the API server accepts in a structural schema", () => {
    const forbidden = nodes.flatMap(({ path, node }) =>
      Object.keys(node)
        .filter((key) => !allowedKeys.has(key))
        .map((key) => `${path}: ${key}`),
    );
    expect(forbidden).toEqual([]);
  });

  it("never combines properties with additionalProperties, and additionalProperties is always a schema", () => {
    const bad = nodes.filter(
      ({ node }) =>
        (node.properties !== undefined && node.additionalProperties !== undefined) ||
        (node.additionalProperties !== undefined && typeof node.additionalProperties !== "object"),
    );
    expect(bad.map((n) => n.path)).toEqual([]);
  });

  it("keys map lists by required scalar fields", () => {
    for (const { path, node } of nodes.filter((n) => n.node["x-kubernetes-list-type"] === "map")) {
      const items = node.items as StructuralSchema;
      for (const key of node["x-kubernetes-list-map-keys"] as string[]) {
        expect(items.required, `${path} key ${key}`).toContain(key);
        expect(["string", "integer", "boolean"], `${path} key ${key}`).toContain(
          items.properties?.[key]?.type,
        );
      }
    }
  });

  it("has only RE2-compatible patterns, in the schema and in CEL matches()", () => {
    const patterns = nodes.flatMap(({ path, node }) => {
      const own = typeof node.pattern === "string" ? [{ path, pattern: node.pattern }] : [];
      const rules = (node["x-kubernetes-validations"] as { rule: string }[] | undefined) ?? [];
      const cel = rules.flatMap((r) =>
        [...r.rule.matchAll(/matches\('((?:[^'\\]|\\.)*)'\)/g)].map((m) => ({ path, pattern: m[1] ?? "" })),
      );
      return [...own, ...cel];
    });
    for (const { path, pattern } of patterns) {
      expect(re2Incompatibility(pattern), `${path}: ${pattern}`).toBeUndefined();
      expect(() => new RegExp(pattern), `${path}: ${pattern}`).not.toThrow();
    }
  });

  it("gives every CEL rule a message and a field path that exists", () => {
    for (const { path, node } of nodes) {
      const rules = (node["x-kubernetes-validations"] as Record<string, string>[] | undefined) ?? [];
      for (const rule of rules) {
        expect(rule.message ?? rule.messageExpression, `${path}: ${rule.rule}`).toBeTruthy();
        if (rule.fieldPath !== undefined) {
          // The API server resolves a field path through nested properties; so does this.
          let at = node as { properties?: Record<string, unknown> };
          for (const field of rule.fieldPath.replace(/^\./, "").split(".")) {
            expect(Object.keys(at.properties ?? {}), `${path}: ${rule.fieldPath}`).toContain(field);
            at = at.properties![field] as typeof at;
          }
        }
      }
    }
  });

  it("follows the CRD object conventions at the root", () => {
    const root = rootSchema(crd);
    expect(root.type).toBe("object");
    expect(Object.keys(root.properties ?? {})).toEqual(["apiVersion", "kind", "metadata", "spec", "status"]);
    expect(root.properties?.metadata).toEqual({ type: "object" });
    expect(root.required).toEqual(["spec"]);
  });
});

describe("re2Incompatibility", () => {
  it.each([
    ["^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", undefined],
    ["^\\/", undefined],
    ["^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)$", undefined],
    ["^(?P<name>a)(?<other>b)$", undefined],
    ["^a{1,1000}$", undefined],
    ["^(?=.)r?w?m?$", "lookahead at 1"],
    ["^(?!x)a$", "lookahead at 1"],
    ["(?<=a)b", "lookbehind at 0"],
    ["(?<!a)b", "lookbehind at 0"],
    ["(?>a)", "atomic group at 0"],
    ["(a)\\1", "backreference \\1 at 3"],
    ["\\u0041", "escape \\u at 0"],
    ["a{1001}", "repetition count above 1000 at 1"],
    ["a{2,5000}", "repetition count above 1000 at 1"],
    ["\\\\(?=x)", "lookahead at 2"],
    ["[\\(?=]", undefined],
    ["[(?=]x", undefined],
    ["[]a](?=b)", "lookahead at 4"],
  ])("%s → %s", (pattern, expected) => {
    expect(re2Incompatibility(pattern)).toBe(expected);
  });
});

describe("spec regex rewrites keep their meaning", () => {
  it("DevFS permissions accept the same strings as the former lookahead form", () => {
    const former = /^(?=.)r?w?m?$/;
    const permissions = /^(rw?m?|wm?|m)$/;
    const alphabet = ["", "r", "w", "m", "x"];
    const candidates = new Set<string>();
    for (const a of alphabet)
      for (const b of alphabet)
        for (const c of alphabet)
          for (const d of alphabet) {
            candidates.add(a + b + c + d);
          }
    for (const candidate of candidates) {
      expect(permissions.test(candidate), JSON.stringify(candidate)).toBe(former.test(candidate));
    }
  });

  it.each([
    "nvidia.com/gpu",
    "hardware-vendor.example/foo",
    "a/b",
    "example.com/Foo_bar.baz-1",
    `example.com/${"a".repeat(63)}`,
    "kubernetes.io/foo",
    "requests.example.com/foo",
    "foo",
    "/foo",
    "example.com/",
    "example.com/foo/bar",
    "Example.com/foo",
    "-example.com/foo",
    `example.com/${"a".repeat(64)}`,
    "example.com/-foo",
    "example..com/foo",
  ])("the resourceName pattern and CEL rules agree with checkExtendedResourceName on %s", (name) => {
    const byPattern = new RegExp(EXTENDED_RESOURCE_NAME_PATTERN).test(name);
    // The CEL rules, evaluated the way the API server would for these short names.
    const byCel = !name.includes("kubernetes.io/") && !name.startsWith("requests.");
    expect(byPattern && byCel, name).toBe(checkExtendedResourceName(name) === undefined);
  });
});

describe("structuralSchemaOf refuses what a structural schema cannot say", () => {
  it.each([
    ["a union", z.object({ a: z.union([z.string(), z.number()]) }), "unions are not structural"],
    ["an untyped field", z.object({ a: z.unknown() }), "has no type"],
    ["a lookahead pattern", z.object({ a: z.string().regex(/^(?=.)a$/) }), "not RE2"],
    ["a tuple", z.object({ a: z.tuple([z.string(), z.number()]) }), "tuples are not structural"],
    ["an open object", z.looseObject({ a: z.string() }), "additionalProperties: true"],
  ])("%s", (_what, schema, message) => {
    expect(() => structuralSchemaOf(schema, "spec")).toThrow(CrdSchemaError);
    expect(() => structuralSchemaOf(schema, "spec")).toThrow(message);
  });

  it("turns literals into one-value enums, nullable into nullable, record key limits into CEL", () => {
    const schema = structuralSchemaOf(
      z.object({
        kind: z.literal("Thing"),
        note: z.string().nullable(),
        labels: z.record(z.string().max(63), z.string()),
        count: z.number().int().gt(0),
      }),
      "spec",
    );
    expect(schema.properties?.kind).toEqual({ enum: ["Thing"], type: "string" });
    expect(schema.properties?.note).toEqual({ nullable: true, type: "string" });
    expect(schema.properties?.labels?.["x-kubernetes-validations"]).toEqual([
      { rule: "self.all(k, size(k) <= 63)", message: "keys must be at most 63 characters" },
    ]);
    expect(schema.properties?.count).toEqual({
      exclusiveMinimum: true,
      maximum: Number.MAX_SAFE_INTEGER,
      minimum: 0,
      type: "integer",
    });
  });
});
