// A root filesystem in the making: directories and files with the modes the digest depends on, the system
// files a Debian image has, entries copied out of extracted packages, and walks in a fixed order.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, normalize } from "node:path";
import { run } from "./build-host.js";

export function makeDirs(rootfs: string, dir: string): void {
  const parts = dir.split("/").filter((part) => part !== "");
  for (let i = 1; i <= parts.length; i++) {
    const path = join(rootfs, ...parts.slice(0, i));
    if (!existsSync(path)) {
      mkdirSync(path);
      chmodSync(path, 0o755); // not the umask's choice: modes are part of the digest
    }
  }
}

export function writeRootfsFile(rootfs: string, path: string, content: string | Buffer, mode: number): void {
  makeDirs(rootfs, dirname(path));
  const target = join(rootfs, path);
  writeFileSync(target, content);
  chmodSync(target, mode);
}

export interface Account {
  name: string;
  id: number;
  home: string;
  shell: string;
}

/** /etc/passwd, /etc/group, /etc/nsswitch.conf, /root and a world-writable /tmp, as a Debian image has. */
export function writeSystemFiles(rootfs: string, accounts: Account[]): void {
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
export function copyPackageEntry(
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

export function isSymlink(path: string): boolean {
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
export function copyTree(source: string, target: string): void {
  run("cp", ["--recursive", "--no-dereference", "--preserve=mode,links", "--", source, target]);
}

/**
 * A tree of hard links to a directory's files (its directories and symbolic links made anew, with their
 * modes): node_modules' 8,600 entries for each platform's root filesystem without copying their bytes. The
 * root filesystem is only read, cut into layers and removed, so the kept original cannot change through it.
 */
export function linkTree(source: string, target: string): void {
  run("cp", ["--recursive", "--link", "--no-dereference", "--preserve=mode,links", "--", source, target]);
}

/** Every path under a directory, relative to it, parents before children, in a fixed (byte) order. */
export function walk(root: string, dir = ""): string[] {
  const paths: string[] = [];
  for (const name of readdirSync(join(root, dir)).sort()) {
    const path = dir === "" ? name : `${dir}/${name}`;
    paths.push(path);
    if (lstatSync(join(root, path)).isDirectory()) paths.push(...walk(root, path));
  }
  return paths;
}
