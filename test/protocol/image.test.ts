// The images tools/image/build.sh builds (make image), read back from their OCI archives: the dpo image's
// index of linux/amd64 and linux/arm64, this machine's config, layers and files against
// tools/image/images.ts, its root filesystem run for real in a chroot (which proves the Debian libraries are
// complete and the compile cache is used), the other architecture's run under QEMU (`dpo --version`, a Mock
// `dpo probe`), and the real-node tier's pause (PID 1 in a PID namespace: reaps orphans, exits 0 on SIGTERM)
// and busybox images.
import { execFile, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  busyboxImage,
  DEBIAN_PACKAGES_LABEL,
  dpoImage,
  imageArchive,
  imageReference,
  NODE_VERSION,
  PACKAGE_VERSION,
  pauseImage,
  type ImageDefinition,
} from "../../tools/image/images.js";
import { ELF_MACHINES, readElfDependencies } from "../../tools/image/elf.js";
import {
  extractOciArchive,
  OCI_INDEX,
  OCI_MANIFEST,
  unpackLayers,
  type OciArchive,
} from "../../tools/image/oci-archive.js";
import { hostPlatform, PLATFORMS, platformName, QEMU_PACKAGE } from "../../tools/image/platforms.js";
import { runInRootfs } from "../../tools/image/qemu.js";
import { waitFor } from "./support.js";

const repo = join(import.meta.dirname, "..", "..");
const run = promisify(execFile);

const needed = ["apt-get", "dpkg-deb", "unshare", "tar"];
const missing = needed.filter((tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0);
const cannotBuild =
  process.platform !== "linux"
    ? "the images are built on Linux"
    : missing.length > 0
      ? `building needs ${missing.join(", ")} (Debian's tools)`
      : undefined;
const isRoot = process.getuid?.() === 0;
const NEEDS_ROOT = isRoot ? "" : " (skipped: needs root for chroot and PID namespaces)";

/** The config's Env as a process environment, with nothing of this machine's. */
function imageEnv(image: ImageDefinition, extra: Record<string, string> = {}): Record<string, string> {
  const env = Object.fromEntries(
    image.config.Env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
  );
  return { ...env, ...extra };
}

/** Each layer's entries as `tar --list --verbose` shows them: owner, time and name. */
function layerEntries(image: OciArchive): { owner: string; time: string; name: string }[][] {
  return image.manifest.layers.map((layer) => {
    const listing = spawnSync(
      "tar",
      [
        "--list",
        "--verbose",
        "--numeric-owner",
        "--full-time",
        "--gzip",
        `--file=${image.blob(layer.digest)}`,
      ],
      { encoding: "utf8", env: { ...process.env, TZ: "UTC" }, maxBuffer: 64 << 20 },
    );
    expect(listing.status, listing.stderr).toBe(0);
    return listing.stdout
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => {
        const [, owner, , date, time, ...name] = line.split(/\s+/);
        return { owner: owner!, time: `${date} ${time}`, name: name.join(" ").replace(/ -> .*$/, "") };
      });
  });
}

function isSymlink(path: string): boolean {
  return lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink() === true;
}

function sha256File(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Processes whose parent is `pid`, from /proc: pid and state (Z for a zombie). */
function childrenOf(pid: number): { pid: number; state: string }[] {
  const children: { pid: number; state: string }[] = [];
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // The command name may hold spaces and parentheses: the fields after it start at the last ")".
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(ppid) === pid) children.push({ pid: Number(entry), state: state! });
  }
  return children;
}

