// `dpo convert`: manifest streams converted document by document, comments kept, other documents untouched.
import fc from "fast-check";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments, stringify } from "yaml";
import {
  convertManifests,
  LOST_FIELDS_ANNOTATION,
  toV1alpha1,
  toV1beta1,
  type AlphaObject,
  type BetaObject,
} from "../../../src/api/conversion/index.js";
import { validateDevicePluginConfig } from "../../../src/api/validate.js";
import { convertFiles, parseConvertArgs } from "../../../src/cli/convert.js";
import { UsageError } from "../../../src/cli/flags.js";
import { betaObject } from "../support/api-arbitraries.js";

const fixtures = join(import.meta.dirname, "..", "..", "fixtures");
const alphaDir = join(fixtures, "valid-v1alpha1");
const betaDir = join(fixtures, "valid");
const alphaFiles = readdirSync(alphaDir).filter((f) => f.endsWith(".yaml"));
const betaFiles = readdirSync(betaDir).filter((f) => f.endsWith(".yaml"));
const read = (dir: string, file: string) => readFileSync(join(dir, file), "utf8");

function converted(text: string, to: "dpo.dev/v1beta1" | "dpo.dev/v1alpha1"): string {
  const r = convertManifests(text, to);
  if (!r.ok) throw new Error(JSON.stringify(r.problems));
  return r.text;
}

const OTHER = `# not ours: printed exactly as written
apiVersion: v1
kind: ConfigMap
metadata: {name: keep-me}   # odd spacing stays
data: { a: 'single', b: "double" }
`;

