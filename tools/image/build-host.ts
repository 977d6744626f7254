// What the image build takes from the machine and the checkout: where things go, how a command runs, the
// timestamp and architecture every image of one run shares, and the Go tools it builds.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { homedir } from "node:os";
import { join } from "node:path";

export const repo = join(import.meta.dirname, "..", "..");
export const outDir = join(repo, ".local", "image");
export const cacheRoot =
  process.env.DPO_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "dpo");

export function log(message: string): void {
  process.stderr.write(`image: ${message}\n`);
}

export function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): string {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (result.error) throw new Error(`${command}: ${result.error.message}`, { cause: result.error });
  if (result.status !== 0) {
    const how = result.status === null ? `was killed by ${result.signal}` : `exited with ${result.status}`;
    throw new Error(`${command} ${args.join(" ")} ${how}\n${result.stderr.trim()}`);
  }
  return result.stdout;
}

export function sha256(...parts: (string | Buffer)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}

/** What every image of one run shares. */
export interface BuildContext {
  /** SOURCE_DATE_EPOCH, or the commit's time: every file's mtime and the config's `created`. */
  epoch: number;
  /** The architectures of the dpo image (every one of platforms.ts unless IMAGE_PLATFORMS names fewer). */
  platforms: string[];
  assembleTool: string;
}

export function sourceDateEpoch(): number {
  const fromEnv = process.env.SOURCE_DATE_EPOCH;
  if (fromEnv !== undefined && /^\d+$/.test(fromEnv)) return Number(fromEnv);
  try {
    return Number(run("git", ["-C", repo, "log", "-1", "--format=%ct"]).trim());
  } catch (error) {
    throw new Error("no git commit to take the image's timestamps from: set SOURCE_DATE_EPOCH", {
      cause: error,
    });
  }
}

/**
 * The dpo image's architectures: IMAGE_PLATFORMS (`amd64`, `arm64`, or both, comma-separated; `linux/`
 * before each is allowed) for a quicker build of one, or all of them (the release's image).
 */
export function imagePlatforms(known: string[], value = process.env.IMAGE_PLATFORMS): string[] {
  if (value === undefined || value.trim() === "") return known;
  const names = value.split(",").map((name) => name.trim().replace(/^linux\//, ""));
  const unknown = names.filter((name) => !known.includes(name));
  if (unknown.length > 0 || names.length === 0)
    throw new Error(`IMAGE_PLATFORMS: ${unknown.join(", ")} is not one of ${known.join(", ")}`);
  return known.filter((name) => names.includes(name));
}

/** A Go tool under tools/image/, built once into the tools cache by its build.sh; the binary's path. */
export function goTool(name: string): string {
  const path = run(join(import.meta.dirname, name, "build.sh"), [])
    .trim()
    .split("\n")
    .at(-1);
  if (!path) throw new Error(`tools/image/${name}/build.sh printed no binary path`);
  return path;
}
