// Validation of DevicePluginConfig manifests: field paths for every invalid fixture, and the rules themselves.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkExtendedResourceName } from "../../src/api/v1beta1/spec.js";
import {
  formatFieldPath,
  loadDevicePluginConfig,
  validateDevicePluginConfig,
} from "../../src/api/validate.js";
import { validateFiles } from "../../src/cli/validate.js";

const fixtures = join(import.meta.dirname, "..", "fixtures");
const invalidDir = join(fixtures, "invalid");
const validDir = join(fixtures, "valid");
const invalidFiles = readdirSync(invalidDir).filter((f) => f.endsWith(".yaml"));
const validFiles = readdirSync(validDir).filter((f) => f.endsWith(".yaml"));
const validAlphaDir = join(fixtures, "valid-v1alpha1");
const validAlphaFiles = readdirSync(validAlphaDir).filter((f) => f.endsWith(".yaml"));

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
    expect(out.lines[0]).toBe(`${join(invalidDir, file)}: invalid (${apiVersionOf(invalidDir, file)})`);
    const paths = out.lines.map((l) => l.split(": ")[1]);
    expect(paths).toContain(expectedPath(file));
  });
});

describe("valid fixtures", () => {
  it.each(validFiles)("%s is valid v1beta1", async (file) => {
    const out = await validateFiles([join(validDir, file)]);
    expect(out.lines).toEqual([`${join(validDir, file)}: valid (dpo.dev/v1beta1)`]);
    expect(out.exitCode).toBe(0);
  });

  it.each(validAlphaFiles)("%s is valid v1alpha1", async (file) => {
    const out = await validateFiles([join(validAlphaDir, file)]);
    expect(out.lines).toEqual([`${join(validAlphaDir, file)}: valid (dpo.dev/v1alpha1)`]);
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
        `${file}#0: valid (dpo.dev/v1alpha1)`,
        `${file}#1: valid (dpo.dev/v1beta1)`,
        `${file}#2: invalid`,
      ]);
      expect(out.lines).toContain(`${file}#2: apiVersion: must be one of dpo.dev/v1beta1, dpo.dev/v1alpha1`);
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
    expect(out.lines[0]).toMatch(/does-not-exist.yaml: cannot read: ENOENT/);
    expect(out.lines[1]).toMatch(/mock-basic.yaml: valid \(dpo.dev\/v1beta1\)$/);
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
