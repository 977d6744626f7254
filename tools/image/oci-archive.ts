// Reads an OCI archive as tools/image/build.ts writes it (an OCI image layout in a tar: one image, for one
// platform or an image index of several): the reference containerd will name it by, its digest, and one
// platform's manifest and config, and that platform's layers unpacked.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageConfig } from "./images.js";
import { hostPlatform } from "./platforms.js";

export interface OciDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { os: string; architecture: string; variant?: string };
}

export interface OciIndex {
  schemaVersion?: number;
  mediaType?: string;
  manifests: OciDescriptor[];
}

export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";

export interface OciManifest {
  mediaType: string;
  config: OciDescriptor;
  layers: OciDescriptor[];
}

export interface OciImageConfigFile {
  os: string;
  architecture: string;
  variant?: string;
  created?: string;
  config: Partial<ImageConfig>;
  rootfs: { type: string; diff_ids: string[] };
  history?: { created?: string; created_by?: string }[];
}

export interface OciArchive {
  /** Where the layout was extracted. */
  dir: string;
  /** What `ctr images import` names the image (io.containerd.image.name). */
  reference: string;
  /** The digest of index.json's entry (the manifest, or the image index), as containerd shows the image's. */
  digest: string;
  index: OciIndex;
  /** The image index index.json's entry names, when the image has several platforms. */
  imageIndex?: OciIndex;
  /** The chosen platform's entry: index.json's own, or the image index's. */
  entry: OciDescriptor;
  manifest: OciManifest;
  config: OciImageConfigFile;
  /** The path of a blob in the extracted layout. */
  blob(digest: string): string;
}

/**
 * Extracts the archive's layout into `dir` (once: a second call on the same `dir` reads it again) and reads
 * the one image in it: for an image index, the manifest of `architecture` (this machine's by default).
 */
export function extractOciArchive(archive: string, dir: string, architecture?: string): OciArchive {
  if (!existsSync(join(dir, "index.json"))) {
    mkdirSync(dir, { recursive: true });
    execFileSync("tar", ["--extract", `--file=${archive}`, `--directory=${dir}`]);
  }
  const blob = (digest: string) => {
    const [algorithm, hex] = digest.split(":");
    if (!algorithm || !hex) throw new Error(`${archive}: not a digest: ${digest}`);
    return join(dir, "blobs", algorithm, hex);
  };
  const json = <T>(path: string) => JSON.parse(readFileSync(path, "utf8")) as T;
  const index = json<OciIndex>(join(dir, "index.json"));
  const [top, ...others] = index.manifests;
  if (!top || others.length > 0) throw new Error(`${archive}: ${index.manifests.length} images, not one`);
  let entry = top;
  let imageIndex: OciIndex | undefined;
  if (top.mediaType === OCI_INDEX) {
    imageIndex = json<OciIndex>(blob(top.digest));
    const wanted = architecture ?? hostPlatform().architecture;
    const found = imageIndex.manifests.find((m) => m.platform?.architecture === wanted);
    if (!found) throw new Error(`${archive}: no ${wanted} manifest in its image index`);
    entry = found;
  } else if (architecture !== undefined && top.platform?.architecture !== architecture) {
    throw new Error(`${archive}: a ${top.platform?.architecture} image, not ${architecture}`);
  }
  const manifest = json<OciManifest>(blob(entry.digest));
  const config = json<OciImageConfigFile>(blob(manifest.config.digest));
  const reference = top.annotations?.["io.containerd.image.name"] ?? "";
  return { dir, reference, digest: top.digest, index, imageIndex, entry, manifest, config, blob };
}

/** Unpacks the image's layers in order into `rootfs` (an image without deletions: no whiteouts to apply). */
export function unpackLayers(image: OciArchive, rootfs: string): void {
  mkdirSync(rootfs, { recursive: true });
  for (const layer of image.manifest.layers) {
    execFileSync("tar", [
      "--extract",
      "--gzip",
      `--file=${image.blob(layer.digest)}`,
      `--directory=${rootfs}`,
    ]);
  }
}

/**
 * The platforms of the image in an archive (`linux/amd64`, `linux/arm64/v8`), read from its index without
 * extracting the layers: the release checks that its image has every one.
 */
export function archivePlatforms(archive: string): string[] {
  const member = (name: string) =>
    JSON.parse(
      execFileSync("tar", ["--extract", "--to-stdout", `--file=${archive}`, name], { encoding: "utf8" }),
    ) as OciIndex;
  const [top] = member("index.json").manifests;
  if (!top) throw new Error(`${archive}: index.json names no image`);
  const entries =
    top.mediaType === OCI_INDEX ? member(`blobs/${top.digest.replace(":", "/")}`).manifests : [top];
  return entries.map(({ platform }) =>
    [platform?.os, platform?.architecture, platform?.variant].filter((part) => part).join("/"),
  );
}
