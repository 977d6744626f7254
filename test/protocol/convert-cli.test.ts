// The built `dpo` binary moving a GitOps repository between API versions: convert, validate the result,
// convert back, and what a CI job relies on: exit codes, `-` for standard input, results on stdout and
// diagnostics on stderr, `-o json` and validate's JUnit report.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { tempDir } from "./support.js";

const repo = join(import.meta.dirname, "..", "..");
const dpo = join(repo, "dist", "dpo.js");
const fixtures = join(repo, "test", "fixtures");

beforeAll(() => {
  if (!existsSync(dpo)) throw new Error(`${dpo} is missing: run 'make build' first`);
});

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function run(...args: string[]) {
  return spawnSync(process.execPath, [dpo, ...args], { encoding: "utf8" });
}

/** Runs the built dpo with `input` on standard input. */
function runWithInput(input: string, ...args: string[]) {
  return spawnSync(process.execPath, [dpo, ...args], { encoding: "utf8", input });
}

describe("dpo convert", () => {
  it("moves a v1alpha1 file to v1beta1 that dpo validate accepts, and back", () => {
    const tmp = tempDir("convert");
    cleanups.push(tmp.cleanup);
    const source = join(fixtures, "valid-v1alpha1", "mock-basic.yaml");
    const forward = run("convert", "--to", "v1beta1", source);
    expect(forward.status, forward.stderr).toBe(0);
    expect(forward.stdout).toContain("type: Mock # Mock | DevFS | PCI");
    const betaFile = join(tmp.dir, "beta.yaml");
    writeFileSync(betaFile, forward.stdout);

    const check = run("validate", betaFile);
    expect(check.status, check.stderr).toBe(0);
    expect(check.stdout).toBe(`${betaFile} DevicePluginConfig/foo: valid (dpo.dev/v1beta1)\n`);

    const back = run("convert", "--to", "v1alpha1", betaFile);
    expect(back.status, back.stderr).toBe(0);
    expect(parse(back.stdout)).toStrictEqual(parse(readFileSync(source, "utf8")));
  });

  it("keeps v1beta1-only fields through a rollback to v1alpha1 and forward again", () => {
    const tmp = tempDir("rollback");
    cleanups.push(tmp.cleanup);
    const source = join(fixtures, "valid", "mock-timeslicing.yaml");
    const down = run("convert", "--to", "v1alpha1", source);
    expect(down.status, down.stderr).toBe(0);
    expect(down.stdout).toContain("dpo.dev/v1beta1-fields:");
    const alphaFile = join(tmp.dir, "alpha.yaml");
    writeFileSync(alphaFile, down.stdout);
    expect(run("validate", alphaFile).stdout).toBe(
      `${alphaFile} DevicePluginConfig/example-foo-shared: valid (dpo.dev/v1alpha1)\n`,
    );
    const up = run("convert", "--to", "v1beta1", alphaFile);
    expect(up.status, up.stderr).toBe(0);
    expect(parse(up.stdout)).toStrictEqual(parse(readFileSync(source, "utf8")));
  });

  it("converts several files into one stream", () => {
    const out = run(
      "convert",
      "--to",
      "v1beta1",
      join(fixtures, "valid-v1alpha1", "devfs-serial.yaml"),
      join(fixtures, "valid", "pci-gpu.yaml"),
    );
    expect(out.status, out.stderr).toBe(0);
    expect(parseAllDocuments(out.stdout).map((d) => (d.toJS() as { apiVersion: string }).apiVersion)).toEqual(
      ["dpo.dev/v1beta1", "dpo.dev/v1beta1"],
    );
  });

  it("exits 1 naming file and field for an invalid manifest, and prints nothing", () => {
    const file = join(fixtures, "invalid", "v1alpha1-policy-v1beta1-spelling.yaml");
    const out = run("convert", "--to", "v1beta1", file);
    expect(out.status).toBe(1);
    expect(out.stdout).toBe("");
    expect(out.stderr).toContain(
      `${file} DevicePluginConfig/invalid-v1alpha1-policy-v1beta1-spelling: spec.preferredAllocationPolicy:`,
    );
  });

  it("exits 2 for usage errors and unreadable files", () => {
    const file = join(fixtures, "valid", "mock-basic.yaml");
    for (const args of [
      ["convert", file],
      ["convert", "--to", "v2", file],
      ["convert", "--to", "v1beta1"],
    ]) {
      const out = run(...args);
      expect(out.status, args.join(" ")).toBe(2);
      expect(out.stderr).toContain("Usage: dpo convert --to v1beta1|v1alpha1 [-o yaml|json] FILE|-...");
    }
    const missing = run("convert", "--to", "v1beta1", join(fixtures, "nope.yaml"));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe(`cannot read ${join(fixtures, "nope.yaml")}: no such file\n`);
  });

  it("--help prints the usage and exits 0; dpo --help lists convert", () => {
    const help = run("convert", "--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: dpo convert --to v1beta1\|v1alpha1 \[-o yaml\|json\] FILE\|-\.\.\./);
    expect(run("--help").stdout).toContain("convert    print manifests in another API version");
  });
});

describe("dpo validate with v1alpha1", () => {
  it("names the version and the field of an invalid v1alpha1 file", () => {
    const file = join(fixtures, "invalid", "v1alpha1-shared-dev-num-zero.yaml");
    const out = run("validate", file);
    expect(out.status).toBe(1);
    const label = `${file} DevicePluginConfig/invalid-v1alpha1-shared-dev-num-zero`;
    expect(out.stdout).toBe(`${label}: invalid (dpo.dev/v1alpha1)\n`);
    expect(out.stderr).toBe(`${label}: spec.sharedDevNum: must be >= 1 (1 means no sharing)\n`);
  });
});

describe("the built dpo in a CI pipe", () => {
  const valid = readFileSync(join(fixtures, "valid", "mock-basic.yaml"), "utf8");
  const invalid = readFileSync(
    join(fixtures, "invalid", "sharing-timeslicing-without-replicas.yaml"),
    "utf8",
  );
  const namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: gpu\n";

  it("convert - reads standard input", () => {
    const alpha = readFileSync(join(fixtures, "valid-v1alpha1", "mock-basic.yaml"), "utf8");
    const out = runWithInput(`${namespace}---\n${alpha}`, "convert", "--to", "v1beta1", "-");
    expect(out.status, out.stderr).toBe(0);
    expect(out.stderr).toBe("");
    expect(parseAllDocuments(out.stdout).map((d) => (d.toJS() as { apiVersion: string }).apiVersion)).toEqual(
      ["v1", "dpo.dev/v1beta1"],
    );
  });

  it("convert -o json prints a v1 List; an invalid document on stdin is named by index, kind and name", () => {
    const json = runWithInput(valid, "convert", "--to", "v1alpha1", "-o", "json", "-");
    expect(json.status, json.stderr).toBe(0);
    const list = JSON.parse(json.stdout) as { kind: string; items: { apiVersion: string }[] };
    expect([list.kind, list.items.map((i) => i.apiVersion)]).toEqual(["List", ["dpo.dev/v1alpha1"]]);

    const bad = runWithInput(`${namespace}---\n${invalid}`, "convert", "--to", "v1alpha1", "-");
    expect(bad.status).toBe(1);
    expect(bad.stdout).toBe("");
    expect(bad.stderr).toBe(
      "<stdin>#1 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing\n",
    );
  });

  it("validate - keeps the verdicts on stdout and the problems on stderr once one is invalid", () => {
    const out = runWithInput([namespace, valid, invalid].join("---\n"), "validate", "-");
    expect(out.status).toBe(1);
    expect(out.stdout).toBe(
      [
        "<stdin>#0 Namespace/gpu: skipped (v1)",
        "<stdin>#1 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)",
        "<stdin>#2 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: invalid (dpo.dev/v1beta1)",
        "",
      ].join("\n"),
    );
    expect(out.stderr).toBe(
      "<stdin>#2 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing\n",
    );
  });

  it("validate --junit writes the report beside the text output; -o junit prints it", () => {
    const tmp = tempDir("junit");
    cleanups.push(tmp.cleanup);
    const report = join(tmp.dir, "report.xml");
    const out = runWithInput([valid, invalid].join("---\n"), "validate", "--junit", report, "-");
    expect(out.status).toBe(1);
    expect(out.stdout).toContain("<stdin>#0 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)");
    const xml = readFileSync(report, "utf8");
    expect(xml).toMatch(
      /^<\?xml version="1\.0" encoding="UTF-8"\?>\n<testsuites name="dpo validate" tests="2" failures="1"/,
    );
    expect(xml).toContain('<testcase classname="&lt;stdin&gt;" name="#0 DevicePluginConfig/example-foo"/>');
    expect(xml).toContain('<failure type="invalid" message="invalid (dpo.dev/v1beta1): 1 problem">');

    const printed = runWithInput(valid, "validate", "-o", "junit", "-");
    expect(printed.status, printed.stderr).toBe(0);
    expect(printed.stderr).toBe("");
    expect(printed.stdout).toContain(
      '<testsuites name="dpo validate" tests="1" failures="0" errors="0" skipped="0">',
    );

    const unwritable = run(
      "validate",
      "--junit",
      join(tmp.dir, "no", "report.xml"),
      join(fixtures, "valid", "mock-basic.yaml"),
    );
    expect(unwritable.status).toBe(2);
    expect(unwritable.stderr).toBe(`dpo: cannot write ${join(tmp.dir, "no", "report.xml")}: no such file\n`);
  });

  it("probe -o json and --config - read what a CI job gives them", () => {
    const out = runWithInput(valid, "probe", "--config", "-", "-o", "json");
    expect(out.status, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ config: "example-foo", backend: "Mock" });
    const missing = run("probe", "--config", join(fixtures, "nope.yaml"));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toBe(`dpo: cannot read ${join(fixtures, "nope.yaml")}: no such file (--config)\n`);
  });

  it("version -o json and its older spelling --json print the same object", () => {
    const json = run("version", "-o", "json");
    expect(json.status, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(run("version", "--json").stdout));
  });
});
