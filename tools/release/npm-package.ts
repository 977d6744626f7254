// The npm package of the dpo CLI: the bundle (dist/dpo.js and its chunks, which carry every runtime
// dependency), a package.json with no dependencies to fetch, the license and a short README, packed with
// `npm pack`. `make release` and test/protocol/npm-package.test.ts both build it here.
import { execFile } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The fields of the repository's package.json the CLI package keeps. */
export interface RootPackage {
  name: string;
  version: string;
  description?: string;
  license?: string;
  engines?: Record<string, string>;
  bin?: Record<string, string>;
}

/** The names under which kubectl finds the dpo program: `kubectl dpo ...` and its completion. */
export const KUBECTL_BINS = ["kubectl-dpo", "kubectl_complete-dpo"] as const;

/**
 * The CLI package's package.json: the repository's name, version, licence, engines and bin, and no
 * dependencies of any kind, because the bundle holds them all (`npm install --offline` must succeed with an
 * empty cache). Refuses a package.json without what the CLI needs, naming the field, and an unscoped name:
 * `npx dpo` where the package is not installed fetches whatever the public registry calls `dpo`, someone
 * else's package, while `npx @dpo-dev/dpo` can only be ours.
 */
export function cliPackageManifest(root: RootPackage): Record<string, unknown> {
  const bin = root.bin?.["dpo"];
  if (typeof root.name !== "string" || root.name === "") throw new Error("package.json: name is missing");
  if (!/^@[a-z0-9][a-z0-9._-]*\/[a-z0-9][a-z0-9._-]*$/.test(root.name)) {
    throw new Error(
      `package.json: name is '${root.name}', expected a scoped name (@scope/name) that npx cannot mistake for another package`,
    );
  }
  if (typeof root.version !== "string" || root.version === "")
    throw new Error("package.json: version is missing");
  if (bin !== "dist/dpo.js") throw new Error(`package.json: bin.dpo is ${String(bin)}, expected dist/dpo.js`);
  // kubectl runs a plugin found on the PATH as kubectl-<name>, and completes its arguments through
  // kubectl_complete-<name>: the same program under the names kubectl looks for.
  for (const name of KUBECTL_BINS) {
    const path = root.bin?.[name];
    if (path !== bin) throw new Error(`package.json: bin.${name} is ${String(path)}, expected ${bin}`);
  }
  return {
    name: root.name,
    version: root.version,
    description: `${root.description ?? "dpo"}: the dpo command (validate, convert, crds, probe, operator, plugin) and kubectl dpo`,
    license: root.license ?? "UNLICENSED",
    type: "module",
    bin: { dpo: bin, ...Object.fromEntries(KUBECTL_BINS.map((name) => [name, bin])) },
    files: ["dist", "LICENSE", "README.md"],
    ...(root.engines ? { engines: root.engines } : {}),
  };
}

/**
 * Which of dist/'s top-level files go into the package: the bundle, its lazily loaded chunks and the build
 * information (the commit `dpo --version` prints). Source maps stay out (stack traces keep their names).
 */
export function cliDistFiles(names: readonly string[]): string[] {
  return names.filter((name) => /^dpo(?:-[A-Z0-9]+)?\.js$/.test(name) || name === "build-info.json").sort();
}

const PACKAGE_README = `# dpo — the device-plugin operator's command line

\`\`\`sh
npm install -g ./dpo-cli-<version>.tgz   # or, in a project that installed it: npx @dpo-dev/dpo ...
dpo validate config/*.yaml               # exit 0 valid, 1 invalid, 2 unreadable or usage error
kustomize build overlays/prod | dpo validate -
dpo validate --junit report.xml FILE...  # and a JUnit report for CI; -o json for tools
dpo convert --to v1beta1 FILE...         # move manifests between dpo.dev/v1alpha1 and v1beta1
dpo crds                                 # the CRDs as YAML
dpo probe --config FILE                  # what a backend finds on this machine
kubectl dpo rollout status CONFIG        # installed as kubectl-dpo too: follow a config's rollout
dpo --version
\`\`\`

One file with no dependencies to install: Node.js 24 or newer runs it. The operator and the plugins run
from the container image of the same release.
`;

/**
 * Packs the CLI package of the built checkout at \`repo\` (make build first) into \`outDir\` as
 * dpo-cli-<version>.tgz, a name apart from the chart's dpo-<version>.tgz; returns the file's path.
 */
export async function packCliPackage(repo: string, outDir: string): Promise<string> {
  const root = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as RootPackage;
  const manifest = cliPackageManifest(root);
  const dist = cliDistFiles(readdirSync(join(repo, "dist")));
  if (!dist.includes("dpo.js"))
    throw new Error(`${join(repo, "dist", "dpo.js")} is missing: run make build first`);
  const work = mkdtempSync(join(tmpdir(), "dpo-cli-package-"));
  const stage = join(work, "package");
  try {
    mkdirSync(join(stage, "dist"), { recursive: true });
    for (const name of dist) copyFileSync(join(repo, "dist", name), join(stage, "dist", name));
    copyFileSync(join(repo, "LICENSE"), join(stage, "LICENSE"));
    writeFileSync(join(stage, "README.md"), PACKAGE_README);
    writeFileSync(join(stage, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    // Packed beside the stage, then moved: npm names it dpo-<version>.tgz, which in outDir is the chart's.
    const packDir = join(work, "packed");
    mkdirSync(packDir);
    // A cache of its own: packing a local directory fetches nothing, and the user's cache stays untouched.
    const { stdout } = await run(
      "npm",
      [
        "pack",
        "--json",
        "--ignore-scripts",
        "--pack-destination",
        packDir,
        "--cache",
        join(work, "cache"),
        stage,
      ],
      { maxBuffer: 16 << 20 },
    );
    const [packed] = JSON.parse(stdout) as { filename: string }[];
    if (!packed) throw new Error(`npm pack printed no file: ${stdout}`);
    mkdirSync(outDir, { recursive: true });
    const target = join(outDir, `dpo-cli-${root.version}.tgz`);
    copyFileSync(join(packDir, packed.filename), target);
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
