// `make version VERSION=x.y.z`: sets the release version in package.json and every place that follows it
// (tools/release/versions.ts lists them), and releases CHANGELOG.md's Unreleased section under it.
//   node --import tsx tools/release/bump.ts x.y.z [--date YYYY-MM-DD]
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  bumpVersion,
  checkoutReader,
  packageVersion,
  parseReleaseVersion,
  versionDrift,
} from "./versions.js";

const repo = join(import.meta.dirname, "..", "..");
const usage = "usage: make version VERSION=x.y.z (tools/release/bump.ts x.y.z [--date YYYY-MM-DD])";

function fail(message: string): never {
  console.error(`version: ${message}`);
  process.exit(2);
}

const args = process.argv.slice(2);
let date = new Date().toISOString().slice(0, 10);
const positional: string[] = [];
for (let i = 0; i < args.length; i++) {
  const arg = args[i] ?? "";
  if (arg === "--date") {
    date = args[++i] ?? "";
    if (!/^\d{4}-\d{2}-\d{2}$/.test(date)) fail(`--date: "${date}" is not YYYY-MM-DD\n${usage}`);
  } else if (arg.startsWith("-")) {
    fail(`unknown flag ${arg}\n${usage}`);
  } else {
    positional.push(arg);
  }
}
if (positional.length !== 1 || positional[0] === "") fail(`VERSION: give exactly one version\n${usage}`);

const previous = packageVersion(repo);
let files: Map<string, string>;
try {
  files = bumpVersion(checkoutReader(repo), parseReleaseVersion(positional[0] ?? ""), date);
} catch (error) {
  fail((error as Error).message);
}
for (const [file, text] of files) writeFileSync(join(repo, file), text);
// A longer version widens the docs' tables: format what prettier formats, as make lint checks it.
const formatted = [...files.keys()].filter((file) => /\.(md|json|ya?ml)$/.test(file));
execFileSync("npx", ["prettier", "--write", "--log-level", "warn", ...formatted], {
  cwd: repo,
  stdio: "inherit",
});

const after = versionDrift(repo);
if (after.length > 0) fail(`some places did not follow:\n  ${after.join("\n  ")}`);
const next = packageVersion(repo);
console.log(`version ${previous} -> ${next}:\n  ${[...files.keys()].join("\n  ")}`);
console.log(`Next: fill in CHANGELOG.md's ${next} section, commit, tag v${next}, then make release.`);
