// The dpo image, the Dockerfile's final stage: the pinned node binary, Debian's libraries, the bundle, the
// production node_modules and the compile cache, in four layers.
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { log, outDir, repo, run, sha256, type BuildContext } from "./build-host.js";
import { installPackages } from "./debian-packages.js";
import { DEBIAN_PACKAGES_LABEL, dpoImage, NODE_VERSION } from "./images.js";
import { writeArchive, writeLayers, type PlatformLayers } from "./layers.js";
import { imageNode } from "./node-binary.js";
import { PLATFORMS, type ImagePlatform } from "./platforms.js";
import { removeEmulator, rootfsCommand } from "./qemu.js";
import { copyTree, linkTree, makeDirs, walk, writeSystemFiles } from "./rootfs.js";

/** Renames a finished cache entry into place, unless a build beside this one got there first. */
function keep(staging: string, dir: string): void {
  try {
    renameSync(staging, dir);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(dir)) throw error;
  }
}

/**
 * `npm ci --omit=dev --ignore-scripts` in a directory of its own, as the Dockerfile's runtime-deps stage
 * does, kept in .local/image/cache/ until package.json or the lock file changes.
 */
function productionDependencies(): string {
  const manifest = readFileSync(join(repo, "package.json"));
  const lock = readFileSync(join(repo, "package-lock.json"));
  const cache = join(outDir, "cache");
  const name = `node-modules-${sha256(manifest, lock, NODE_VERSION, dpoImage.installDependencies.join(" ")).slice(0, 16)}`;
  const dir = join(cache, name);
  if (existsSync(join(dir, "node_modules"))) return join(dir, "node_modules");
  mkdirSync(cache, { recursive: true });
  for (const old of readdirSync(cache).filter((entry) => entry.startsWith("node-modules-"))) {
    rmSync(join(cache, old), { recursive: true, force: true });
  }
  const staging = mkdtempSync(join(cache, ".node-modules-"));
  writeFileSync(join(staging, "package.json"), manifest);
  writeFileSync(join(staging, "package-lock.json"), lock);
  const [npm, ...install] = dpoImage.installDependencies;
  log(`${dpoImage.installDependencies.join(" ")} for the image's node_modules`);
  run(npm ?? "npm", [...install, "--no-audit", "--no-fund"], { cwd: staging });
  keep(staging, dir);
  return join(dir, "node_modules");
}

/** A hash of a directory's paths, link targets and file contents. */
function treeHash(root: string): string {
  const hash = createHash("sha256");
  for (const path of walk(root)) {
    const full = join(root, path);
    const stats = lstatSync(full);
    hash.update(`${path}\0${stats.mode}\0`);
    if (stats.isSymbolicLink()) hash.update(readlinkSync(full));
    else if (stats.isFile()) hash.update(readFileSync(full));
  }
  return hash.digest("hex");
}

/**
 * The Dockerfile's last RUN: the entrypoint with the compile-cache arguments, inside the image's root
 * filesystem. Node keys its compile cache by each module's absolute path (and by its version and V8
 * flags), so it has to run where the files are /app/dist/...: in a chroot, or (not root) a user namespace's.
 * Another architecture's node runs there under QEMU (the static emulator copied in for the run and removed
 * after), as `docker buildx` runs a RUN of another platform.
 *
 * V8's code cache differs from run to run, so the result is kept in .local/image/cache/ and used again
 * while everything it depends on is the same: an unchanged tree gives an unchanged digest.
 */
function writeCompileCache(rootfs: string, dependencies: string, platform: ImagePlatform): void {
  const { config } = dpoImage;
  const env = Object.fromEntries(
    config.Env.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
  );
  const command = [...(config.Entrypoint ?? []), ...dpoImage.compileCacheRun];
  const cacheDir = env.NODE_COMPILE_CACHE;
  if (cacheDir === undefined) throw new Error("the dpo image's config has no NODE_COMPILE_CACHE");
  const inputs = [
    NODE_VERSION,
    platform.nodeArch,
    JSON.stringify([command, config.Env, config.WorkingDir]),
    treeHash(join(rootfs, dpoImage.app.dist.slice(1))),
    dependencies,
  ];
  // Named by architecture: each platform keeps its own beside the other's.
  const prefix = `compile-cache-${platform.architecture}-`;
  const kept = join(outDir, "cache", `${prefix}${sha256(inputs.join("\0")).slice(0, 16)}`);
  const target = join(rootfs, cacheDir.slice(1));
  // Under a directory of its own in the cache, so that copying it back gives the modes node chose.
  if (existsSync(join(kept, "cache"))) {
    copyTree(join(kept, "cache"), target);
    return;
  }
  // unshare finds `node` on the image's PATH inside the new root: the check that the entrypoint resolves
  // (QEMU is given the program found on the image's PATH the same way).
  const [unshare, args] = rootfsCommand(platform, rootfs, command, env.PATH ?? "", config.WorkingDir);
  try {
    run(unshare, args, { env });
  } finally {
    removeEmulator(rootfs);
  }
  if (!existsSync(target) || walk(target).length === 0)
    throw new Error(`${command.join(" ")} left ${cacheDir} empty`);
  const cache = dirname(kept);
  // This platform's older entries, and those named before there was one per platform.
  const stale = (entry: string) => entry.startsWith(prefix) || /^compile-cache-[0-9a-f]{16}$/.test(entry);
  for (const old of readdirSync(cache).filter(stale)) {
    rmSync(join(cache, old), { recursive: true, force: true });
  }
  const staging = mkdtempSync(join(cache, ".compile-cache-"));
  copyTree(target, join(staging, "cache"));
  keep(staging, kept);
}

