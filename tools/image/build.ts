// Builds the images of images.ts as OCI archives with no container engine and no registry: the dpo image
// (the Dockerfile's final stage) and the real-node test tier's pause and busybox images.
//
//   tools/image/build.sh [dpo|pause|busybox|test-images|all]...   (dpo when none is named)
//
// Each image is a root filesystem put together in .local/image/work/, cut into layers by GNU tar with
// fixed owners and times in a fixed order (the same inputs give the same digest), assembled by
// go-containerregistry (oci-assemble/) and packed into .local/image/<name>-<tag>.oci.tar. Prints the path
// of each archive; the reference and digest go to stderr.
import { spawnSync } from "node:child_process";
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
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join, normalize, relative } from "node:path";
import {
  busyboxImage,
  DEBIAN_PACKAGES_LABEL,
  dpoImage,
  imageArchive,
  imageReference,
  IMAGES,
  NODE_VERSION,
  pauseImage,
  type DebianPackage,
  type ImageDefinition,
} from "./images.js";

const repo = join(import.meta.dirname, "..", "..");
const outDir = join(repo, ".local", "image");
const cacheRoot =
  process.env.DPO_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "dpo");

function log(message: string): void {
  process.stderr.write(`image: ${message}\n`);
}

function run(
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

function sha256(...parts: (string | Buffer)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(part);
  return hash.digest("hex");
}

/** What every image of one run shares. */
interface BuildContext {
  /** SOURCE_DATE_EPOCH, or the commit's time: every file's mtime and the config's `created`. */
  epoch: number;
  architecture: string;
  assembleTool: string;
}

function sourceDateEpoch(): number {
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

/** The OCI architecture of this machine, which is the one the npm `node` package and apt give us. */
function ociArchitecture(): string {
  const architectures: Record<string, string> = { x64: "amd64", arm64: "arm64" };
  const architecture = architectures[process.arch];
  if (architecture === undefined)
    throw new Error(`no image build for ${process.arch} (amd64 and arm64 only)`);
  return architecture;
}

/** A Go tool under tools/image/, built once into the tools cache by its build.sh; the binary's path. */
function goTool(name: string): string {
  const path = run(join(import.meta.dirname, name, "build.sh"), [])
    .trim()
    .split("\n")
    .at(-1);
  if (!path) throw new Error(`tools/image/${name}/build.sh printed no binary path`);
  return path;
}

// ---- Root filesystems -------------------------------------------------------------------------------------

function makeDirs(rootfs: string, dir: string): void {
  const parts = dir.split("/").filter((part) => part !== "");
  for (let i = 1; i <= parts.length; i++) {
    const path = join(rootfs, ...parts.slice(0, i));
    if (!existsSync(path)) {
      mkdirSync(path);
      chmodSync(path, 0o755); // not the umask's choice: modes are part of the digest
    }
  }
}

function writeRootfsFile(rootfs: string, path: string, content: string | Buffer, mode: number): void {
  makeDirs(rootfs, dirname(path));
  const target = join(rootfs, path);
  writeFileSync(target, content);
  chmodSync(target, mode);
}

interface Account {
  name: string;
  id: number;
  home: string;
  shell: string;
}

/** /etc/passwd, /etc/group, /etc/nsswitch.conf, /root and a world-writable /tmp, as a Debian image has. */
function writeSystemFiles(rootfs: string, accounts: Account[]): void {
  const passwd = accounts.map((a) => `${a.name}:x:${a.id}:${a.id}:${a.name}:${a.home}:${a.shell}\n`).join("");
  const group = accounts.map((a) => `${a.name}:x:${a.id}:\n`).join("");
  writeRootfsFile(rootfs, "etc/passwd", passwd, 0o644);
  writeRootfsFile(rootfs, "etc/group", group, 0o644);
  // Without this glibc asks DNS before /etc/hosts.
  writeRootfsFile(rootfs, "etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files dns\n", 0o644);
  makeDirs(rootfs, "root");
  chmodSync(join(rootfs, "root"), 0o700);
  makeDirs(rootfs, "tmp");
  chmodSync(join(rootfs, "tmp"), 0o1777);
}

/**
 * Copies one entry of an extracted package into the root filesystem; a symbolic link is copied as a link,
 * and what it points at (inside the same package) too.
 */
function copyPackageEntry(
  tree: string,
  path: string,
  rootfs: string,
  packageName: string,
  seen = new Set<string>(),
): void {
  if (seen.has(path)) return;
  seen.add(path);
  const source = join(tree, path);
  if (!existsSync(source) && !isSymlink(source)) throw new Error(`${packageName}: has no ${path}`);
  const stats = lstatSync(source);
  makeDirs(rootfs, dirname(path));
  const target = join(rootfs, path);
  if (stats.isSymbolicLink()) {
    const link = readlinkSync(source);
    rmSync(target, { force: true });
    symlinkSync(link, target);
    const pointsAt = link.startsWith("/") ? link.slice(1) : join(dirname(path), link);
    copyPackageEntry(tree, normalize(pointsAt), rootfs, packageName, seen);
  } else if (stats.isFile()) {
    copyFileSync(source, target);
    chmodSync(target, stats.mode & 0o7777);
  } else {
    throw new Error(`${packageName}: ${path} is neither a file nor a symbolic link`);
  }
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * A copy of a directory with its modes and links as they are. GNU cp, not fs.cpSync: node_modules has
 * 8,600 entries, which cp copies in a third of the time.
 */
function copyTree(source: string, target: string): void {
  run("cp", ["--recursive", "--no-dereference", "--preserve=mode,links", "--", source, target]);
}

/** Every path under a directory, relative to it, parents before children, in a fixed (byte) order. */
function walk(root: string, dir = ""): string[] {
  const paths: string[] = [];
  for (const name of readdirSync(join(root, dir)).sort()) {
    const path = dir === "" ? name : `${dir}/${name}`;
    paths.push(path);
    if (lstatSync(join(root, path)).isDirectory()) paths.push(...walk(root, path));
  }
  return paths;
}

// ---- Debian packages --------------------------------------------------------------------------------------

interface FetchedPackage {
  name: string;
  version: string;
  deb: string;
  /** Where `dpkg-deb -x` put its files. */
  tree: string;
}

/** Where apt gets a package's candidate version: the .deb's file name and its hash in apt's lists. */
interface DebLocation {
  file: string;
  algorithm: string;
  hash: string;
}

/** apt's lists as they are now: their names, sizes and times (a change follows apt-get update). */
function aptListsStamp(): string {
  const lists = "/var/lib/apt/lists";
  if (!existsSync(lists)) return "none";
  const entries = readdirSync(lists).map((name) => {
    const stats = statSync(join(lists, name));
    return `${name} ${stats.size} ${stats.mtimeMs}`;
  });
  return sha256(entries.sort().join("\n"));
}

/**
 * Where each package comes from, asked of apt once for all of them and kept in .local/image/cache/ until
 * apt's lists change: without a package cache (Docker-style Debian images have none), every apt-get call
 * parses the lists again, a second or more each.
 */
function aptLocations(names: string[]): Map<string, DebLocation> {
  const file = join(outDir, "cache", "apt-locations.json");
  const stamp = aptListsStamp();
  let kept: { stamp: string; packages: Record<string, DebLocation> } = { stamp, packages: {} };
  if (existsSync(file)) {
    const read = JSON.parse(readFileSync(file, "utf8")) as typeof kept;
    if (read.stamp === stamp) kept = read;
  }
  const unknown = names.filter((name) => !(name in kept.packages));
  if (unknown.length > 0) {
    let uris: string;
    try {
      uris = run("apt-get", ["download", "--print-uris", ...unknown]);
    } catch (error) {
      const which = unknown.join(", ");
      throw new Error(`apt-get has no ${which} (is this Debian, and has apt-get update run?)`, {
        cause: error,
      });
    }
    for (const line of uris.trim().split("\n")) {
      const match = /^'[^']+' (\S+) \d+ (\w+):([0-9a-f]+)$/.exec(line);
      if (!match) throw new Error(`apt-get download --print-uris: unexpected "${line}"`);
      const [, deb, algorithm, hash] = match as unknown as [string, string, string, string];
      const name = unknown.find((n) => deb.startsWith(`${n}_`));
      if (name !== undefined) kept.packages[name] = { file: deb, algorithm, hash };
    }
    const missing = unknown.filter((name) => !(name in kept.packages));
    if (missing.length > 0)
      throw new Error(`apt-get download --print-uris: nothing for ${missing.join(", ")}`);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, JSON.stringify(kept, null, 2));
  }
  return new Map(names.map((name) => [name, kept.packages[name]!]));
}

/**
 * The candidate version of a package, downloaded once into the tools cache (`apt-get download`, checked
 * against the hash apt's lists give) and extracted into the work directory.
 */
function fetchPackage(name: string, work: string): FetchedPackage {
  const { file, algorithm, hash } = aptLocations([name]).get(name)!;
  const hashOf = (path: string) =>
    createHash(algorithm.toLowerCase()).update(readFileSync(path)).digest("hex");
  const debDir = join(cacheRoot, "image-debs");
  const deb = join(debDir, file);
  if (!existsSync(deb) || hashOf(deb) !== hash) {
    mkdirSync(debDir, { recursive: true });
    const download = mkdtempSync(join(debDir, ".download-"));
    try {
      run("apt-get", ["download", name], { cwd: download });
      const fetched = join(download, file);
      if (hashOf(fetched) !== hash) throw new Error(`${file}: ${algorithm} differs from apt's lists`);
      renameSync(fetched, deb);
    } finally {
      rmSync(download, { recursive: true, force: true });
    }
  }
  const tree = join(work, "debs", name);
  mkdirSync(tree, { recursive: true });
  run("dpkg-deb", ["--extract", deb, tree]);
  const version = run("dpkg-deb", ["--field", deb, "Version"]).trim();
  return { name, version, deb, tree };
}

interface NeededLibraries {
  /** The program interpreter (PT_INTERP), an absolute path the kernel opens as it is. */
  interpreter?: string;
  /** soname -> the directory the machine's loader found it in (its multiarch directory). */
  sonames: Map<string, string>;
}

/** What `ldd` says a binary needs, transitively. */
function neededLibraries(binary: string): NeededLibraries {
  const needed: NeededLibraries = { sonames: new Map() };
  for (const line of run("ldd", [binary]).split("\n")) {
    const library = /^\s*(\S+) => (\S+) \(0x[0-9a-f]+\)$/.exec(line);
    const interpreter = /^\s*(\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    if (/not found/.test(line)) throw new Error(`ldd ${binary}: ${line.trim()}`);
    if (library) needed.sonames.set(library[1]!, basename(dirname(library[2]!)));
    else if (interpreter) needed.interpreter = interpreter[1]!;
  }
  return needed;
}

/**
 * Copies the libraries a binary needs from the packages that declare `files: "libraries"`: each soname
 * from the package that has it, preferring the multiarch directory the machine's loader used.
 */
function copyLibraries(binary: string, packages: FetchedPackage[], rootfs: string): void {
  const { interpreter, sonames } = neededLibraries(binary);
  const found = new Map<string, FetchedPackage>();
  const candidates = packages.map((pkg) => ({ pkg, paths: walk(pkg.tree) }));
  const wanted: [string, (path: string) => boolean, (path: string) => number][] = [...sonames].map(
    ([soname, dir]) => [
      soname,
      (path) => basename(path) === soname && /^(usr\/)?lib(32|64)?\//.test(path),
      (path) => (basename(dirname(path)) === dir ? 0 : 1),
    ],
  );
  if (interpreter) wanted.push([interpreter, (path) => `/${path}` === interpreter, () => 0]);
  for (const [what, matches, rank] of wanted) {
    const hits = candidates
      .flatMap(({ pkg, paths }) => paths.filter(matches).map((path) => ({ pkg, path })))
      .sort((a, b) => rank(a.path) - rank(b.path));
    const hit = hits[0];
    if (!hit) {
      const names = packages.map((p) => p.name).join(", ");
      throw new Error(
        `${binary} needs ${what}, which none of ${names} has: add its package to tools/image/images.ts`,
      );
    }
    copyPackageEntry(hit.pkg.tree, hit.path, rootfs, hit.pkg.name);
    found.set(hit.pkg.name, hit.pkg);
  }
  const unused = packages.filter((pkg) => !found.has(pkg.name)).map((pkg) => pkg.name);
  if (unused.length > 0)
    throw new Error(`${binary} needs no library of ${unused.join(", ")}: drop it from tools/image/images.ts`);
}

/**
 * Puts an image's Debian packages into its root filesystem: their files, their copyright notices (from
 * the package a documentation symlink points at, as libstdc++6's does to gcc-12-base) and their control
 * records in /var/lib/dpkg/status.d/, as distroless images keep them for scanners. Returns the packages.
 */
function installPackages(
  declared: DebianPackage[],
  binary: string | undefined,
  rootfs: string,
  work: string,
): FetchedPackage[] {
  const fetched = new Map<string, FetchedPackage>();
  const fetch = (name: string) => {
    const pkg = fetched.get(name) ?? fetchPackage(name, work);
    fetched.set(name, pkg);
    return pkg;
  };
  aptLocations(declared.map((pkg) => pkg.name)); // one question to apt for all of them
  const libraryPackages: FetchedPackage[] = [];
  for (const { name, files } of declared) {
    const pkg = fetch(name);
    if (files === "libraries") libraryPackages.push(pkg);
    else for (const path of files) copyPackageEntry(pkg.tree, path, rootfs, name);
  }
  if (libraryPackages.length > 0) {
    if (binary === undefined)
      throw new Error("packages declare libraries, but the image has no binary to run ldd on");
    copyLibraries(binary, libraryPackages, rootfs);
  }
  for (const pkg of [...fetched.values()]) {
    const doc = `usr/share/doc/${pkg.name}`;
    const docPath = join(pkg.tree, doc);
    if (isSymlink(docPath)) {
      const owner = basename(readlinkSync(docPath));
      makeDirs(rootfs, dirname(doc));
      if (!isSymlink(join(rootfs, doc))) symlinkSync(readlinkSync(docPath), join(rootfs, doc));
      copyPackageEntry(fetch(owner).tree, `usr/share/doc/${owner}/copyright`, rootfs, owner);
    } else {
      copyPackageEntry(pkg.tree, `${doc}/copyright`, rootfs, pkg.name);
    }
  }
  const all = [...fetched.values()].sort((a, b) => a.name.localeCompare(b.name));
  for (const pkg of all) {
    writeRootfsFile(
      rootfs,
      `var/lib/dpkg/status.d/${pkg.name}`,
      run("dpkg-deb", ["--field", pkg.deb]),
      0o644,
    );
  }
  return all;
}

// ---- Layers and the archive -------------------------------------------------------------------------------

/** A layer: the paths under `paths` (relative, no leading slash); the last layer's empty list takes the rest. */
interface LayerRule {
  paths: string[];
  createdBy: string;
}

/** GNU tar's options for a reproducible archive (reproducible-builds.org's recipe). */
function reproducibleTar(epoch: number): string[] {
  return [
    "--format=posix",
    "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
    `--mtime=@${epoch}`,
    "--owner=0",
    "--group=0",
    "--numeric-owner",
  ];
}

/** One uncompressed tar per rule, each with the parent directories of its entries. */
function writeLayers(
  rootfs: string,
  rules: LayerRule[],
  work: string,
  epoch: number,
): { file: string; createdBy: string }[] {
  const members = rules.map(() => new Set<string>());
  const inside = (path: string, prefix: string) => path === prefix || path.startsWith(`${prefix}/`);
  for (const path of walk(rootfs)) {
    let index = rules.findIndex((rule) => rule.paths.some((prefix) => inside(path, prefix)));
    if (index < 0) index = rules.length - 1;
    const set = members[index]!;
    const parts = path.split("/");
    for (let i = 1; i <= parts.length; i++) set.add(parts.slice(0, i).join("/"));
  }
  return rules.map((rule, index) => {
    const paths = [...members[index]!].sort();
    if (paths.length === 0) throw new Error(`layer "${rule.createdBy}" would be empty`);
    const list = join(work, `layer-${index}.list`);
    writeFileSync(list, paths.join("\0"));
    const file = join(work, `layer-${index}.tar`);
    const tar = [
      ...reproducibleTar(epoch),
      "--no-recursion",
      "--null",
      `--directory=${rootfs}`,
      `--files-from=${list}`,
    ];
    run("tar", ["--create", `--file=${file}`, ...tar]);
    return { file, createdBy: rule.createdBy };
  });
}

interface AssembleResult {
  manifest: string;
  config: string;
  layers: { digest: string; diffID: string; size: number }[];
}

/** Assembles the image with oci-assemble and packs the OCI layout into the archive (renamed into place). */
function writeArchive(
  ctx: BuildContext,
  image: ImageDefinition,
  labels: Record<string, string>,
  layers: { file: string; createdBy: string }[],
  work: string,
): { archive: string; result: AssembleResult } {
  const spec = {
    reference: imageReference(image),
    created: new Date(ctx.epoch * 1000).toISOString(),
    os: "linux",
    architecture: ctx.architecture,
    config: { ...image.config, Labels: { ...image.config.Labels, ...labels } },
    layers,
  };
  const specFile = join(work, "spec.json");
  writeFileSync(specFile, JSON.stringify(spec, null, 2));
  const layout = join(work, "layout");
  const layerCache = join(outDir, "cache", `layers-${image.name}`);
  const result = JSON.parse(
    run(ctx.assembleTool, ["-layer-cache", layerCache, specFile, layout]),
  ) as AssembleResult;
  const archive = join(repo, imageArchive(image));
  mkdirSync(dirname(archive), { recursive: true });
  const partial = `${archive}.partial`;
  // go-containerregistry writes files 0755 and some blobs 0600: one mode for all, as the times are.
  for (const path of walk(layout))
    chmodSync(join(layout, path), statSync(join(layout, path)).isDirectory() ? 0o755 : 0o644);
  const tar = [...reproducibleTar(ctx.epoch), "--sort=name", `--directory=${layout}`];
  run("tar", ["--create", `--file=${partial}`, ...tar, "oci-layout", "index.json", "blobs"]);
  renameSync(partial, archive);
  return { archive, result };
}

// ---- The images -------------------------------------------------------------------------------------------

/** The pinned release's binary from the npm `node` package, even where the machine's Node is newer. */
function pinnedNode(): string {
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
 *
 * V8's code cache differs from run to run, so the result is kept in .local/image/cache/ and used again
 * while everything it depends on is the same: an unchanged tree gives an unchanged digest.
 */
function writeCompileCache(rootfs: string, dependencies: string): void {
  const { config } = dpoImage;
  const env = Object.fromEntries(
    config.Env.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
  );
  const command = [...(config.Entrypoint ?? []), ...dpoImage.compileCacheRun];
  const cacheDir = env.NODE_COMPILE_CACHE;
  if (cacheDir === undefined) throw new Error("the dpo image's config has no NODE_COMPILE_CACHE");
  const inputs = [
    NODE_VERSION,
    process.arch,
    JSON.stringify([command, config.Env, config.WorkingDir]),
    treeHash(join(rootfs, dpoImage.app.dist.slice(1))),
    dependencies,
  ];
  const kept = join(outDir, "cache", `compile-cache-${sha256(inputs.join("\0")).slice(0, 16)}`);
  const target = join(rootfs, cacheDir.slice(1));
  // Under a directory of its own in the cache, so that copying it back gives the modes node chose.
  if (existsSync(join(kept, "cache"))) {
    copyTree(join(kept, "cache"), target);
    return;
  }
  const asRoot = process.getuid?.() === 0 ? [] : ["--map-root-user"];
  // unshare finds `node` on the image's PATH inside the new root: the check that the entrypoint resolves.
  run("unshare", [...asRoot, `--root=${rootfs}`, `--wd=${config.WorkingDir ?? "/"}`, "--", ...command], {
    env,
  });
  if (!existsSync(target) || walk(target).length === 0)
    throw new Error(`${command.join(" ")} left ${cacheDir} empty`);
  const cache = dirname(kept);
  for (const old of readdirSync(cache).filter((entry) => entry.startsWith("compile-cache-"))) {
    rmSync(join(cache, old), { recursive: true, force: true });
  }
  const staging = mkdtempSync(join(cache, ".compile-cache-"));
  copyTree(target, join(staging, "cache"));
  keep(staging, kept);
}

function buildDpo(ctx: BuildContext, rootfs: string, work: string) {
  const dist = join(repo, "dist");
  if (!existsSync(join(dist, "dpo.js")))
    throw new Error("dist/dpo.js is missing: run make build (make image does)");
  writeSystemFiles(rootfs, [
    { name: "root", id: 0, home: "/root", shell: "/sbin/nologin" },
    // The operator's uid (config/manager), as distroless names it.
    { name: "nonroot", id: 65532, home: "/home/nonroot", shell: "/sbin/nologin" },
    { name: "nobody", id: 65534, home: "/nonexistent", shell: "/sbin/nologin" },
  ]);
  const node = pinnedNode();
  const nodePath = dpoImage.node.path.slice(1);
  makeDirs(rootfs, dirname(nodePath));
  copyFileSync(node, join(rootfs, nodePath));
  chmodSync(join(rootfs, nodePath), 0o755);
  const packages = installPackages(dpoImage.debian, node, rootfs, work);

  const { app } = dpoImage;
  makeDirs(rootfs, app.dir);
  copyTree(dist, join(rootfs, app.dist.slice(1)));
  const dependencies = productionDependencies();
  copyTree(dependencies, join(rootfs, app.nodeModules.slice(1)));
  copyFileSync(join(repo, "package.json"), join(rootfs, app.packageJson.slice(1)));
  chmodSync(join(rootfs, app.packageJson.slice(1)), 0o644);
  writeCompileCache(rootfs, dependencies);

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
    work,
    ctx.epoch,
  );
  // The system layer goes first, as a base image would be.
  const ordered = [layers[3]!, layers[0]!, layers[1]!, layers[2]!];
  return writeArchive(ctx, dpoImage, { [DEBIAN_PACKAGES_LABEL]: versions }, ordered, work);
}

function buildPause(ctx: BuildContext, rootfs: string, work: string) {
  copyFileSync(goTool("pause"), join(rootfs, "pause"));
  chmodSync(join(rootfs, "pause"), 0o755);
  const layers = writeLayers(
    rootfs,
    [{ paths: [], createdBy: "the pause program of tools/image/pause" }],
    work,
    ctx.epoch,
  );
  return writeArchive(ctx, pauseImage, {}, layers, work);
}

function buildBusybox(ctx: BuildContext, rootfs: string, work: string) {
  writeSystemFiles(rootfs, [
    { name: "root", id: 0, home: "/root", shell: "/bin/sh" },
    { name: "nobody", id: 65534, home: "/nonexistent", shell: "/bin/sh" },
  ]);
  const packages = installPackages(busyboxImage.debian, undefined, rootfs, work);
  // Every applet as a link to the one static binary, where busybox itself would install it.
  const busybox = join(rootfs, "bin", "busybox");
  for (const applet of run(busybox, ["--list-full"])
    .split("\n")
    .filter((line) => line !== "")) {
    if (existsSync(join(rootfs, applet)) || isSymlink(join(rootfs, applet))) continue;
    makeDirs(rootfs, dirname(applet));
    symlinkSync("/bin/busybox", join(rootfs, applet));
  }
  const versions = packages.map((pkg) => `${pkg.name}=${pkg.version}`).join(" ");
  const layers = writeLayers(
    rootfs,
    [{ paths: [], createdBy: `Debian packages ${versions}, applet links` }],
    work,
    ctx.epoch,
  );
  return writeArchive(ctx, busyboxImage, { [DEBIAN_PACKAGES_LABEL]: versions }, layers, work);
}

const BUILDERS: Record<
  string,
  (ctx: BuildContext, rootfs: string, work: string) => ReturnType<typeof writeArchive>
> = {
  dpo: buildDpo,
  pause: buildPause,
  busybox: buildBusybox,
};

const GROUPS: Record<string, string[]> = {
  "test-images": ["pause", "busybox"],
  all: ["dpo", "pause", "busybox"],
};

function main(args: string[]): void {
  const names = [...new Set((args.length > 0 ? args : ["dpo"]).flatMap((arg) => GROUPS[arg] ?? [arg]))];
  const unknown = names.filter((name) => !(name in BUILDERS));
  if (unknown.length > 0) {
    const known = [...Object.keys(BUILDERS), ...Object.keys(GROUPS)].join(", ");
    throw new Error(`unknown image ${unknown.join(", ")} (one of ${known})`);
  }
  process.umask(0o022);
  const ctx: BuildContext = {
    epoch: sourceDateEpoch(),
    architecture: ociArchitecture(),
    assembleTool: goTool("oci-assemble"),
  };
  for (const name of names) {
    const image = IMAGES[name]!;
    const started = Date.now();
    const workRoot = join(outDir, "work");
    mkdirSync(workRoot, { recursive: true });
    // A directory per build: a test and `make image` may build at once.
    const work = mkdtempSync(join(workRoot, `${name}-`));
    const rootfs = join(work, "rootfs");
    mkdirSync(rootfs);
    chmodSync(rootfs, 0o755);
    const { archive, result } = BUILDERS[name]!(ctx, rootfs, work);
    rmSync(work, { recursive: true, force: true });
    const megabytes = (statSync(archive).size / 1e6).toFixed(1);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    log(`${imageReference(image)}@${result.manifest}`);
    log(
      `  ${relative(repo, archive)}: ${megabytes} MB, ${result.layers.length} layers, built in ${seconds} s`,
    );
    process.stdout.write(`${archive}\n`);
  }
}

try {
  main(process.argv.slice(2));
} catch (error) {
  log(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
