// The node binary of the dpo image for each platform, from the npm registry's `node` package family that the
// toolchain installs (tools/toolchain/node.sh): `node@<version>` installs `node-linux-<arch>@<version>` for
// the machine it runs on, so this machine's is the toolchain's own binary, and another architecture's is
// that platform package itself, fetched with npm and checked against the registry's integrity as npm checks
// every package it installs.
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { cacheRoot, log, repo, run } from "./build-host.js";
import { NODE_VERSION } from "./images.js";
import { isHost, type ImagePlatform } from "./platforms.js";

/** The pinned release's binary from the npm `node` package, even where the machine's Node is newer. */
export function pinnedNode(): string {
  const bin = run(join(repo, "tools", "toolchain", "node.sh"), [], {
    env: { ...process.env, DPO_PIN_NODE: "1" },
  })
    .trim()
    .split("\n")
    .at(-1);
  const node = realpathSync(join(bin ?? "", "node"));
  const version = run(node, ["--version"]).trim();
  if (version !== `v${NODE_VERSION}`)
    throw new Error(`${node} is ${version}, not v${NODE_VERSION} (.node-version)`);
  return node;
}

/** The npm package that holds a platform's node binary, at the pinned release. */
export function nodePackage(platform: ImagePlatform): string {
  return `node-linux-${platform.nodeArch}@${NODE_VERSION}`;
}

/** A file's integrity as npm writes it (Subresource Integrity, sha512). */
export function integrityOf(file: string): string {
  return `sha512-${createHash("sha512").update(readFileSync(file)).digest("base64")}`;
}

/**
 * The platform package's tarball, fetched once into the tools cache (`npm pack`) and checked against the
 * integrity the registry gives for it, on every build (the registry's answer is kept beside the tarball).
 */
function platformTarball(platform: ImagePlatform): string {
  const spec = nodePackage(platform);
  const dir = join(cacheRoot, "image-node", spec.replace("@", "-"));
  const tarball = join(dir, "package.tgz");
  const integrityFile = join(dir, "integrity");
  if (existsSync(tarball) && existsSync(integrityFile)) {
    const expected = readFileSync(integrityFile, "utf8").trim();
    if (integrityOf(tarball) === expected) return tarball;
    log(`${spec}: the cached tarball differs from the registry's integrity; fetching it again`);
  }
  mkdirSync(join(cacheRoot, "image-node"), { recursive: true });
  const staging = mkdtempSync(join(cacheRoot, "image-node", ".fetch-"));
  try {
    log(`npm pack ${spec} (the node binary of the ${platform.architecture} image)`);
    const registry = JSON.parse(run("npm", ["view", spec, "dist.integrity", "--json"], { cwd: staging })) as
      string | undefined;
    if (typeof registry !== "string" || !registry.startsWith("sha512-"))
      throw new Error(`npm view ${spec} dist.integrity: no sha512 integrity (${JSON.stringify(registry)})`);
    const [packed] = JSON.parse(
      run("npm", ["pack", spec, "--json", "--pack-destination", staging], { cwd: staging }),
    ) as { filename: string }[];
    if (!packed) throw new Error(`npm pack ${spec} packed nothing`);
    const fetched = join(staging, packed.filename);
    const actual = integrityOf(fetched);
    if (actual !== registry)
      throw new Error(`${spec}: the tarball's ${actual} is not the registry's ${registry}`);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    renameSync(fetched, tarball);
    // Last: a tarball without it is fetched again, never taken for a checked one.
    writeFileSync(integrityFile, `${registry}\n`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  return tarball;
}

/**
 * The node binary for `platform`: the toolchain's for this machine's architecture, the platform package's
 * `bin/node` (extracted into `work`) for another one.
 */
export function imageNode(platform: ImagePlatform, work: string): string {
  if (isHost(platform)) return pinnedNode();
  const tarball = platformTarball(platform);
  const dir = join(work, "node-package");
  mkdirSync(dir, { recursive: true });
  run("tar", ["--extract", "--gzip", `--file=${tarball}`, `--directory=${dir}`, "package/bin/node"]);
  const node = join(dir, "package", "bin", "node");
  if (!existsSync(node)) throw new Error(`${nodePackage(platform)} has no bin/node`);
  return node;
}