/** One platform's root filesystem in `dir`/rootfs, cut into the image's four layers. */
function buildPlatform(
  ctx: BuildContext,
  platform: ImagePlatform,
  dir: string,
  dependencies: string,
): PlatformLayers {
  const rootfs = join(dir, "rootfs");
  makeDirs(dir, "rootfs");
  writeSystemFiles(rootfs, [
    { name: "root", id: 0, home: "/root", shell: "/sbin/nologin" },
    // The operator's uid (config/manager), as distroless names it.
    { name: "nonroot", id: 65532, home: "/home/nonroot", shell: "/sbin/nologin" },
    { name: "nobody", id: 65534, home: "/nonexistent", shell: "/sbin/nologin" },
  ]);
  const node = imageNode(platform, dir);
  const nodePath = dpoImage.node.path.slice(1);
  makeDirs(rootfs, dirname(nodePath));
  copyFileSync(node, join(rootfs, nodePath));
  chmodSync(join(rootfs, nodePath), 0o755);
  const packages = installPackages(dpoImage.debian, node, rootfs, dir, platform);

  const { app } = dpoImage;
  makeDirs(rootfs, app.dir);
  copyTree(join(repo, "dist"), join(rootfs, app.dist.slice(1)));
  // make release writes its files (this image's archive among them) into dist/release/: the Dockerfile's
  // dist is built afresh, and so not the next release's image either.
  rmSync(join(rootfs, app.dist.slice(1), "release"), { recursive: true, force: true });
  linkTree(dependencies, join(rootfs, app.nodeModules.slice(1)));
  copyFileSync(join(repo, "package.json"), join(rootfs, app.packageJson.slice(1)));
  chmodSync(join(rootfs, app.packageJson.slice(1)), 0o644);
  writeCompileCache(rootfs, dependencies, platform);

  const versions = packages.map((pkg) => `${pkg.name}=${pkg.version}`).join(" ");
  // Four layers, so that a new bundle shares node, the libraries and node_modules with the last import.
  const layers = writeLayers(
    rootfs,
    [
      { paths: [nodePath], createdBy: `node v${NODE_VERSION} from the npm node package` },
      { paths: [app.nodeModules.slice(1)], createdBy: dpoImage.installDependencies.join(" ") },
      {
        paths: [app.dir.slice(1)],
        createdBy: `dist, package.json and the compile cache (${dpoImage.compileCacheRun.join(" ")})`,
      },
      { paths: [], createdBy: `Debian packages ${versions}, /etc, /tmp` },
    ],
    dir,
    ctx.epoch,
  );
  // The system layer goes first, as a base image would be.
  const ordered = [layers[3]!, layers[0]!, layers[1]!, layers[2]!];
  return { platform, labels: { [DEBIAN_PACKAGES_LABEL]: versions }, layers: ordered };
}

/** The dpo image for every platform of images.ts, one root filesystem each, in one OCI index. */
export function buildDpo(ctx: BuildContext, work: string) {
  if (!existsSync(join(repo, "dist", "dpo.js")))
    throw new Error("dist/dpo.js is missing: run make build (make image does)");
  const dependencies = productionDependencies();
  const platforms = PLATFORMS.filter((p) => ctx.platforms.includes(p.architecture));
  const images = platforms.map((platform) => {
    const started = Date.now();
    const dir = join(work, platform.architecture);
    makeDirs(work, platform.architecture);
    const built = buildPlatform(ctx, platform, dir, dependencies);
    // The root filesystem is in the layers now: 250 MB a platform that need not wait for the end.
    rmSync(join(dir, "rootfs"), { recursive: true, force: true });
    log(
      `  ${platform.architecture}: root filesystem and layers in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    return built;
  });
  return writeArchive(ctx, dpoImage, images, work);
}