describe("convertManifests", () => {
  it.each(alphaFiles)(
    "%s: v1alpha1 → v1beta1 gives what toV1beta1 gives, and back gives the file",
    (file) => {
      const text = read(alphaDir, file);
      const beta = converted(text, "dpo.dev/v1beta1");
      const want = toV1beta1(parse(text) as AlphaObject);
      expect(want.ok && want.value).toStrictEqual(parse(beta));
      expect(validateDevicePluginConfig(parse(beta)).ok).toBe(true);
      expect(parse(converted(beta, "dpo.dev/v1alpha1"))).toStrictEqual(parse(text));
    },
  );

  it.each(betaFiles)(
    "%s: v1beta1 → v1alpha1 gives what toV1alpha1 gives, and back gives the file",
    (file) => {
      const text = read(betaDir, file);
      const alpha = converted(text, "dpo.dev/v1alpha1");
      expect(parse(alpha)).toStrictEqual(toV1alpha1(parse(text) as BetaObject));
      expect(parse(converted(alpha, "dpo.dev/v1beta1"))).toStrictEqual(parse(text));
    },
  );

  it("keeps comments on the fields that move, and the file's leading comment", () => {
    const beta = converted(read(alphaDir, "mock-basic.yaml"), "dpo.dev/v1beta1");
    expect(beta).toMatch(/^# The issue's v1alpha1 example/);
    expect(beta).toContain(
      "  backend:\n    type: Mock # Mock | DevFS | PCI\n    mock: { devices: 4, idPrefix: foo, numaNodes: 2 }\n",
    );
    expect(beta).toContain("    replicas: 4 # containers per device; 1 = no sharing\n");
    expect(beta).toContain("    allocationPolicy: Spread # none | packed | balanced | numa\n");
  });

  it("round-trips a v1alpha1 file with comments byte for byte when nothing is reformatted", () => {
    const text = read(alphaDir, "devfs-serial.yaml");
    expect(converted(converted(text, "dpo.dev/v1beta1"), "dpo.dev/v1alpha1")).toBe(text);
  });

  it("leaves other kinds, and documents already in the target version, byte for byte", () => {
    const beta = read(betaDir, "mock-basic.yaml");
    const alpha = read(alphaDir, "mock-basic.yaml");
    const stream = `${OTHER}---\n${beta}---\n${alpha}`;
    const out = converted(stream, "dpo.dev/v1beta1");
    expect(out.startsWith(`${OTHER}---\n${beta}---\n`)).toBe(true);
    expect(parseAllDocuments(out).map((d) => (d.toJS() as { apiVersion: string }).apiVersion)).toEqual([
      "v1",
      "dpo.dev/v1beta1",
      "dpo.dev/v1beta1",
    ]);
  });

  it.each([
    [
      "an invalid v1alpha1 document",
      "apiVersion: dpo.dev/v1alpha1\nkind: DevicePluginConfig\nmetadata: {name: x}\nspec: {resourceName: a.example/b, backend: Mock, mock: {devices: 1}, sharedDevNum: 0}\n",
      "spec.sharedDevNum",
    ],
    [
      "an unknown dpo.dev version",
      "apiVersion: dpo.dev/v2\nkind: DevicePluginConfig\nmetadata: {name: x}\nspec: {}\n",
      "apiVersion",
    ],
    ["broken YAML", "apiVersion: [unclosed\n", "<document>"],
  ])("refuses %s with the field path and the document index", (_name, doc, path) => {
    const r = convertManifests(`${OTHER}---\n${doc}`, "dpo.dev/v1beta1");
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => [p.document, p.path])).toContainEqual([1, path]);
  });

  it("refuses an invalid document that is already in the target version too", () => {
    const r = convertManifests(read(fixtures, "invalid/pci-vendor-uppercase.yaml"), "dpo.dev/v1beta1");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.map((p) => p.path)).toEqual(["spec.backend.pci.vendor"]);
  });

  it("converts a field left empty (null) as the API server reads it: absent", () => {
    const original = read(alphaDir, "mock-basic.yaml");
    const empty = original.replace(/^ {2}sharedDevNum: .*$/m, "  sharedDevNum:");
    const without = original.replace(/^ {2}sharedDevNum: .*\n/m, "");
    expect((parse(empty) as AlphaObject).spec).toHaveProperty("sharedDevNum", null);
    const beta = parse(converted(empty, "dpo.dev/v1beta1")) as BetaObject;
    expect(beta.spec).not.toHaveProperty("sharing");
    expect(beta).toEqual(parse(converted(without, "dpo.dev/v1beta1")));
  });

  it("refuses a v1alpha1 document whose annotation does not parse, naming it", () => {
    const doc = { ...(parse(read(alphaDir, "mock-basic.yaml")) as AlphaObject) };
    doc.metadata = { ...doc.metadata, annotations: { [LOST_FIELDS_ANNOTATION]: "{oops" } };
    const r = convertManifests(stringify(doc), "dpo.dev/v1beta1");
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems[0]?.path).toBe(`metadata.annotations[${LOST_FIELDS_ANNOTATION}]`);
  });

  it("v1beta1 → v1alpha1 → v1beta1 through YAML text is the identity for any valid v1beta1 object", () => {
    const valid = betaObject({ invalid: false }).filter((b) => validateDevicePluginConfig(b).ok);
    fc.assert(
      fc.property(valid, (beta) => {
        const alpha = converted(stringify(beta), "dpo.dev/v1alpha1");
        expect(parse(alpha)).toStrictEqual(toV1alpha1(beta));
        expect(parse(converted(alpha, "dpo.dev/v1beta1"))).toStrictEqual(beta);
      }),
      { numRuns: 500 },
    );
  });
});

describe("dpo convert arguments", () => {
  it.each([
    [["--to", "v1beta1", "a.yaml"], { to: "dpo.dev/v1beta1", output: "yaml", files: ["a.yaml"] }],
    [
      ["--to=v1alpha1", "a.yaml", "b.yaml"],
      { to: "dpo.dev/v1alpha1", output: "yaml", files: ["a.yaml", "b.yaml"] },
    ],
    [["a.yaml", "--to", "dpo.dev/v1beta1"], { to: "dpo.dev/v1beta1", output: "yaml", files: ["a.yaml"] }],
    [["--to", "v1beta1", "-"], { to: "dpo.dev/v1beta1", output: "yaml", files: ["-"] }],
    [
      ["--to", "v1beta1", "-o", "json", "a.yaml"],
      { to: "dpo.dev/v1beta1", output: "json", files: ["a.yaml"] },
    ],
  ])("%j", (argv, want) => {
    expect(parseConvertArgs(argv)).toEqual(want);
  });

  it.each([
    [["a.yaml"], /--to is required/],
    [["--to", "v1", "a.yaml"], /--to must be v1beta1 or v1alpha1, got 'v1'/],
    [["--to", "v1beta1"], /no files/],
    [["--to", "v1beta1", "--in-place", "a.yaml"], /in-place/],
    [["--to", "v1beta1", "-o", "table", "a.yaml"], /--output must be yaml or json, got 'table'/],
    [["--to", "v1beta1", "-", "a.yaml", "-"], /'-' \(standard input\) given more than once/],
  ])("refuses %j", (argv, message) => {
    expect(() => parseConvertArgs(argv)).toThrow(UsageError);
    expect(() => parseConvertArgs(argv)).toThrow(message);
  });
});

