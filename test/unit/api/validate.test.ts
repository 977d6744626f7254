// Validation of DevicePluginConfig manifests: field paths for every invalid fixture, and the rules themselves.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkExtendedResourceName } from "../../../src/api/v1beta1/spec.js";
import {
  formatFieldPath,
  loadDevicePluginConfig,
  validateAnyVersion,
  validateDevicePluginConfig,
} from "../../../src/api/validate.js";
import { validateFiles, verdictLabel } from "../../../src/cli/validate.js";
import { parse } from "yaml";

const fixtures = join(import.meta.dirname, "..", "..", "fixtures");
const invalidDir = join(fixtures, "invalid");
const validDir = join(fixtures, "valid");
const invalidFiles = readdirSync(invalidDir).filter((f) => f.endsWith(".yaml"));
const validFiles = readdirSync(validDir).filter((f) => f.endsWith(".yaml"));
const validAlphaDir = join(fixtures, "valid-v1alpha1");
const validAlphaFiles = readdirSync(validAlphaDir).filter((f) => f.endsWith(".yaml"));

/** `FILE DevicePluginConfig/NAME`, as dpo validate names a one-document file's config. */
function labelOf(path: string): string {
  const { metadata } = parse(readFileSync(path, "utf8")) as { metadata: { name: string } };
  return `${path} DevicePluginConfig/${metadata.name}`;
}

function apiVersionOf(dir: string, file: string): string {
  const m = /^apiVersion: (\S+)$/m.exec(readFileSync(join(dir, file), "utf8"));
  if (!m?.[1]) throw new Error(`${file} has no apiVersion line`);
  return m[1];
}

function expectedPath(file: string): string {
  const m = /^# expect-path: (.+)$/m.exec(readFileSync(join(invalidDir, file), "utf8"));
  if (!m?.[1]) throw new Error(`${file} has no '# expect-path:' line`);
  return m[1].trim();
}

describe("invalid fixture corpus", () => {
  it("has at least 20 manifests", () => {
    expect(invalidFiles.length).toBeGreaterThanOrEqual(20);
  });

  it("has at least 10 v1alpha1 manifests", () => {
    expect(
      invalidFiles.filter((f) => apiVersionOf(invalidDir, f) === "dpo.dev/v1alpha1").length,
    ).toBeGreaterThanOrEqual(10);
  });

  it.each(invalidFiles)("%s is rejected with its field path and its version", async (file) => {
    const out = await validateFiles([join(invalidDir, file)]);
    expect(out.exitCode).toBe(1);
    expect(out.lines[0]).toBe(
      `${verdictLabel(out.verdicts[0]!)}: invalid (${apiVersionOf(invalidDir, file)})`,
    );
    expect(out.lines[0]?.startsWith(`${join(invalidDir, file)}`)).toBe(true);
    const paths = out.lines.map((l) => l.split(": ")[1]);
    expect(paths).toContain(expectedPath(file));
  });
});

