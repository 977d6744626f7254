// The built `dpo` binary moving a GitOps repository between API versions: convert, validate the result,
// convert back, and the exit codes a CI job relies on.
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
    expect(check.stdout).toBe(`${betaFile}: valid (dpo.dev/v1beta1)\n`);

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
    expect(run("validate", alphaFile).stdout).toBe(`${alphaFile}: valid (dpo.dev/v1alpha1)\n`);
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
    expect(out.stderr).toContain(`${file}: spec.preferredAllocationPolicy:`);
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
      expect(out.stderr).toContain("Usage: dpo convert --to v1beta1|v1alpha1 FILE...");
    }
    const missing = run("convert", "--to", "v1beta1", join(fixtures, "nope.yaml"));
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/nope\.yaml: cannot read: ENOENT/);
  });

  it("--help prints the usage and exits 0; dpo --help lists convert", () => {
    const help = run("convert", "--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: dpo convert --to v1beta1\|v1alpha1 FILE\.\.\./);
    expect(run("--help").stdout).toContain("convert    print manifests in another API version");
  });
});

describe("dpo validate with v1alpha1", () => {
  it("names the version and the field of an invalid v1alpha1 file", () => {
    const file = join(fixtures, "invalid", "v1alpha1-shared-dev-num-zero.yaml");
    const out = run("validate", file);
    expect(out.status).toBe(1);
    expect(out.stderr).toBe(
      `${file}: invalid (dpo.dev/v1alpha1)\n${file}: spec.sharedDevNum: must be >= 1 (1 means no sharing)\n`,
    );
  });
});
