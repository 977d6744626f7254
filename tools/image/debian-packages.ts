// An image's Debian packages: where apt gets each, downloaded once into the tools cache and extracted, the
// libraries a binary needs picked from them, and their files, copyright notices and control records put
// into the root filesystem.
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { aptOptions } from "./apt.js";
import { cacheRoot, outDir, run, sha256 } from "./build-host.js";
import { ELF_MACHINES, readElfDependencies } from "./elf.js";
import type { DebianPackage } from "./images.js";
import { hostPlatform, isHost, type ImagePlatform } from "./platforms.js";
import { copyPackageEntry, isSymlink, makeDirs, walk, writeRootfsFile } from "./rootfs.js";

export interface FetchedPackage {
  name: string;
  version: string;
  deb: string;
  /** Where `dpkg-deb -x` put its files. */
  tree: string;
}

/** Where apt gets a package's candidate version: the .deb's file name and its hash in apt's lists. */
export interface DebLocation {
  file: string;
  algorithm: string;
  hash: string;
}

/** apt's lists as they are now: their names, sizes and times (a change follows apt-get update). */
export function aptListsStamp(): string {
  const lists = "/var/lib/apt/lists";
  if (!existsSync(lists)) return "none";
  const entries = readdirSync(lists).map((name) => {
    const stats = statSync(join(lists, name));
    return `${name} ${stats.size} ${stats.mtimeMs}`;
  });
  return sha256(entries.sort().join("\n"));
}

/**
 * Where each package of `platform`'s architecture comes from, asked of apt once for all of them and kept in
 * .local/image/cache/ until apt's lists change: without a package cache (Docker-style Debian images have
 * none), every apt-get call parses the lists again, a second or more each.
 */
export function aptLocations(
  names: string[],
  platform: ImagePlatform = hostPlatform(),
): Map<string, DebLocation> {
  const file = join(outDir, "cache", `apt-locations-${platform.debianArch}.json`);
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
      uris = run("apt-get", [...aptOptions(platform, stamp), "download", "--print-uris", ...unknown]);
    } catch (error) {
      const which = unknown.join(", ");
      const arch = platform.debianArch;
      throw new Error(`apt-get has no ${which} for ${arch} (is this Debian, and has apt-get update run?)`, {
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
export function fetchPackage(
  name: string,
  work: string,
  platform: ImagePlatform = hostPlatform(),
): FetchedPackage {
  const { file, algorithm, hash } = aptLocations([name], platform).get(name)!;
  const hashOf = (path: string) =>
    createHash(algorithm.toLowerCase()).update(readFileSync(path)).digest("hex");
  const debDir = join(cacheRoot, "image-debs");
  const deb = join(debDir, file);
  if (!existsSync(deb) || hashOf(deb) !== hash) {
    mkdirSync(debDir, { recursive: true });
    const download = mkdtempSync(join(debDir, ".download-"));
    try {
      run("apt-get", [...aptOptions(platform, aptListsStamp()), "download", name], { cwd: download });
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

export interface NeededLibraries {
  /** The program interpreter (PT_INTERP), an absolute path the kernel opens as it is. */
  interpreter?: string;
  /** soname -> the directory the machine's loader found it in (its multiarch directory). */
  sonames: Map<string, string>;
}

/** What `ldd` says a binary needs, transitively. */
export function neededLibraries(binary: string): NeededLibraries {
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

/** Where a library search finds an soname in extracted packages: a multiarch directory before the rest. */
function librarySearch(packages: FetchedPackage[], triplet: string) {
  const dirs = [`lib/${triplet}`, `usr/lib/${triplet}`, "lib", "usr/lib"];
  return (soname: string): string | undefined => {
    for (const dir of dirs)
      for (const pkg of packages) {
        const path = join(pkg.tree, dir, soname);
        if (existsSync(path)) return path; // through symbolic links, to the file
      }
    return undefined;
  };
}

/**
 * What a binary of another architecture needs, transitively, read from its ELF headers and those of the
 * libraries found for it in the extracted packages (the loader's search: the multiarch directory first),
 * in the form `neededLibraries` gives for this machine's binaries.
 */
export function neededLibrariesOf(
  binary: string,
  packages: FetchedPackage[],
  platform: ImagePlatform,
): NeededLibraries {
  const find = librarySearch(packages, platform.triplet);
  const expected = ELF_MACHINES[platform.architecture];
  const top = readElfDependencies(binary);
  if (top.machine !== expected)
    throw new Error(`${binary}: ELF machine ${top.machine}, not ${platform.architecture}'s ${expected}`);
  const needed: NeededLibraries = { sonames: new Map() };
  if (top.interpreter) needed.interpreter = top.interpreter;
  const queue = [...top.needed];
  for (let soname = queue.shift(); soname !== undefined; soname = queue.shift()) {
    if (needed.sonames.has(soname)) continue;
    const path = find(soname);
    if (path === undefined) {
      const names = packages.map((p) => p.name).join(", ");
      throw new Error(
        `${binary} needs ${soname}, which none of ${names} has: add its package to tools/image/images.ts`,
      );
    }
    needed.sonames.set(soname, platform.triplet);
    queue.push(...readElfDependencies(path).needed);
  }
  return needed;
}

/**
 * Copies the libraries a binary needs from the packages that declare `files: "libraries"`: each soname
 * from the package that has it, preferring the multiarch directory the machine's loader used (or, for
 * another architecture's binary, the loader's search there).
 */
export function copyLibraries(
  binary: string,
  packages: FetchedPackage[],
  rootfs: string,
  platform: ImagePlatform = hostPlatform(),
): void {
  const { interpreter, sonames } = isHost(platform)
    ? neededLibraries(binary)
    : neededLibrariesOf(binary, packages, platform);
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
export function installPackages(
  declared: DebianPackage[],
  binary: string | undefined,
  rootfs: string,
  work: string,
  platform: ImagePlatform = hostPlatform(),
): FetchedPackage[] {
  const fetched = new Map<string, FetchedPackage>();
  const fetch = (name: string) => {
    const pkg = fetched.get(name) ?? fetchPackage(name, work, platform);
    fetched.set(name, pkg);
    return pkg;
  };
  aptLocations(
    declared.map((pkg) => pkg.name),
    platform,
  ); // one question to apt for all of them
  const libraryPackages: FetchedPackage[] = [];
  for (const { name, files } of declared) {
    const pkg = fetch(name);
    if (files === "libraries") libraryPackages.push(pkg);
    else for (const path of files) copyPackageEntry(pkg.tree, path, rootfs, name);
  }
  if (libraryPackages.length > 0) {
    if (binary === undefined)
      throw new Error("packages declare libraries, but the image has no binary to run ldd on");
    copyLibraries(binary, libraryPackages, rootfs, platform);
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
