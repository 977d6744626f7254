// The npm package of the dpo CLI as a user gets it (make release builds it with the same packCliPackage):
// packed from the built checkout, installed offline with an empty npm cache into an empty directory and
// globally into a prefix, then run: `dpo --version`, `dpo validate` on a valid and an invalid file and on
// standard input through `npx @dpo-dev/dpo` (the scoped name: a bare `npx dpo` without the package installed
// would fetch the public registry's unrelated `dpo`), `dpo probe` on a Mock config. An install that needed any dependency fetched
// fails here, since nothing but the tarball is there to install from.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packCliPackage } from "../../tools/release/npm-package.js";
import { tempDir } from "./support.js";

const repo = join(import.meta.dirname, "..", "..");
const fixtures = join(repo, "test", "fixtures");
const version = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string }).version;
const VALID = join(fixtures, "valid", "mock-basic.yaml");
const INVALID = join(fixtures, "invalid", "sharing-timeslicing-without-replicas.yaml");

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end with `input` on standard input; never rejects on a non-zero exit. */
function runCommand(
  command: string,
  args: string[],
  options: { cwd: string; input?: string },
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      // The npm packages of this checkout stay out of reach: only the installed package may answer.
      { cwd: options.cwd, env: { ...process.env, NODE_PATH: "" }, timeout: 300_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") {
          reject(new Error(`cannot run ${command} ${args.join(" ")}: ${error.message}`, { cause: error }));
          return;
        }
        resolve({ code: typeof error?.code === "number" ? error.code : 0, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? "");
  });
}

const work = tempDir("npm-package");
const cache = join(work.dir, "empty-npm-cache");
const app = join(work.dir, "app");
const globalPrefix = join(work.dir, "global");
let tarball = "";

const npmFlags = () => ["--offline", "--no-audit", "--no-fund", "--cache", cache];
let localInstall: Result | undefined;
let globalInstall: Result | undefined;

// Packed and installed once for the tests below, locally and globally; each test checks its install first.
beforeAll(async () => {
  if (!existsSync(join(repo, "dist", "dpo.js")))
    throw new Error("dist/dpo.js is missing: run 'make build' first");
  tarball = await packCliPackage(repo, join(work.dir, "out"));
  mkdirSync(app);
  localInstall = await runCommand("npm", ["install", ...npmFlags(), tarball], { cwd: app });
  globalInstall = await runCommand(
    "npm",
    ["install", "--global", "--prefix", globalPrefix, ...npmFlags(), tarball],
    {
      cwd: work.dir,
    },
  );
}, 600_000);

afterAll(() => work.cleanup());

describe("the dpo CLI's npm package", () => {
  it("is named for the release and declares no dependencies", async () => {
    expect(tarball).toBe(join(work.dir, "out", `dpo-cli-${version}.tgz`));
    const listing = await runCommand("tar", ["-xzOf", tarball, "package/package.json"], { cwd: work.dir });
    expect(listing.code, listing.stderr).toBe(0);
    const manifest = JSON.parse(listing.stdout) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      name: "@dpo-dev/dpo",
      version,
      bin: { dpo: "dist/dpo.js" },
      type: "module",
    });
    for (const field of ["dependencies", "optionalDependencies", "peerDependencies", "bundleDependencies"]) {
      expect(manifest[field], field).toBeUndefined();
    }
  });

  it("installs offline into an empty directory, and dpo --version and dpo validate work from it", async () => {
    expect(localInstall?.code, `${localInstall?.stdout}${localInstall?.stderr}`).toBe(0);
    const dpo = join(app, "node_modules", ".bin", "dpo");

    const versionRun = await runCommand(dpo, ["--version"], { cwd: app });
    expect(versionRun.code, versionRun.stderr).toBe(0);
    expect(versionRun.stdout.split("\n")[0]).toBe(`dpo ${version}`);

    const valid = await runCommand(dpo, ["validate", VALID], { cwd: app });
    expect({ code: valid.code, stdout: valid.stdout, stderr: valid.stderr }).toEqual({
      code: 0,
      stdout: `${VALID} DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)\n`,
      stderr: "",
    });

    const invalid = await runCommand(dpo, ["validate", INVALID], { cwd: app });
    expect(invalid.code, invalid.stderr).toBe(1);
    expect(invalid.stderr).toContain(
      `${INVALID} DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing`,
    );

    const probe = await runCommand(dpo, ["probe", "--config", VALID], { cwd: app });
    expect(probe.code, probe.stderr).toBe(0);
    expect(probe.stdout).toContain("backend Mock, 4 device(s)");
  }, 300_000);

  it("runs through npx by its scoped name, reading standard input with validate -", async () => {
    // npx finds the installed package in the directory and fetches nothing.
    expect(localInstall?.code).toBe(0);
    const ok = await runCommand("npx", [...npmFlags(), "@dpo-dev/dpo", "validate", "-"], {
      cwd: app,
      input: readFileSync(VALID, "utf8"),
    });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toBe("<stdin> DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)\n");
    const bad = await runCommand("npx", [...npmFlags(), "@dpo-dev/dpo", "validate", "-"], {
      cwd: app,
      input: readFileSync(INVALID, "utf8"),
    });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain(
      "<stdin> DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2",
    );
  }, 300_000);

  it("installs globally (npm i -g) offline and runs from the prefix's bin", async () => {
    expect(globalInstall?.code, `${globalInstall?.stdout}${globalInstall?.stderr}`).toBe(0);
    const dpo = join(globalPrefix, "bin", "dpo");
    const versionRun = await runCommand(dpo, ["--version"], { cwd: work.dir });
    expect(versionRun.code, versionRun.stderr).toBe(0);
    expect(versionRun.stdout).toContain(`dpo ${version}`);
    const invalid = await runCommand(dpo, ["validate", INVALID], { cwd: work.dir });
    expect(invalid.code).toBe(1);
    // The names kubectl looks for on the PATH: `kubectl dpo ...` and the completion of its arguments.
    const plugin = await runCommand(join(globalPrefix, "bin", "kubectl-dpo"), ["rollout", "--help"], {
      cwd: work.dir,
    });
    expect(plugin.code, plugin.stderr).toBe(0);
    expect(plugin.stdout).toMatch(/^Usage: kubectl dpo rollout status CONFIG/);
    const complete = await runCommand(join(globalPrefix, "bin", "kubectl_complete-dpo"), ["rollout", "re"], {
      cwd: work.dir,
    });
    expect({ code: complete.code, stdout: complete.stdout }).toEqual({ code: 0, stdout: "resume\n:4\n" });
  }, 300_000);
});