describe("convertFiles", () => {
  const dir = mkdtempSync(join(tmpdir(), "dpo-convert-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("joins the files into one stream with ---", async () => {
    const out = await convertFiles({
      to: "dpo.dev/v1beta1",
      files: [join(alphaDir, "mock-basic.yaml"), join(alphaDir, "devfs-serial.yaml")],
    });
    expect(out.exitCode).toBe(0);
    expect(out.stderr).toEqual([]);
    const docs = parseAllDocuments(out.stdout).map((d) => d.toJS() as BetaObject);
    expect(docs.map((d) => [d.apiVersion, d.metadata.name])).toEqual([
      ["dpo.dev/v1beta1", "foo"],
      ["dpo.dev/v1beta1", "serial"],
    ]);
  });

  it("exits 1 naming file, document and field, and prints nothing", async () => {
    const file = join(dir, "two.yaml");
    writeFileSync(file, `${OTHER}---\n${read(fixtures, "invalid/v1alpha1-shared-dev-num-zero.yaml")}`);
    const out = await convertFiles({
      to: "dpo.dev/v1beta1",
      files: [join(alphaDir, "mock-basic.yaml"), file],
    });
    expect(out.exitCode).toBe(1);
    expect(out.stdout).toBe("");
    expect(out.stderr).toEqual([
      `${file}#1 DevicePluginConfig/invalid-v1alpha1-shared-dev-num-zero: spec.sharedDevNum: must be >= 1 (1 means no sharing)`,
    ]);
  });

  it("exits 2 for an unreadable file, saying why in words", async () => {
    const out = await convertFiles({ to: "dpo.dev/v1beta1", files: [join(dir, "missing.yaml")] });
    expect(out.exitCode).toBe(2);
    expect(out.stderr).toEqual([`cannot read ${join(dir, "missing.yaml")}: no such file`]);
  });

  it("reads standard input for '-' and names it <stdin>", async () => {
    const stdin = `${OTHER}---\n${read(alphaDir, "mock-basic.yaml")}`;
    const readStdin = (file: string) =>
      file === "-" ? Promise.resolve(stdin) : Promise.reject(new Error(`read ${file}`));
    const out = await convertFiles({ to: "dpo.dev/v1beta1", files: ["-"] }, readStdin);
    expect(out.stderr).toEqual([]);
    expect(out.exitCode).toBe(0);
    expect(parseAllDocuments(out.stdout).map((d) => (d.toJS() as BetaObject).apiVersion)).toEqual([
      "v1",
      "dpo.dev/v1beta1",
    ]);

    const bad = read(fixtures, "invalid/v1alpha1-shared-dev-num-zero.yaml");
    const failed = await convertFiles({ to: "dpo.dev/v1beta1", files: ["-"] }, () => Promise.resolve(bad));
    expect(failed.stderr).toEqual([
      "<stdin> DevicePluginConfig/invalid-v1alpha1-shared-dev-num-zero: spec.sharedDevNum: must be >= 1 (1 means no sharing)",
    ]);
  });

  it("-o json prints the converted objects as a v1 List", async () => {
    const out = await convertFiles({
      to: "dpo.dev/v1beta1",
      output: "json",
      files: [join(alphaDir, "mock-basic.yaml"), join(alphaDir, "devfs-serial.yaml")],
    });
    expect(out.exitCode, out.stderr.join("\n")).toBe(0);
    const list = JSON.parse(out.stdout) as { apiVersion: string; kind: string; items: BetaObject[] };
    expect([list.apiVersion, list.kind]).toEqual(["v1", "List"]);
    expect(list.items.map((d) => [d.apiVersion, d.metadata.name])).toEqual([
      ["dpo.dev/v1beta1", "foo"],
      ["dpo.dev/v1beta1", "serial"],
    ]);
  });
});
