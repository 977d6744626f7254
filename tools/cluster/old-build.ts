// Builds dpo as it was at an earlier commit, from this repository's own history, into a cache under
// .local/builds/<commit>/, so upgrade tests run real old code against the current tree. The first call
// extracts the commit (git archive), installs its locked dependencies and bundles it (its own
// `make build`); later calls find the bundle and return at once.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

export interface OldBuild {
  commit: string;
  /** The bundled CLI of that commit: `node <entrypoint> operator|plugin ...`. */
  entrypoint: string;
}

/** The full hash of a commit of this repository (throws when it is not in the history). */
async function resolveCommit(ref: string): Promise<string> {
  const { stdout } = await run("git", ["-C", REPO, "rev-parse", "--verify", `${ref}^{commit}`]);
  return stdout.trim();
}

export async function buildAt(
  ref: string,
  options: { log?: (line: string) => void } = {},
): Promise<OldBuild> {
  const commit = await resolveCommit(ref);
  const dir = join(REPO, ".local", "builds", commit);
  const entrypoint = join(dir, "dist", "dpo.js");
  if (existsSync(entrypoint)) return { commit, entrypoint };
  const work = `${dir}.partial-${process.pid}`;
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  options.log?.(`building dpo at ${commit.slice(0, 12)} into ${dir}`);
  await run("sh", ["-c", `git -C "${REPO}" archive "${commit}" | tar -x -C "${work}"`], {
    maxBuffer: 64 * 1024 * 1024,
  });
  // Its own build, with the Node on PATH (the project's pinned one when run from make). The directory
  // is not a git checkout of its own, so the build info is written afterwards with the real commit.
  await run("make", ["-C", work, "build"], { maxBuffer: 64 * 1024 * 1024, timeout: 15 * 60_000 });
  await writeFile(join(work, "dist", "build-info.json"), `${JSON.stringify({ gitCommit: commit })}\n`);
  await rm(dir, { recursive: true, force: true });
  await rename(work, dir);
  return { commit, entrypoint };
}
