// The dpo command line as a user meets it: --version, usage errors with the usage, one error prefix, no
// stack traces for a missing or broken kubeconfig, and `dpo validate -` / `--output json` for CI pipes.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Readable } from "node:stream";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { loadKubeConfig } from "../../../src/cli/kubeconfig.js";
import { main } from "../../../src/cli/run.js";
import { formatValidateJson, isOtherApiDocument, validateFiles } from "../../../src/cli/validate.js";

const repo = join(import.meta.dirname, "..", "..", "..");
const fixtures = join(repo, "test", "fixtures");
const validFile = join(fixtures, "valid", "mock-basic.yaml");
const invalidFile = join(fixtures, "invalid", "sharing-timeslicing-without-replicas.yaml");
const packageVersion = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { version: string })
  .version;

const dir = mkdtempSync(join(tmpdir(), "dpo-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** Runs `dpo ARGS` in this process and returns what it printed and its exit code. */
async function dpo(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}

const STACK_FRAME = /^\s+at /m;

describe("dpo --version", () => {
  it.each([["--version"], ["version"]])("%s prints the package version", async (flag) => {
    const out = await dpo(flag);
    expect(out.code).toBe(0);
    expect(out.stdout.split("\n")[0]).toBe(`dpo ${packageVersion}`);
  });

  it.each([[["--json"]], [["-o", "json"]], [["--output=json"]], [["--json", "-o", "json"]]])(
    "version %j holds the package version",
    async (flags) => {
      const out = await dpo("version", ...flags);
      expect(out.code, out.stderr).toBe(0);
      expect((JSON.parse(out.stdout) as { version: string }).version).toBe(packageVersion);
    },
  );

  it("version -o text is the plain text", async () => {
    const out = await dpo("version", "-o", "text");
    expect(out.stdout.split("\n")[0]).toBe(`dpo ${packageVersion}`);
  });
});

describe("usage errors", () => {
  it.each<[string[], string, string]>([
    [["validate", "--bogus", validFile], "dpo: unknown flag '--bogus'", "Usage: dpo validate"],
    [["validate", "-x", validFile], "dpo: unknown flag '-x'", "Usage: dpo validate"],
    [
      ["validate", "--output", "yaml", validFile],
      "dpo: --output must be text, json or junit, got 'yaml'",
      "Usage: dpo validate",
    ],
    [
      ["validate", "--junit", "-", validFile],
      "dpo: --junit needs a file name (-o junit writes the report to standard output)",
      "Usage: dpo validate",
    ],
    [["validate", "-", "-"], "dpo: '-' (standard input) given more than once", "Usage: dpo validate"],
    [["version", "-o", "yaml"], "dpo: --output must be text or json, got 'yaml'", "Usage: dpo version"],
    [["version", "--json", "-o", "text"], "dpo: --json and --output text disagree", "Usage: dpo version"],
    [
      ["probe", "-o", "yaml"],
      "dpo: --output (or DPO_PROBE_OUTPUT): must be one of text, json",
      "Usage: dpo probe",
    ],
    [["validate", validFile, "--output"], "dpo: --output needs a value", "Usage: dpo validate"],
    [["validate"], "dpo: no files given ('-' reads standard input)", "Usage: dpo validate"],
    [
      ["convert", "--to", "v1beta1", "--in-place", validFile],
      "dpo: unknown flag '--in-place'",
      "Usage: dpo convert",
    ],
    [["convert", validFile], "dpo: --to is required (v1beta1 or v1alpha1)", "Usage: dpo convert"],
    [
      ["convert", "--to", "v2", validFile],
      "dpo: --to must be v1beta1 or v1alpha1, got 'v2'",
      "Usage: dpo convert",
    ],
    [["version", "--short"], "dpo: unknown flag '--short'", "Usage: dpo version"],
    [["crds", "--all"], "dpo: unknown flag '--all'", "Usage: dpo crds"],
    [["crds", "extra"], "dpo: crds takes no arguments but 'apply', got: extra", "Usage: dpo crds"],
    [["operator", "--frob"], "dpo: unknown flag '--frob'", "Usage: dpo operator [flags]"],
    [["operator", "extra"], "dpo: unexpected argument 'extra'", "Usage: dpo operator [flags]"],
    [["probe", "--frob"], "dpo: unknown flag '--frob'", "Usage: dpo probe"],
    [["plugin", "--frob"], "dpo: unknown flag '--frob'", "Usage: dpo plugin"],
    [["frob"], "dpo: unknown command 'frob'", "Usage: dpo <command>"],
    [["--frob"], "dpo: unknown flag '--frob'", "Usage: dpo <command>"],
  ])("dpo %j", async (args, message, usage) => {
    const out = await dpo(...args);
    expect(out.code).toBe(2);
    expect(out.stdout).toBe("");
    expect(out.stderr.split("\n")[0]).toMatch(
      new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`),
    );
    expect(out.stderr).toContain(`\n\n${usage}`);
    expect(out.stderr).not.toMatch(STACK_FRAME);
  });

  it("takes a file whose name starts with '-' after '--'", async () => {
    const file = join(dir, "-odd.yaml");
    writeFileSync(file, readFileSync(validFile));
    const out = await dpo("validate", "--", file);
    expect(out).toEqual({
      code: 0,
      stdout: `${file} DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)\n`,
      stderr: "",
    });
  });
});

describe("kubeconfig", () => {
  const kubeconfig = (body: string): string => {
    const file = join(dir, `kubeconfig-${Math.random().toString(36).slice(2)}`);
    writeFileSync(file, body);
    return file;
  };
  const good = [
    "apiVersion: v1",
    "kind: Config",
    "clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:6443' } }]",
    "users: [{ name: u, user: { token: t } }]",
    "contexts: [{ name: x, context: { cluster: c, user: u } }]",
    "current-context: x",
    "",
  ].join("\n");
  const emptyHome = join(dir, "home");
  mkdirSync(emptyHome, { recursive: true });

  it.each<[string, () => [string | undefined, Record<string, string>], string]>([
    [
      "a missing --kubeconfig",
      () => [join(dir, "nope"), {}],
      `cannot load the kubeconfig ${join(dir, "nope")} (--kubeconfig): ENOENT`,
    ],
    ["a --kubeconfig that is not YAML", () => [kubeconfig("clusters: [\n"), {}], "(--kubeconfig): "],
    [
      "a kubeconfig without current-context",
      () => [kubeconfig(good.replace("current-context: x", "")), {}],
      "the kubeconfig (--kubeconfig) has no current-context",
    ],
    [
      "a current-context naming no cluster",
      () => [kubeconfig(good.replace("{ cluster: c,", "{ cluster: other,")), {}],
      "the kubeconfig (--kubeconfig): current-context 'x' names no known cluster",
    ],
    [
      "a missing file in $KUBECONFIG",
      () => [undefined, { KUBECONFIG: join(dir, "gone") }],
      `cannot load the kubeconfig ${join(dir, "gone")} ($KUBECONFIG): ENOENT`,
    ],
    [
      "no kubeconfig anywhere",
      () => [undefined, {}],
      `no kubeconfig: not in a cluster, $KUBECONFIG is unset and ${join(emptyHome, ".kube", "config")} does not exist; pass --kubeconfig FILE`,
    ],
  ])("refuses %s in one line", (_what, setup, message) => {
    const [flag, env] = setup();
    expect(() => loadKubeConfig(flag, env, emptyHome)).toThrow(message);
  });

  it("loads a good kubeconfig from --kubeconfig and from $KUBECONFIG", () => {
    const file = kubeconfig(good);
    expect(loadKubeConfig(file, {}, emptyHome).getCurrentCluster()?.server).toBe("https://127.0.0.1:6443");
    expect(loadKubeConfig(undefined, { KUBECONFIG: file }, emptyHome).getCurrentContext()).toBe("x");
  });

  it("dpo operator with a missing kubeconfig: one line, exit 1, no stack trace", async () => {
    const missing = join(dir, "missing-kubeconfig");
    const out = await dpo("operator", "--kubeconfig", missing, "--metrics-addr", "0", "--health-addr", "0");
    expect(out).toEqual({
      code: 1,
      stdout: "",
      stderr: `dpo: cannot load the kubeconfig ${missing} (--kubeconfig): ENOENT\n`,
    });
  });

  it("dpo crds apply with a missing kubeconfig: one line, exit 1, no stack trace", async () => {
    const missing = join(dir, "missing-kubeconfig");
    const out = await dpo("crds", "apply", "--kubeconfig", missing);
    expect(out).toEqual({
      code: 1,
      stdout: "",
      stderr: `dpo: cannot load the kubeconfig ${missing} (--kubeconfig): ENOENT\n`,
    });
  });

  it("dpo operator with a broken kubeconfig: one line, exit 1, no stack trace", async () => {
    const out = await dpo("operator", "--kubeconfig", kubeconfig("clusters: [\n"), "--webhook-addr", "0");
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/^dpo: cannot load the kubeconfig .* \(--kubeconfig\): [^\n]+\n$/);
  });
});

/** What `kustomize build` prints for an overlay with a config in it. */
const KUSTOMIZE_STREAM = [
  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dpo-system\n",
  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dpo-operator\nspec: { replicas: 1 }\n",
  "apiVersion: dpo.dev/v1beta1\nkind: DeviceNodeState\nmetadata:\n  name: a\n",
  readFileSync(validFile, "utf8"),
].join("---\n");

describe("dpo validate in a pipe", () => {
  it.each<[string, unknown, boolean]>([
    ["a Deployment", { apiVersion: "apps/v1", kind: "Deployment" }, true],
    ["a core object", { apiVersion: "v1", kind: "ConfigMap" }, true],
    [
      "a CRD of the same kind in another group",
      { apiVersion: "other.example/v1", kind: "DevicePluginConfig" },
      true,
    ],
    ["dpo's DeviceNodeState", { apiVersion: "dpo.dev/v1beta1", kind: "DeviceNodeState" }, true],
    ["a config", { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfig" }, false],
    [
      "a config of a version dpo does not serve",
      { apiVersion: "dpo.dev/v2", kind: "DevicePluginConfig" },
      false,
    ],
    ["a dpo.dev kind misspelled", { apiVersion: "dpo.dev/v1beta1", kind: "DevicePluginConfg" }, false],
    ["a document without a kind", { apiVersion: "apps/v1" }, false],
    ["a document without an apiVersion", { kind: "Deployment" }, false],
    ["a scalar", "text", false],
  ])("%s is skipped: %s", (_what, doc, skipped) => {
    expect(isOtherApiDocument(doc)).toBe(skipped);
  });

  it("skips other APIs' documents of a stream and checks the configs", async () => {
    const out = await validateFiles(["-"], () => Promise.resolve(KUSTOMIZE_STREAM));
    expect(out.exitCode).toBe(0);
    expect(out.lines).toEqual([
      "<stdin>#0 Namespace/dpo-system: skipped (v1)",
      "<stdin>#1 Deployment/dpo-operator: skipped (apps/v1)",
      "<stdin>#2 DeviceNodeState/a: skipped (dpo.dev/v1beta1)",
      "<stdin>#3 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)",
    ]);
  });

  it("a stream with no config at all is valid", async () => {
    const out = await validateFiles(["-"], () => Promise.resolve("apiVersion: v1\nkind: Namespace\n"));
    expect(out).toMatchObject({ exitCode: 0, lines: ["<stdin> Namespace/<no name>: skipped (v1)"] });
  });

  it("--output json gives every verdict with its problems", async () => {
    const read = (file: string) =>
      Promise.resolve(file === "-" ? "apiVersion: v1\nkind: Namespace\n" : readFileSync(file, "utf8"));
    const out = await validateFiles([invalidFile, "-", join(dir, "absent.yaml")], read);
    expect(JSON.parse(formatValidateJson(out))).toEqual({
      valid: false,
      documents: [
        {
          file: invalidFile,
          result: "invalid",
          apiVersion: "dpo.dev/v1beta1",
          kind: "DevicePluginConfig",
          name: "invalid-sharing-timeslicing-without-replicas",
          errors: [{ path: "spec.sharing.replicas", message: "must be >= 2 when strategy is TimeSlicing" }],
        },
        { file: "<stdin>", result: "skipped", apiVersion: "v1", kind: "Namespace", errors: [] },
        {
          file: join(dir, "absent.yaml"),
          result: "unreadable",
          errors: [{ path: "<file>", message: `cannot read ${join(dir, "absent.yaml")}: no such file` }],
        },
      ],
    });
    expect(out.exitCode).toBe(2);
  });

  it("a stream with an invalid config: verdicts on stdout, problems on stderr, each naming kind and name", async () => {
    const stream = `${KUSTOMIZE_STREAM}---\n${readFileSync(invalidFile, "utf8")}`;
    vi.spyOn(process.stdin, Symbol.asyncIterator).mockImplementation(() =>
      Readable.from([Buffer.from(stream)])[Symbol.asyncIterator](),
    );
    const out = await dpo("validate", "-");
    expect(out.code).toBe(1);
    expect(out.stdout).toBe(
      [
        "<stdin>#0 Namespace/dpo-system: skipped (v1)",
        "<stdin>#1 Deployment/dpo-operator: skipped (apps/v1)",
        "<stdin>#2 DeviceNodeState/a: skipped (dpo.dev/v1beta1)",
        "<stdin>#3 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)",
        "<stdin>#4 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: invalid (dpo.dev/v1beta1)",
        "",
      ].join("\n"),
    );
    expect(out.stderr).toBe(
      "<stdin>#4 DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing\n",
    );
  });

  it("probe names an invalid config's kind and name, and an unreadable one's reason in words", async () => {
    const bad = await dpo("probe", "--config", invalidFile);
    expect(bad.code).toBe(2);
    expect(bad.stdout).toBe("");
    expect(bad.stderr).toBe(
      `dpo: invalid config ${invalidFile}:\n${invalidFile} DevicePluginConfig/invalid-sharing-timeslicing-without-replicas: spec.sharing.replicas: must be >= 2 when strategy is TimeSlicing\n`,
    );
    const absent = join(dir, "absent.yaml");
    expect(await dpo("probe", "--config", absent)).toEqual({
      code: 2,
      stdout: "",
      stderr: `dpo: cannot read ${absent}: no such file (--config)\n`,
    });
  });

  it("an unreadable file is one line on stderr saying why in words, exit 2", async () => {
    const absent = join(dir, "absent.yaml");
    const out = await dpo("validate", validFile, absent);
    expect(out).toEqual({
      code: 2,
      stdout: `${validFile} DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)\n`,
      stderr: `cannot read ${absent}: no such file\n`,
    });
  });

  it("a document without kind or name is still named by what it has", async () => {
    const out = await validateFiles(["-"], () =>
      Promise.resolve("apiVersion: dpo.dev/v1beta1\nmetadata: {name: nokind}\n---\n[1, 2]\n"),
    );
    expect(out.problems[0]).toMatch(/^<stdin>#0 <no kind>\/nokind: /);
    expect(out.results).toContain("<stdin>#1: invalid");
  });

  it("dpo validate --output json prints JSON on stdout whatever the verdict", async () => {
    const out = await dpo("validate", "-o", "json", invalidFile);
    expect(out.code).toBe(1);
    expect(out.stderr).toBe("");
    expect(JSON.parse(out.stdout)).toMatchObject({ valid: false, documents: [{ result: "invalid" }] });
  });

  it("dpo crds | head: a reader that stops early ends the command quietly, without a stack trace", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", join(repo, "src", "cli", "main.ts"), "crds"], {
      cwd: repo,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    // Close the pipe before the command writes, as `head -c 10` does after its first read: the command's
    // write then meets a pipe nobody reads (its 79 KB would otherwise fit in what the reader takes at once).
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });

  it("kustomize build | dpo validate - reads standard input", () => {
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", join(repo, "src", "cli", "main.ts"), "validate", "-"],
      {
        input: KUSTOMIZE_STREAM,
        encoding: "utf8",
        cwd: repo,
      },
    );
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.stdout).toBe(
      [
        "<stdin>#0 Namespace/dpo-system: skipped (v1)",
        "<stdin>#1 Deployment/dpo-operator: skipped (apps/v1)",
        "<stdin>#2 DeviceNodeState/a: skipped (dpo.dev/v1beta1)",
        "<stdin>#3 DevicePluginConfig/example-foo: valid (dpo.dev/v1beta1)",
        "",
      ].join("\n"),
    );
  });
});
