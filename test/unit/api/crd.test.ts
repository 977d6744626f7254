// The generated CRDs: committed copies are fresh, schemas are structural and RE2-safe, defaults and CEL rules match zod.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import {
  allCrds,
  CrdSchemaError,
  deviceNodeStateCrd,
  devicePluginConfigCrd,
  re2Incompatibility,
  renderCrdsYamlStream,
  structuralSchemaOf,
  type CustomResourceDefinition,
  type StructuralSchema,
} from "../../../src/api/crd.js";
import { validateDevicePluginConfig } from "../../../src/api/validate.js";
import { checkExtendedResourceName, EXTENDED_RESOURCE_NAME_PATTERN } from "../../../src/api/v1beta1/spec.js";
import { runCrdsCommand } from "../../../src/cli/crds.js";
import { GENERATED_DIRS, renderManifestFiles } from "../../../tools/manifests/manifests.js";

const repoRoot = join(import.meta.dirname, "..", "..", "..");
const validDir = join(repoRoot, "test", "fixtures", "valid");

function rootSchema(crd: CustomResourceDefinition): StructuralSchema {
  const [version] = crd.spec.versions;
  if (!version) throw new Error(`${crd.metadata.name} has no version`);
  return version.schema.openAPIV3Schema;
}

function specSchema(crd: CustomResourceDefinition): StructuralSchema {
  const spec = rootSchema(crd).properties?.spec;
  if (!spec) throw new Error(`${crd.metadata.name} has no spec schema`);
  return spec;
}

interface VisitedNode {
  path: string;
  node: Record<string, unknown>;
}

/** Every schema node with its path (`spec.backend.devFS.paths[*].glob`), walking the raw objects so nothing is hidden by types. */
function walk(node: unknown, path: string, out: VisitedNode[] = []): VisitedNode[] {
  const record = node as Record<string, unknown>;
  out.push({ path, node: record });
  const properties = record.properties as Record<string, unknown> | undefined;
  for (const [name, child] of Object.entries(properties ?? {})) walk(child, `${path}.${name}`, out);
  if (typeof record.additionalProperties === "object") walk(record.additionalProperties, `${path}.*`, out);
  if (record.items !== undefined) walk(record.items, `${path}[*]`, out);
  return out;
}

/** Follows `a.b[*].c` through properties and items. */
function schemaAt(schema: StructuralSchema, path: string): StructuralSchema {
  let node: StructuralSchema | undefined = schema;
  for (const part of path.split(".")) {
    const name = part.replace(/\[\*\]$/, "");
    node = node?.properties?.[name];
    if (part.endsWith("[*]")) node = node?.items;
  }
  if (!node) throw new Error(`no schema at ${path}`);
  return node;
}

/** Structural defaulting as the API server does it: a missing field with a default gets it, then defaults inside apply. */
function applyDefaults(schema: StructuralSchema, value: unknown): unknown {
  if (Array.isArray(value)) {
    return (value as unknown[]).map((item) => (schema.items ? applyDefaults(schema.items, item) : item));
  }
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    if (out[name] === undefined && child.default !== undefined) out[name] = structuredClone(child.default);
    if (out[name] !== undefined) out[name] = applyDefaults(child, out[name]);
  }
  if (schema.additionalProperties) {
    for (const [name, child] of Object.entries(out))
      out[name] = applyDefaults(schema.additionalProperties, child);
  }
  return out;
}

