// Cuts a root filesystem into reproducible layers (GNU tar, fixed owners and times, a fixed order) and packs
// the image oci-assemble makes of them into its archive.
import { chmodSync, mkdirSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { outDir, repo, run, type BuildContext } from "./build-host.js";
import { imageArchive, imageReference, type ImageDefinition } from "./images.js";
import type { ImagePlatform } from "./platforms.js";
import { walk } from "./rootfs.js";

/** A layer: the paths under `paths` (relative, no leading slash); the last layer's empty list takes the rest. */
export interface LayerRule {
  paths: string[];
  createdBy: string;
}

/** GNU tar's options for a reproducible archive (reproducible-builds.org's recipe). */
export function reproducibleTar(epoch: number): string[] {
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
export function writeLayers(
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

/** One platform's image: its layers (uncompressed tars, base first) and the labels it adds to the config. */
export interface PlatformLayers {
  platform: ImagePlatform;
  labels: Record<string, string>;
  layers: { file: string; createdBy: string }[];
}

export interface AssembledImage {
  /** `linux/amd64`, `linux/arm64/v8`. */
  platform: string;
  manifest: string;
  config: string;
  layers: { digest: string; diffID: string; size: number }[];
}

export interface AssembleResult {
  /** The digest of index.json's one entry: the manifest of a one-platform image, else the image index. */
  digest: string;
  mediaType: string;
  images: AssembledImage[];
}

/**
 * Assembles the image with oci-assemble (an image index when there is more than one platform) and packs the
 * OCI layout into the archive (renamed into place).
 */
export function writeArchive(
  ctx: BuildContext,
  image: ImageDefinition,
  platforms: PlatformLayers[],
  work: string,
): { archive: string; result: AssembleResult } {
  const spec = {
    reference: imageReference(image),
    created: new Date(ctx.epoch * 1000).toISOString(),
    images: platforms.map(({ platform, labels, layers }) => ({
      os: platform.os,
      architecture: platform.architecture,
      ...(platform.variant ? { variant: platform.variant } : {}),
      config: { ...image.config, Labels: { ...image.config.Labels, ...labels } },
      layers,
    })),
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
