// Reads an OCI archive as tools/image/build.ts writes it (an OCI image layout in a tar, one image): the
// reference containerd will name it by, its digest, manifest and config, and its layers unpacked.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageConfig } from "./images.js";

export interface OciDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { os: string; architecture: string };
}

export interface OciManifest {
  mediaType: string;
  config: OciDescriptor;
  layers: OciDescriptor[];
}

export interface OciImageConfigFile {
  os: string;
  architecture: string;
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
  /** The manifest's digest, as containerd shows it. */
  digest: string;
  index: { mediaType?: string; manifests: OciDescriptor[] };
  manifest: OciManifest;
  config: OciImageConfigFile;
  /** The path of a blob in the extracted layout. */
  blob(digest: string): string;
}

/** Extracts the archive's layout into `dir` and reads the one image in it. */
export function extractOciArchive(archive: string, dir: string): OciArchive {
  mkdirSync(dir, { recursive: true });
  execFileSync("tar", ["--extract", `--file=${archive}`, `--directory=${dir}`]);
  const blob = (digest: string) => {
    const [algorithm, hex] = digest.split(":");
    if (!algorithm || !hex) throw new Error(`${archive}: not a digest: ${digest}`);
    return join(dir, "blobs", algorithm, hex);
  };
  const json = <T>(path: string) => JSON.parse(readFileSync(path, "utf8")) as T;
  const index = json<OciArchive["index"]>(join(dir, "index.json"));
  const [entry, ...others] = index.manifests;
  if (!entry || others.length > 0) throw new Error(`${archive}: ${index.manifests.length} images, not one`);
  const manifest = json<OciManifest>(blob(entry.digest));
  const config = json<OciImageConfigFile>(blob(manifest.config.digest));
  const reference = entry.annotations?.["io.containerd.image.name"] ?? "";
  return { dir, reference, digest: entry.digest, index, manifest, config, blob };
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