describe.skipIf(cannotBuild !== undefined)(
  `images built by tools/image${cannotBuild ? ` (skipped: ${cannotBuild})` : ""}`,
  () => {
    // Made in beforeAll, so that a skipped run leaves nothing behind.
    const scratch = join(tmpdir(), `dpo-image-${process.pid}`);
    const archives = new Map<string, OciArchive>();
    const read = (image: ImageDefinition) => archives.get(image.name)!;

    beforeAll(async () => {
      // Everything is cached after the first build (tools, Debian packages, node_modules): seconds, not minutes.
      await run(join(repo, "tools", "image", "build.sh"), ["all"], { cwd: repo, maxBuffer: 16 << 20 });
      for (const image of [dpoImage, pauseImage, busyboxImage]) {
        const archive = extractOciArchive(
          join(repo, imageArchive(image)),
          join(scratch, `${image.name}-layout`),
        );
        archives.set(image.name, archive);
      }
    }, 900_000);
    afterAll(() => rmSync(scratch, { recursive: true, force: true }));

    describe("dpo", () => {
      const rootfs = join(scratch, "dpo-rootfs");
      beforeAll(() => unpackLayers(read(dpoImage), rootfs), 120_000);

      it("is named by its full reference, which `ctr images import` keeps", () => {
        const image = read(dpoImage);
        expect(image.reference).toBe(`ghcr.io/dpo-dev/dpo:${PACKAGE_VERSION}`);
        const entry = image.index.manifests[0]!;
        expect(entry.annotations?.["org.opencontainers.image.ref.name"]).toBe(image.reference);
        expect(entry.mediaType).toBe(OCI_INDEX);
        expect(image.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      });

      it("is one OCI index of linux/amd64 and linux/arm64/v8, each manifest's config of its platform", () => {
        const image = read(dpoImage);
        const manifests = image.imageIndex?.manifests ?? [];
        expect(image.imageIndex?.mediaType).toBe(OCI_INDEX);
        expect(manifests.map((m) => m.platform)).toEqual([
          { os: "linux", architecture: "amd64" },
          { os: "linux", architecture: "arm64", variant: "v8" },
        ]);
        for (const entry of manifests) {
          expect(entry.mediaType).toBe(OCI_MANIFEST);
          const manifest = JSON.parse(
            readFileSync(image.blob(entry.digest), "utf8"),
          ) as OciArchive["manifest"];
          const config = JSON.parse(
            readFileSync(image.blob(manifest.config.digest), "utf8"),
          ) as OciArchive["config"];
          // What containerd and the kubelet match against the node: os, architecture and variant.
          expect({ os: config.os, architecture: config.architecture, variant: config.variant }).toEqual({
            variant: undefined,
            ...entry.platform,
          });
          expect(config.config.Entrypoint).toEqual(dpoImage.config.Entrypoint);
        }
        // The one this machine's containerd unpacks, and the tests below read, is this machine's.
        expect(image.entry.platform?.architecture).toBe(hostPlatform().architecture);
        expect(image.config.architecture).toBe(hostPlatform().architecture);
      });

      it("has the config images.ts declares (the Dockerfile's, test/unit/tools/image/dockerfile.test.ts)", () => {
        const { config } = read(dpoImage).config;
        expect(config.Entrypoint).toEqual(dpoImage.config.Entrypoint);
        expect(config.Cmd).toEqual(dpoImage.config.Cmd);
        expect(config.Env).toEqual(dpoImage.config.Env);
        expect(config.WorkingDir).toBe("/app");
        expect(config.User ?? "").toBe("");
        expect(config.Labels).toMatchObject(dpoImage.config.Labels);
        const packages = config.Labels?.[DEBIAN_PACKAGES_LABEL]?.split(" ") ?? [];
        for (const { name } of dpoImage.debian)
          expect(
            packages.some((p) => p.startsWith(`${name}=`)),
            name,
          ).toBe(true);
      });

      it("has gzip layers of root-owned entries, all at the config's creation time", () => {
        const image = read(dpoImage);
        expect(image.config.rootfs.diff_ids).toHaveLength(image.manifest.layers.length);
        const created = image.config.created!.replace("T", " ").replace(/Z$/, "");
        for (const [index, entries] of layerEntries(image).entries()) {
          expect(image.manifest.layers[index]!.mediaType).toBe("application/vnd.oci.image.layer.v1.tar+gzip");
          expect(entries.filter((e) => e.owner !== "0/0")).toEqual([]);
          expect(entries.filter((e) => e.time !== created)).toEqual([]);
        }
      });

      it("holds the pinned node, the bundle, production dependencies only and the compile cache", () => {
        const node = join(rootfs, dpoImage.node.path);
        expect(statSync(node).mode & 0o7777).toBe(0o755);
        const pinnedBin = spawnSync(join(repo, "tools", "toolchain", "node.sh"), {
          encoding: "utf8",
          env: { ...process.env, DPO_PIN_NODE: "1" },
        }).stdout.trim();
        expect(sha256File(node), "the npm node package's binary").toBe(
          sha256File(realpathSync(join(pinnedBin, "node"))),
        );

        expect(existsSync(join(rootfs, "app", "dist", "dpo.js"))).toBe(true);
        expect(readFileSync(join(rootfs, dpoImage.app.packageJson), "utf8")).toBe(
          readFileSync(join(repo, "package.json"), "utf8"),
        );
        const lock = JSON.parse(readFileSync(join(repo, "package-lock.json"), "utf8")) as {
          packages: Record<string, { dev?: boolean }>;
        };
        const lockPackages = Object.entries(lock.packages).filter(([path]) =>
          path.startsWith("node_modules/"),
        );
        const devOnly = lockPackages.filter(([, p]) => p.dev).map(([path]) => path);
        const production = lockPackages.filter(([, p]) => !p.dev).map(([path]) => path);
        expect(devOnly.filter((path) => existsSync(join(rootfs, "app", path)))).toEqual([]);
        expect(production.filter((path) => !existsSync(join(rootfs, "app", path)))).toEqual([]);

        expect(
          readdirSync(join(rootfs, "app", ".compile-cache"), { recursive: true }).length,
        ).toBeGreaterThan(1);
      });

      it("has /tmp, the accounts and the Debian packages' records", () => {
        expect(statSync(join(rootfs, "tmp")).mode & 0o7777).toBe(0o1777);
        const passwd = readFileSync(join(rootfs, "etc", "passwd"), "utf8");
        expect(passwd).toMatch(/^root:x:0:0:/m);
        expect(passwd).toMatch(/^nonroot:x:65532:65532:/m);
        const labels = read(dpoImage).config.config.Labels ?? {};
        for (const entry of labels[DEBIAN_PACKAGES_LABEL]!.split(" ")) {
          const [name, version] = entry.split("=");
          const record = readFileSync(join(rootfs, "var", "lib", "dpkg", "status.d", name!), "utf8");
          expect(record).toContain(`Package: ${name}\n`);
          expect(record).toContain(`Version: ${version}\n`);
          expect(existsSync(join(rootfs, "usr", "share", "doc", name!)), `${name}'s copyright`).toBe(true);
        }
        expect(readFileSync(join(rootfs, "etc", "os-release"), "utf8")).toMatch(/^ID=debian$/m);
      });

      it.skipIf(!isRoot)(
        `runs \`dpo version\` under the entrypoint in its own root filesystem${NEEDS_ROOT}`,
        () => {
          const { Entrypoint } = dpoImage.config;
          // chroot finds `node` on the image's PATH inside the root filesystem, as the runtime does.
          const result = spawnSync("chroot", [rootfs, ...Entrypoint!, "version"], {
            encoding: "utf8",
            env: imageEnv(dpoImage, { NODE_DEBUG_NATIVE: "COMPILE_CACHE" }),
            timeout: 30_000,
          });
          expect(result.status, result.stderr).toBe(0);
          expect(result.stdout).toContain(`dpo ${PACKAGE_VERSION}\n`);
          expect(result.stdout).toContain(`node: v${NODE_VERSION}\n`);
          const debug = result.stderr + result.stdout;
          expect(debug).toContain("V8 code cache for ESM file:///app/dist/dpo.js was accepted");
          expect(debug).not.toMatch(/rejected|mismatch/);
        },
      );
    });

    // Every platform that is not this machine's: started under Debian's qemu-user-static inside its own
    // root filesystem. Never skipped: without the emulator this fails, naming the package to install
    // (make test installs it, as tools/image/build.sh does).
    for (const platform of PLATFORMS.filter((p) => p.architecture !== hostPlatform().architecture)) {
      describe(`dpo for ${platformName(platform)}, under QEMU`, () => {
        const rootfs = join(scratch, `dpo-rootfs-${platform.architecture}`);
        let image: OciArchive;
        const entrypoint = dpoImage.config.Entrypoint!;
        const inImage = (argv: string[], extra: Record<string, string> = {}, input?: string) =>
          runInRootfs(platform, rootfs, argv, imageEnv(dpoImage, extra), {
            wd: dpoImage.config.WorkingDir,
            input,
          });
        beforeAll(() => {
          image = extractOciArchive(
            join(repo, imageArchive(dpoImage)),
            join(scratch, "dpo-layout"),
            platform.architecture,
          );
          unpackLayers(image, rootfs);
        }, 120_000);

        it(`holds ${platform.architecture} programs: node from node-linux-${platform.nodeArch}, Debian's libraries`, () => {
          expect(image.config.architecture).toBe(platform.architecture);
          const machine = ELF_MACHINES[platform.architecture];
          expect(readElfDependencies(join(rootfs, dpoImage.node.path)).machine).toBe(machine);
          const { interpreter } = readElfDependencies(join(rootfs, dpoImage.node.path));
          expect(readElfDependencies(join(rootfs, interpreter!)).machine).toBe(machine);
          // Each package's record says which architecture's package it is.
          const packages = image.config.config.Labels?.[DEBIAN_PACKAGES_LABEL]?.split(" ") ?? [];
          for (const { name } of dpoImage.debian) {
            expect(
              packages.some((p) => p.startsWith(`${name}=`)),
              name,
            ).toBe(true);
            const record = readFileSync(join(rootfs, "var", "lib", "dpkg", "status.d", name), "utf8");
            expect(record, name).toMatch(new RegExp(`^Architecture: (${platform.debianArch}|all)$`, "m"));
          }
          const libc = readFileSync(join(rootfs, "var", "lib", "dpkg", "status.d", "libc6"), "utf8");
          expect(libc).toContain(`Architecture: ${platform.debianArch}\n`);
        });

        it(`runs \`dpo --version\` under the entrypoint, with the compile cache built for it`, () => {
          const result = inImage([...entrypoint, "--version"], { NODE_DEBUG_NATIVE: "COMPILE_CACHE" });
          expect(result.error?.message ?? "", `${QEMU_PACKAGE} runs the image`).toBe("");
          expect(result.status, result.stderr).toBe(0);
          expect(result.stdout.split("\n")[0]).toBe(`dpo ${PACKAGE_VERSION}`);
          expect(result.stdout).toContain(`node: v${NODE_VERSION}\n`);
          const debug = result.stderr + result.stdout;
          expect(debug).toContain("V8 code cache for ESM file:///app/dist/dpo.js was accepted");
          expect(debug).not.toMatch(/rejected|mismatch/);
          const arch = inImage(["node", "-p", "process.arch"]);
          expect(arch.stdout, arch.stderr).toBe(`${platform.nodeArch}\n`);
        });

        it("runs `dpo probe` on a Mock config, which lists its devices", () => {
          const config = readFileSync(join(repo, "config", "samples", "mock-basic.yaml"), "utf8");
          const result = inImage([...entrypoint, "probe", "--config", "-"], {}, config);
          expect(result.status, result.stderr).toBe(0);
          const lines = result.stdout.split("\n");
          expect(lines[0]).toBe("config example-mock: backend Mock, 4 device(s)");
          for (const id of ["foo-0", "foo-1", "foo-2", "foo-3"])
            expect(
              lines.some((line) => /^(\S+)\s+Healthy\s/.exec(line)?.[1] === id),
              id,
            ).toBe(true);
        });
      });
    }

    describe("pause", () => {
      const rootfs = join(scratch, "pause-rootfs");
      beforeAll(() => unpackLayers(read(pauseImage), rootfs));

      it("is /pause alone, run as 65535", () => {
        const image = read(pauseImage);
        expect(image.reference).toBe(imageReference(pauseImage));
        expect(pauseImage.tag).not.toBe("latest");
        expect(image.config.config).toMatchObject({ Entrypoint: ["/pause"], User: "65535:65535" });
        expect(
          layerEntries(image)
            .flat()
            .map((e) => e.name),
        ).toEqual(["pause"]);
      });

      it.skipIf(!isRoot)(`reaps orphans as PID 1 and exits 0 on SIGTERM${NEEDS_ROOT}`, async () => {
        const namespace = spawn("unshare", ["--pid", "--fork", `--root=${rootfs}`, "/pause"], {
          stdio: "ignore",
        });
        const exited = new Promise<number | null>((resolve) =>
          namespace.once("exit", (code) => resolve(code)),
        );
        try {
          const pause = await waitFor("the pause process", () => childrenOf(namespace.pid!)[0]?.pid);
          // Two processes started inside its PID namespace whose parent exits at once: the kernel gives
          // them to PID 1, which must wait for them when they exit.
          const orphans = spawnSync(
            "nsenter",
            [`--target=${pause}`, "--pid", "--", "sh", "-c", "sleep 1 & sleep 1 & exit 0"],
            { stdio: "ignore" },
          ); // with pipes, spawnSync would wait for the sleeps too
          expect(orphans.status).toBe(0);
          await waitFor("the orphans to be given to pause", (observe) => {
            const children = childrenOf(pause);
            observe(children);
            return children.length === 2;
          });
          await waitFor("pause to reap them", (observe) => {
            const children = childrenOf(pause);
            observe(children);
            return children.length === 0;
          });
          process.kill(pause, "SIGTERM");
          expect(await exited).toBe(0);
        } finally {
          if (namespace.exitCode === null) namespace.kill("SIGKILL");
        }
      });
    });

    describe("busybox", () => {
      const rootfs = join(scratch, "busybox-rootfs");
      beforeAll(() => unpackLayers(read(busyboxImage), rootfs));

      it("is Debian's busybox-static with its applets, sh by default", () => {
        const image = read(busyboxImage);
        expect(image.reference).toBe(imageReference(busyboxImage));
        expect(busyboxImage.tag).not.toBe("latest");
        expect(image.config.config.Cmd).toEqual(["sh"]);
        expect(image.config.config.Labels?.[DEBIAN_PACKAGES_LABEL]).toMatch(/\bbusybox-static=/);
        // Links to /bin/busybox inside the image (existsSync would follow them out of it).
        for (const applet of ["sh", "env", "cat", "ls", "sleep", "test"]) {
          const link = ["bin", "usr/bin"]
            .map((dir) => join(rootfs, dir, applet))
            .find((path) => isSymlink(path));
          expect(link && readlinkSync(link), applet).toBe("/bin/busybox");
        }
      });

      it.skipIf(!isRoot)(`runs a shell script in its own root filesystem${NEEDS_ROOT}`, () => {
        const script =
          "test -d /tmp && cat /etc/os-release && env && ls /bin/busybox && sleep 0 && echo done";
        const result = spawnSync("chroot", [rootfs, "sh", "-c", script], {
          encoding: "utf8",
          env: imageEnv(busyboxImage),
          timeout: 30_000,
        });
        expect(result.status, result.stderr).toBe(0);
        expect(result.stdout).toMatch(/^ID=debian$/m);
        expect(result.stdout).toMatch(/^PATH=\/usr\/local\/sbin:/m);
        expect(result.stdout).toMatch(/done\n$/);
      });
    });

    it("the test images come out the same from the same inputs", async () => {
      await run(join(repo, "tools", "image", "build.sh"), ["test-images"], { cwd: repo });
      for (const image of [pauseImage, busyboxImage]) {
        const again = extractOciArchive(
          join(repo, imageArchive(image)),
          join(scratch, `${image.name}-again`),
        );
        expect(again.digest, image.name).toBe(read(image).digest);
      }
    }, 120_000);
  },
);
