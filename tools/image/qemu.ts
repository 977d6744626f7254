// Running an image's entrypoint inside its root filesystem, as a container runtime would: `unshare --root`
// (a chroot as root, a user namespace's otherwise), and for another architecture under QEMU's user-mode
// emulator (Debian's qemu-user-static), copied into the root filesystem for the run, since binfmt_misc
// (which would let the kernel start it by itself) is often missing in a container. `qemu-*-static -L <rootfs>`
// is no substitute: QEMU 7.2 does not look into the prefix for statx(2), which Node uses to find modules.
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { accessSync, chmodSync, constants, copyFileSync, existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { isHost, QEMU_PACKAGE, type ImagePlatform } from "./platforms.js";

/** Where the emulator is put inside a root filesystem for a run (removed from an image's before its layers). */
export const EMULATOR_DIR = ".qemu";

/** The emulator for `platform` on PATH, or an error that names the Debian package to install. */
export function qemuFor(platform: ImagePlatform, path = process.env.PATH ?? ""): string {
  for (const dir of path.split(":").filter((d) => d !== "")) {
    const candidate = join(dir, platform.qemu);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new Error(
    `${platform.qemu} is missing: the ${platform.architecture} image runs under Debian's ${QEMU_PACKAGE} ` +
      `(apt-get install ${QEMU_PACKAGE}; tools/image/build.sh installs it as root)`,
  );
}

/** Where `command` is found on the image's PATH inside `rootfs`, as the container runtime looks it up. */
export function resolveInRootfs(rootfs: string, command: string, imagePath: string): string {
  if (command.startsWith("/")) return command;
  for (const dir of imagePath.split(":")) {
    if (existsSync(join(rootfs, dir, command))) return join(dir, command);
  }
  throw new Error(`${command} is on no directory of the image's PATH (${imagePath})`);
}

/**
 * The command line that runs `argv` (its first element looked up on the image's PATH, `pathVariable`) in
 * `rootfs` with `wd` as its working directory: `unshare` with its arguments. For another architecture the
 * emulator is copied into the root filesystem (EMULATOR_DIR; `removeEmulator` takes it out again).
 */
export function rootfsCommand(
  platform: ImagePlatform,
  rootfs: string,
  argv: string[],
  pathVariable: string,
  wd = "/",
): [string, string[]] {
  const asRoot = process.getuid?.() === 0 ? [] : ["--map-root-user"];
  const unshare = [...asRoot, `--root=${rootfs}`, `--wd=${wd}`, "--"];
  // This machine's programs: unshare finds argv[0] on the image's PATH inside the new root by itself.
  if (isHost(platform)) return ["unshare", [...unshare, ...argv]];
  const [command, ...args] = argv;
  if (command === undefined) throw new Error("rootfsCommand: no command");
  const emulator = qemuFor(platform);
  mkdirSync(join(rootfs, EMULATOR_DIR), { recursive: true, mode: 0o755 });
  const inside = join(rootfs, EMULATOR_DIR, platform.qemu);
  if (!existsSync(inside)) {
    copyFileSync(emulator, inside);
    chmodSync(inside, 0o755);
  }
  const program = resolveInRootfs(rootfs, command, pathVariable);
  return ["unshare", [...unshare, `/${EMULATOR_DIR}/${platform.qemu}`, program, ...args]];
}

export function removeEmulator(rootfs: string): void {
  rmSync(join(rootfs, EMULATOR_DIR), { recursive: true, force: true });
}

/**
 * Runs `argv` of an image's root filesystem inside it (under QEMU for another architecture), with `env`
 * alone as its environment, as the image's entrypoint runs in a container.
 */
export function runInRootfs(
  platform: ImagePlatform,
  rootfs: string,
  argv: string[],
  env: Record<string, string>,
  options: { wd?: string; timeoutMs?: number; input?: string } = {},
): SpawnSyncReturns<string> {
  const [command, args] = rootfsCommand(platform, rootfs, argv, env.PATH ?? "", options.wd);
  return spawnSync(command, args, {
    encoding: "utf8",
    env,
    input: options.input,
    timeout: options.timeoutMs ?? 120_000,
    maxBuffer: 16 << 20,
  });
}