describe("committed manifests", () => {
  const files = renderManifestFiles();

  it.each([...files.keys()])("%s equals the generated output", (relative) => {
    let committed: string;
    try {
      committed = readFileSync(join(repoRoot, relative), "utf8");
    } catch {
      throw new Error(`${relative} is missing: run make manifests`);
    }
    expect(committed, `${relative} is stale: run make manifests`).toBe(files.get(relative));
  });

  it("has no generated files left over from removed or renamed CRDs", () => {
    const present = GENERATED_DIRS.flatMap((dir) =>
      readdirSync(join(repoRoot, dir))
        .filter((f) => f.endsWith(".yaml"))
        .map((f) => `${dir}/${f}`),
    );
    expect(
      present.filter((f) => !files.has(f)),
      "stale files: run make manifests",
    ).toEqual([]);
  });

  it("dpo crds prints both CRDs as one YAML stream, the same as the committed files", () => {
    let printed = "";
    const sink = { write: (chunk: string) => (printed += chunk) } as unknown as NodeJS.WritableStream;
    expect(runCrdsCommand([], sink)).toBe(0);
    expect(printed).toBe(renderCrdsYamlStream());
    const docs = parseAllDocuments(printed).map((d) =>
      "toJS" in d ? (d.toJS() as CustomResourceDefinition) : undefined,
    );
    expect(docs.map((d) => d?.metadata.name)).toEqual([
      "devicepluginconfigs.dpo.dev",
      "devicenodestates.dpo.dev",
    ]);
    const committed = readFileSync(join(repoRoot, "crds", "dpo.dev_devicepluginconfigs.yaml"), "utf8");
    expect(parseAllDocuments(committed)[0]?.toJS()).toEqual(docs[0]);
  });
});

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