describe("valid fixtures", () => {
  it.each(validFiles)("%s is valid v1beta1", async (file) => {
    const out = await validateFiles([join(validDir, file)]);
    expect(out.lines).toEqual([`${labelOf(join(validDir, file))}: valid (dpo.dev/v1beta1)`]);
    expect(out.exitCode).toBe(0);
  });

  it.each(validAlphaFiles)("%s is valid v1alpha1", async (file) => {
    const out = await validateFiles([join(validAlphaDir, file)]);
    expect(out.lines).toEqual([`${labelOf(join(validAlphaDir, file))}: valid (dpo.dev/v1alpha1)`]);
    expect(out.exitCode).toBe(0);
  });

  it("says which version each document of a stream uses", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dpo-validate-"));
    try {
      const file = join(dir, "both.yaml");
      const alpha = readFileSync(join(validAlphaDir, "mock-basic.yaml"), "utf8");
      const beta = readFileSync(join(validDir, "mock-basic.yaml"), "utf8");
      writeFileSync(file, `${alpha}---\n${beta}---\napiVersion: dpo.dev/v2\nkind: DevicePluginConfig\n`);
      const out = await validateFiles([file]);
      expect(out.lines.slice(0, 3)).toEqual([
        `${file}#0 DevicePluginConfig/foo: valid (dpo.dev/v1alpha1)`,
        `${file}#1 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)`,
        `${file}#2 DevicePluginConfig/<no name>: invalid`,
      ]);
      expect(out.lines).toContain(
        `${file}#2 DevicePluginConfig/<no name>: apiVersion: must be one of dpo.dev/v1beta1, dpo.dev/v1alpha1`,
      );
      expect(out.exitCode).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("validateFiles exit codes", () => {
  it("exits 2 for an unreadable file and still reports the others", async () => {
    const out = await validateFiles([
      join(fixtures, "does-not-exist.yaml"),
      join(validDir, "mock-basic.yaml"),
    ]);
    expect(out.exitCode).toBe(2);
    expect(out.lines[0]).toBe(`cannot read ${join(fixtures, "does-not-exist.yaml")}: no such file`);
    expect(out.lines[1]).toMatch(
      /mock-basic.yaml DevicePluginConfig\/example-foo: valid \(dpo.dev\/v1beta1\)$/,
    );
  });
});

describe("checkExtendedResourceName", () => {
  it.each([
    ["hardware-vendor.example/foo", undefined],
    ["nvidia.com/gpu", undefined],
    ["example.com/a_b.c-d", undefined],
    ["foo", /exactly one '\/'/],
    ["/foo", /exactly one '\/'/],
    ["example.com/", /exactly one '\/'/],
    ["a/b/c", /exactly one '\/'/],
    ["kubernetes.io/foo", /kubernetes.io/],
    ["node.kubernetes.io/foo", /kubernetes.io/],
    ["requests.example.com/foo", /requests\./],
    ["Example.com/foo", /DNS subdomain/],
    // requests.<domain> must stay a 253-character DNS subdomain, as the kubelet checks it.
    [`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(52)}/foo`, undefined],
    [`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(53)}/foo`, /at most 244 characters/],
    ["example.com/-foo", /name '-foo'/],
    [`example.com/${"a".repeat(64)}`, /at most 63/],
  ])("%s", (name, want) => {
    const got = checkExtendedResourceName(name);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(want);
  });
});

describe("formatFieldPath", () => {
  it.each([
    [[], "<root>"],
    [["spec", "resourceName"], "spec.resourceName"],
    [["spec", "backend", "devFS", "paths", 0, "glob"], "spec.backend.devFS.paths[0].glob"],
    [["spec", "tolerations", 2], "spec.tolerations[2]"],
  ] as const)("%j → %s", (path, want) => {
    expect(formatFieldPath(path)).toBe(want);
  });
});

describe("validateDevicePluginConfig", () => {
  it("applies defaults", () => {
    const r = validateDevicePluginConfig({
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: "x" },
      spec: { resourceName: "vendor.example/x", backend: { type: "Mock", mock: { devices: 1 } } },
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.spec.sharing).toEqual({ strategy: "None", failRequestsGreaterThanOne: false });
    expect(r.value.spec.topology.allocationPolicy).toBe("None");
    expect(r.value.spec.plugin.priorityClassName).toBe("system-node-critical");
    expect(r.value.spec.backend.mock).toEqual({ devices: 1, idPrefix: "mock", numaNodes: 1, attributes: {} });
  });

  it.each([
    [null, "<root>"],
    [[], "<root>"],
    [
      { apiVersion: "dpo.dev/v1", kind: "DevicePluginConfig", metadata: { name: "x" }, spec: {} },
      "apiVersion",
    ],
    [{ apiVersion: "dpo.dev/v1beta1", kind: "Other", metadata: { name: "x" }, spec: {} }, "kind"],
    [
      { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig", metadata: { name: "X_Y" }, spec: {} },
      "metadata.name",
    ],
  ])("rejects %j at %s", (obj, path) => {
    const r = validateDevicePluginConfig(obj);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toContain(path);
  });

  it("requires exactly one document for the plugin's --config", () => {
    const one = readFileSync(join(validDir, "mock-basic.yaml"), "utf8");
    expect(loadDevicePluginConfig(one).ok).toBe(true);
    const two = loadDevicePluginConfig(`${one}\n---\n${one}`);
    expect(two.ok).toBe(false);
    if (!two.ok) expect(two.errors[0]?.message).toMatch(/exactly one DevicePluginConfig, found 2/);
    const broken = loadDevicePluginConfig("spec: [unclosed");
    expect(broken.ok).toBe(false);
    if (!broken.ok) expect(broken.errors[0]?.message).toMatch(/^YAML:/);
  });
});

/**
 * Disagreements with the API server that config fuzzing found (test/fuzz/config-gen.ts), each now answered
 * as the API server answers it: accepted (with the spec it stores), or refused at the field it names.
 */
describe("dpo validate answers as the API server does", () => {
  const beta = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name: "x" },
    spec: { resourceName: "vendor.example/x", backend: { type: "Mock", mock: { devices: 1 } }, ...spec },
  });
  const alpha = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: "dpo.dev/v1alpha1",
    kind: "DevicePluginConfig",
    metadata: { name: "x" },
    spec: { resourceName: "vendor.example/x", backend: "Mock", mock: { devices: 1 }, ...spec },
  });
  const mock = (fields: Record<string, unknown>) => ({ type: "Mock", mock: { devices: 1, ...fields } });

  it.each<{ what: string; manifest: Record<string, unknown>; path?: string; message?: RegExp }>([
    // The API server prunes a null field (or defaults it) before validating; YAML's `healthFile:` is null.
    { what: "a null optional field", manifest: beta({ backend: mock({ healthFile: null }) }) },
    { what: "a null block with a default", manifest: beta({ sharing: null, topology: null }) },
    { what: "a null map value", manifest: beta({ nodeSelector: { "feature.example/a": null } }) },
    {
      what: "a null field in a list item",
      manifest: beta({ tolerations: [{ key: null, operator: "Exists" }] }),
    },
    {
      what: "a null v1alpha1 field",
      manifest: alpha({ sharedDevNum: null, preferredAllocationPolicy: null }),
    },
    {
      what: "a null required field",
      manifest: beta({ backend: mock({ devices: null }) }),
      path: "spec.backend.mock.devices",
    },
    {
      what: "a null backend member",
      manifest: beta({ backend: { type: "Mock", mock: null } }),
      path: "spec.backend.mock",
    },
    { what: "a null v1alpha1 member", manifest: alpha({ mock: null }), path: "spec.mock" },
    { what: "a null list item", manifest: beta({ tolerations: [null] }), path: "spec.tolerations[0]" },
    // A value that fits neither branch of an int-or-string: at the field, not at <root>.
    {
      what: "a fractional maxUnavailable",
      manifest: beta({ upgrade: { maxUnavailable: 1.5 } }),
      path: "spec.upgrade.maxUnavailable",
      message: /^must be a number of nodes >= 1 or a percentage/,
    },
    {
      what: "a list for maxUnavailable",
      manifest: beta({ upgrade: { maxUnavailable: [] } }),
      path: "spec.upgrade.maxUnavailable",
    },
    // A map key that is too long is the map's problem, as the CEL rule over its keys says.
    {
      what: "a node selector key of 317 characters",
      manifest: beta({ nodeSelector: { ["k".repeat(317)]: "x" } }),
      path: "spec.nodeSelector",
      message: /^key "k{40}\.\.\." is longer than 316 characters$/,
    },
    // ... and stops no other check: the value beside it, and the backend member rules around it.
    {
      what: "a bad node selector value beside a long key",
      manifest: beta({ nodeSelector: { ["k".repeat(317)]: "x", "feature.example/a": "-bad-" } }),
      path: "spec.nodeSelector.feature.example/a",
    },
    {
      what: "a v1alpha1 member of another backend beside a long key",
      manifest: alpha({ pci: { vendor: "10de" }, nodeSelector: { ["k".repeat(317)]: "x" } }),
      path: "spec.pci",
    },
    {
      what: "an attribute key of 64 characters",
      manifest: beta({ backend: mock({ attributes: { ["a".repeat(64)]: "x" } }) }),
      path: "spec.backend.mock.attributes",
    },
    // A list over its size still has its items checked, as the API server checks them.
    {
      what: "a bad item in a list of 65 tolerations",
      manifest: beta({ tolerations: [...Array(64).fill({}), { operator: "Sometimes" }] }),
      path: "spec.tolerations[64].operator",
    },
    {
      what: "a list of 65 tolerations",
      manifest: beta({ tolerations: [...Array(64).fill({}), { operator: "Sometimes" }] }),
      path: "spec.tolerations",
      message: /^must have at most 64 items$/,
    },
  ])("$what", ({ manifest, path, message }) => {
    const r = validateAnyVersion(manifest);
    if (path === undefined) {
      expect(r.ok, JSON.stringify(r.ok ? "" : r.errors)).toBe(true);
      return;
    }
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors.map((e) => e.path)).toContain(path);
    if (message) expect(r.errors.find((e) => e.path === path)?.message).toMatch(message);
  });

  it("stores a null field as absent and a null block as its default", () => {
    const r = validateDevicePluginConfig(beta({ sharing: null, backend: mock({ healthFile: null }) }));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.spec.sharing).toEqual({ strategy: "None", failRequestsGreaterThanOne: false });
    expect(r.value.spec.backend.mock).not.toHaveProperty("healthFile");
  });
});
