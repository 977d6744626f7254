// apt for an image's platform: this machine's own apt for its architecture, and for another architecture
// a private apt state in the tools cache (its own lists and archive cache, APT::Architecture set to that
// architecture) over the machine's sources, so that arm64 packages come from the same Debian mirror and
// release, checked against the same archive keys, without `dpkg --add-architecture` on the machine.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot, log, run } from "./build-host.js";
import { isHost, type ImagePlatform } from "./platforms.js";

/** The options that point apt-get at a private state for `platform`'s architecture. */
function foreignOptions(dir: string, platform: ImagePlatform): string[] {
  return [
    "-o",
    `Dir::State::Lists=${join(dir, "lists")}`,
    "-o",
    `Dir::Cache=${join(dir, "cache")}`,
    "-o",
    `APT::Architecture=${platform.debianArch}`,
    "-o",
    `APT::Architectures::=${platform.debianArch}`,
    // The tools cache is in root's home, which apt's download user cannot enter.
    "-o",
    "APT::Sandbox::User=root",
  ];
}

/**
 * The apt-get options for `platform`: none for this machine's architecture; for another one, a private
 * state whose lists are fetched (`apt-get update`) again whenever the machine's own lists change, so that
 * both architectures' packages come from the same moment of the same mirror and a build repeats until then.
 */
export function aptOptions(platform: ImagePlatform, hostListsStamp: string): string[] {
  if (isHost(platform)) return [];
  const dir = join(cacheRoot, `apt-${platform.debianArch}`);
  const options = foreignOptions(dir, platform);
  const stampFile = join(dir, "machine-lists.stamp");
  if (existsSync(stampFile) && readFileSync(stampFile, "utf8") === hostListsStamp) return options;
  log(`apt-get update for ${platform.debianArch} (a private state in ${dir})`);
  mkdirSync(join(dir, "lists", "partial"), { recursive: true });
  mkdirSync(join(dir, "cache", "archives", "partial"), { recursive: true });
  try {
    // One update at a time: a test and `make image` may build at once, and apt's own lock would fail the second.
    run("flock", [join(dir, "update.lock"), "apt-get", ...options, "-qq", "update"]);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new Error(`apt-get update for ${platform.debianArch} (the machine's Debian mirror): ${why}`, {
      cause: error,
    });
  }
  const staging = `${stampFile}.${process.pid}`;
  writeFileSync(staging, hostListsStamp);
  renameSync(staging, stampFile);
  return options;
}
