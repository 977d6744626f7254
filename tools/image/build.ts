// Builds the images of images.ts as OCI archives with no container engine and no registry: the dpo image
// (the Dockerfile's final stage) and the real-node test tier's pause and busybox images.
//
//   tools/image/build.sh [dpo|pause|busybox|sample-device-plugin|test-images|all]...   (dpo when none is named)
//
// Each image is a root filesystem put together in .local/image/work/, cut into layers by GNU tar with
// fixed owners and times in a fixed order (the same inputs give the same digest), assembled by
// go-containerregistry (oci-assemble/) and packed into .local/image/<name>-<tag>.oci.tar. Prints the path
// of each archive; the reference and digest go to stderr.
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { dirname, join, relative } from "node:path";
import {
  goTool,
  imagePlatforms,
  log,
  outDir,
  repo,
  run,
  sourceDateEpoch,
  type BuildContext,
} from "./build-host.js";
import { installPackages } from "./debian-packages.js";
import { buildDpo } from "./dpo-image.js";
import {
  busyboxImage,
  DEBIAN_PACKAGES_LABEL,
  imageReference,
  IMAGES,
  pauseImage,
  samplePluginImage,
} from "./images.js";
import { writeArchive, writeLayers } from "./layers.js";
import { hostPlatform, PLATFORMS } from "./platforms.js";
import { isSymlink, makeDirs, writeSystemFiles } from "./rootfs.js";

/** A root filesystem of its own under the work directory, for the one-platform test images. */
function newRootfs(work: string): string {
  makeDirs(work, "rootfs");
  return join(work, "rootfs");
}

function buildPause(ctx: BuildContext, work: string) {
  const rootfs = newRootfs(work);
  copyFileSync(goTool("pause"), join(rootfs, "pause"));
  chmodSync(join(rootfs, "pause"), 0o755);
  const layers = writeLayers(
    rootfs,
    [{ paths: [], createdBy: "the pause program of tools/image/pause" }],
    work,
    ctx.epoch,
  );
  return writeArchive(ctx, pauseImage, [{ platform: hostPlatform(), labels: {}, layers }], work);
}

function buildSamplePlugin(ctx: BuildContext, work: string) {
  const rootfs = newRootfs(work);
  const binary = run(join(repo, "tools", "cluster", "build-sample-device-plugin.sh"), [])
    .trim()
    .split("\n")
    .at(-1);
  if (!binary) throw new Error("tools/cluster/build-sample-device-plugin.sh printed no binary path");
  copyFileSync(binary, join(rootfs, "sampledeviceplugin"));
  chmodSync(join(rootfs, "sampledeviceplugin"), 0o755);
  const layers = writeLayers(
    rootfs,
    [{ paths: [], createdBy: "k8s.io/kubernetes/test/images/sample-device-plugin, built by tools/cluster" }],
    work,
    ctx.epoch,
  );
  return writeArchive(ctx, samplePluginImage, [{ platform: hostPlatform(), labels: {}, layers }], work);
}

function buildBusybox(ctx: BuildContext, work: string) {
  const rootfs = newRootfs(work);
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
  const labels = { [DEBIAN_PACKAGES_LABEL]: versions };
  return writeArchive(ctx, busyboxImage, [{ platform: hostPlatform(), labels, layers }], work);
}

// The test images serve the real node, which is this machine: its platform alone. The dpo image has all.
const BUILDERS: Record<string, (ctx: BuildContext, work: string) => ReturnType<typeof writeArchive>> = {
  dpo: buildDpo,
  pause: buildPause,
  busybox: buildBusybox,
  "sample-device-plugin": buildSamplePlugin,
};

const GROUPS: Record<string, string[]> = {
  "test-images": ["pause", "busybox", "sample-device-plugin"],
  all: ["dpo", "pause", "busybox", "sample-device-plugin"],
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
    platforms: imagePlatforms(PLATFORMS.map((p) => p.architecture)),
    assembleTool: goTool("oci-assemble"),
  };
  for (const name of names) {
    const image = IMAGES[name]!;
    const started = Date.now();
    const workRoot = join(outDir, "work");
    mkdirSync(workRoot, { recursive: true });
    // A directory per build: a test and `make image` may build at once.
    const work = mkdtempSync(join(workRoot, `${name}-`));
    const { archive, result } = BUILDERS[name]!(ctx, work);
    rmSync(work, { recursive: true, force: true });
    const megabytes = (statSync(archive).size / 1e6).toFixed(1);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    log(`${imageReference(image)}@${result.digest}`);
    for (const built of result.images)
      log(`  ${built.platform}: ${built.manifest}, ${built.layers.length} layers`);
    log(`  ${relative(repo, archive)}: ${megabytes} MB, built in ${seconds} s`);
    process.stdout.write(`${archive}\n`);
  }
}

try {
  main(process.argv.slice(2));
} catch (error) {
  log(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
