// `make manifests`: writes the generated CRDs and kustomization; `--check` only reports stale files (exit 1).
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { GENERATED_DIRS, renderManifestFiles } from "./manifests.js";

const repoRoot = resolve(import.meta.dirname, "..", "..");

async function readOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Generated-directory YAML files that the generator no longer produces (a renamed or removed CRD). */
async function leftoverFiles(expected: ReadonlyMap<string, string>): Promise<string[]> {
  const leftovers: string[] = [];
  for (const dir of GENERATED_DIRS) {
    const entries = await readdir(join(repoRoot, dir)).catch(() => []);
    for (const entry of entries) {
      const relative = `${dir}/${entry}`;
      if (entry.endsWith(".yaml") && !expected.has(relative)) leftovers.push(relative);
    }
  }
  return leftovers;
}

async function main(args: string[]): Promise<number> {
  const check = args.includes("--check");
  const files = renderManifestFiles();
  const stale: string[] = [];
  for (const [relative, text] of files) {
    const path = join(repoRoot, relative);
    if ((await readOrUndefined(path)) === text) continue;
    stale.push(relative);
    if (!check) {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, text);
    }
  }
  const leftovers = await leftoverFiles(files);
  if (!check) await Promise.all(leftovers.map((relative) => rm(join(repoRoot, relative))));

  if (check) {
    for (const relative of [...stale, ...leftovers]) process.stderr.write(`stale: ${relative}\n`);
    if (stale.length + leftovers.length > 0) {
      process.stderr.write("generated manifests are out of date: run make manifests\n");
      return 1;
    }
    return 0;
  }
  for (const relative of stale) process.stdout.write(`wrote ${relative}\n`);
  for (const relative of leftovers) process.stdout.write(`removed ${relative}\n`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