describe("DevicePluginConfig CRD", () => {
  const crd = devicePluginConfigCrd();
  const spec = specSchema(crd);

  it("is cluster-scoped dpo.dev/v1beta1 with its short name, category and status subresource", () => {
    expect(crd.spec.scope).toBe("Cluster");
    expect(crd.spec.group).toBe("dpo.dev");
    expect(crd.spec.names).toMatchObject({
      kind: "DevicePluginConfig",
      plural: "devicepluginconfigs",
      singular: "devicepluginconfig",
      shortNames: ["dpc"],
      categories: ["devices"],
    });
    expect(crd.spec.versions.map((v) => [v.name, v.served, v.storage])).toEqual([
      ["v1beta1", true, true],
      ["v1alpha1", true, false],
    ]);
    for (const version of crd.spec.versions) expect(version.subresources).toEqual({ status: {} });
  });

  it("converts between its versions through the operator's webhook Service, speaking ConversionReview v1", () => {
    expect(crd.spec.conversion).toEqual({
      strategy: "Webhook",
      webhook: {
        conversionReviewVersions: ["v1"],
        clientConfig: {
          service: { namespace: "dpo-system", name: "dpo-webhook", path: "/convert", port: 443 },
        },
      },
    });
    // The operator fills in the caBundle at run time; a committed one would be stale on every cluster.
    expect(JSON.stringify(crd)).not.toContain("caBundle");
  });

  it("prints the v1alpha1 columns from v1alpha1 field names", () => {
    const columns = crd.spec.versions.find((v) => v.name === "v1alpha1")?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.type, c.jsonPath, c.priority ?? 0])).toEqual([
      ["RESOURCE", "string", ".spec.resourceName", 0],
      ["BACKEND", "string", ".spec.backend", 0],
      ["NODES", "string", ".status.nodes.summary", 0],
      ["DEVICES", "string", ".status.devices.summary", 0],
      ["UNHEALTHY", "integer", ".status.devices.unhealthy", 0],
      ["UPDATED", "string", ".status.upgrade.summary", 0],
      ["READY", "string", '.status.conditions[?(@.type=="Ready")].status', 0],
      ["AGE", "date", ".metadata.creationTimestamp", 0],
      ["ALLOCATED", "integer", ".status.devices.allocated", 1],
      ["SHARED", "integer", ".spec.sharedDevNum", 1],
      ["POLICY", "string", ".spec.preferredAllocationPolicy", 1],
      ["MODE", "string", ".spec.publish", 1],
      ["SERVING", "string", ".status.serving.summary", 1],
      ["REASON", "string", '.status.conditions[?(@.type=="Ready")].reason', 1],
    ]);
  });

  it("serves the v1alpha1 schema generated from its own zod schema, with its CEL rules", () => {
    const alpha = crd.spec.versions.find((v) => v.name === "v1alpha1")?.schema.openAPIV3Schema;
    const alphaSpec = alpha?.properties?.spec;
    expect(alphaSpec?.properties?.backend).toMatchObject({
      type: "string",
      enum: ["Mock", "DevFS", "PCI", "NVIDIA"],
    });
    expect(alphaSpec?.properties?.sharedDevNum).toMatchObject({ type: "integer", minimum: 1, maximum: 1024 });
    expect(alphaSpec?.["x-kubernetes-validations"]?.map((r) => r.fieldPath)).toEqual([
      ".dra.driverName",
      ".mock",
      ".mock",
      ".devfs",
      ".devfs",
      ".pci",
      ".pci",
    ]);
    expect(alpha?.properties?.status).toEqual(rootSchema(crd).properties?.status);
  });

  it("prints the columns a user checks first, and more with -o wide", () => {
    const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.type, c.jsonPath, c.priority ?? 0])).toEqual([
      ["RESOURCE", "string", ".spec.resourceName", 0],
      ["BACKEND", "string", ".spec.backend.type", 0],
      ["NODES", "string", ".status.nodes.summary", 0],
      ["DEVICES", "string", ".status.devices.summary", 0],
      ["UNHEALTHY", "integer", ".status.devices.unhealthy", 0],
      ["UPDATED", "string", ".status.upgrade.summary", 0],
      ["READY", "string", '.status.conditions[?(@.type=="Ready")].status', 0],
      ["AGE", "date", ".metadata.creationTimestamp", 0],
      ["ALLOCATED", "integer", ".status.devices.allocated", 1],
      ["SHARING", "string", ".spec.sharing.strategy", 1],
      ["POLICY", "string", ".spec.topology.allocationPolicy", 1],
      ["MODE", "string", ".spec.publish", 1],
      ["SERVING", "string", ".status.serving.summary", 1],
      ["REASON", "string", '.status.conditions[?(@.type=="Ready")].reason', 1],
    ]);
  });

  it.each([
    ["topology.allocationPolicy", "None"],
    ["plugin.priorityClassName", "system-node-critical"],
    ["plugin.logLevel", "info"],
    ["sharing.strategy", "None"],
    ["sharing.failRequestsGreaterThanOne", false],
    ["cdi.enabled", false],
    ["backend.mock.idPrefix", "mock"],
    ["backend.mock.numaNodes", 1],
    ["backend.devFS.root", "/"],
    ["backend.devFS.paths[*].permissions", "rw"],
    ["backend.devFS.paths[*].type", "CharDevice"],
    ["backend.devFS.paths[*].maxContainersPerDevice", 1],
    ["backend.pci.sysfsRoot", "/sys"],
    ["backend.nvidia.nvidiaSmiPath", "/usr/bin/nvidia-smi"],
    ["backend.nvidia.pollIntervalSeconds", 10],
    ["backend.nvidia.ignoredXids", [13, 31, 43, 45, 68, 109]],
    ["tolerations", []],
    ["nodeSelector", {}],
    ["upgrade.strategy", "Auto"],
    ["upgrade.maxUnavailable", 1],
    ["upgrade.progressDeadlineSeconds", 300],
    ["upgrade.paused", false],
    ["upgrade.autoRollback", true],
  ])("defaults spec.%s to %j", (path, value) => {
    expect(schemaAt(spec, path).default).toEqual(value);
  });

  // Found by config fuzzing: the CRD dropped zod's `.int()` bounds, so the API server stored a
  // tolerationSeconds of 2^62 that the operator (JSON.parse) cannot read back exactly and refused.
  it.each([
    ["tolerations[*].tolerationSeconds", -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    ["backend.mock.devices", 1, 4096],
    ["upgrade.progressDeadlineSeconds", 10, 86_400],
  ])("bounds spec.%s to the integers JavaScript reads exactly (%d..%d)", (path, minimum, maximum) => {
    expect(schemaAt(spec, path)).toMatchObject({ minimum, maximum });
  });

  it.each(readdirSync(validDir).filter((f) => f.endsWith(".yaml")))(
    "fills in %s exactly as zod does",
    (file) => {
      const manifest = parseAllDocuments(readFileSync(join(validDir, file), "utf8"))[0]?.toJS() as {
        spec: unknown;
      };
      const parsed = validateDevicePluginConfig(manifest);
      if (!parsed.ok) throw new Error(`${file}: ${JSON.stringify(parsed.errors)}`);
      expect(applyDefaults(spec, manifest.spec)).toEqual(parsed.value.spec);
    },
  );

  it("requires the backend member that matches type and forbids the others, at the member's path", () => {
    const rules = schemaAt(spec, "backend")["x-kubernetes-validations"] ?? [];
    expect(rules.map((r) => [r.rule, r.fieldPath, r.reason])).toEqual([
      ["self.type != 'Mock' || has(self.mock)", ".mock", "FieldValueRequired"],
      ["self.type == 'Mock' || !has(self.mock)", ".mock", "FieldValueForbidden"],
      ["self.type != 'DevFS' || has(self.devFS)", ".devFS", "FieldValueRequired"],
      ["self.type == 'DevFS' || !has(self.devFS)", ".devFS", "FieldValueForbidden"],
      ["self.type != 'PCI' || has(self.pci)", ".pci", "FieldValueRequired"],
      ["self.type == 'PCI' || !has(self.pci)", ".pci", "FieldValueForbidden"],
      ["self.type != 'NVIDIA' || has(self.nvidia)", ".nvidia", "FieldValueRequired"],
      ["self.type == 'NVIDIA' || !has(self.nvidia)", ".nvidia", "FieldValueForbidden"],
    ]);
  });

  it("checks replicas against the sharing strategy at spec.sharing.replicas", () => {
    const rules = schemaAt(spec, "sharing")["x-kubernetes-validations"] ?? [];
    expect(rules.map((r) => [r.rule, r.fieldPath])).toEqual([
      ["self.strategy != 'TimeSlicing' || (has(self.replicas) && self.replicas >= 2)", ".replicas"],
      ["self.strategy != 'None' || !has(self.replicas) || self.replicas == 1", ".replicas"],
    ]);
  });

  it("keeps resourceName immutable and outside kubernetes.io", () => {
    const resourceName = schemaAt(spec, "resourceName");
    const rules = (resourceName["x-kubernetes-validations"] ?? []).map((r) => r.rule);
    expect(rules).toContain("self == oldSelf");
    expect(rules).toContain("!self.contains('kubernetes.io/')");
    expect(rules).toContain("!self.startsWith('requests.')");
    expect(resourceName.pattern).toBe(EXTENDED_RESOURCE_NAME_PATTERN);
  });

  it("keys conditions by type so several writers can own them with server-side apply", () => {
    const status = rootSchema(crd).properties?.status;
    const conditions = status?.properties?.conditions;
    expect(conditions?.["x-kubernetes-list-type"]).toBe("map");
    expect(conditions?.["x-kubernetes-list-map-keys"]).toEqual(["type"]);
  });
});

describe("DeviceNodeState CRD", () => {
  const crd = deviceNodeStateCrd();

  it("is namespaced with its short name, category, status subresource and columns", () => {
    expect(crd.spec.scope).toBe("Namespaced");
    expect(crd.spec.names).toMatchObject({
      kind: "DeviceNodeState",
      plural: "devicenodestates",
      shortNames: ["dnstate"],
      categories: ["devices"],
    });
    expect(crd.spec.versions[0]?.subresources).toEqual({ status: {} });
    const columns = crd.spec.versions[0]?.additionalPrinterColumns ?? [];
    expect(columns.map((c) => [c.name.toUpperCase(), c.jsonPath])).toEqual([
      ["CONFIG", ".spec.configName"],
      ["NODE", ".spec.nodeName"],
      ["REGISTRATION", ".status.registration.state"],
      ["HEALTHY", ".status.healthy"],
      ["ADVERTISED", ".status.advertised"],
      ["ALLOCATED", ".status.allocated"],
      ["VERSION", ".status.pluginVersion"],
      ["AGE", ".metadata.creationTimestamp"],
    ]);
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
