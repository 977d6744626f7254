// What the real node needs built before it starts: containerd (build.sh here), the oldest supported kubelet
// (tools/cluster/build.sh with K8S_VERSION), and the image archives of tools/image.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { busyboxImage, dpoImage, imageArchive, imageReference, pauseImage } from "../image/images.js";

const run = promisify(execFile);
const realNodeDir = fileURLToPath(new URL(".", import.meta.url));
const clusterDir = join(realNodeDir, "..", "cluster");
const repoRoot = join(realNodeDir, "..", "..");

/** Runs a build script that prints the directory (or file) it built as its last line; progress goes to stderr. */
async function lastLineOf(script: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const child = run(script, [], { maxBuffer: 1 << 20, env: { ...process.env, ...env } });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const last = stdout.trim().split("\n").at(-1);
  if (!last) throw new Error(`${script} printed nothing`);
  return last;
}

export function buildOrReuseContainerd(): Promise<string> {
  return lastLineOf(join(realNodeDir, "build.sh"));
}

/** The oldest supported release (versions.env), as a kubelet binary built like the pinned one. */
export async function oldestKubernetesVersion(): Promise<string> {
  const text = await readFile(join(clusterDir, "versions.env"), "utf8");
  const match = /^KUBERNETES_OLDEST_VERSION=(\S+)$/m.exec(text);
  if (!match?.[1]) throw new Error("tools/cluster/versions.env has no KUBERNETES_OLDEST_VERSION");
  return match[1];
}

export async function buildOrReuseOldestKubelet(): Promise<string> {
  const binDir = await lastLineOf(join(clusterDir, "build.sh"), {
    K8S_VERSION: await oldestKubernetesVersion(),
  });
  return join(binDir, "kubelet");
}

export interface RealNodeImages {
  /** Archives to import, the pause image first. */
  archives: string[];
  /** References as the kubelet asks for them. */
  dpo: string;
  workload: string;
}

/** The archives `make image test-images` leave in .local/image (tools/image), named as images.ts declares them. */
export function realNodeImages(): RealNodeImages {
  const images = [pauseImage, busyboxImage, dpoImage];
  const missing = images.map(imageArchive).filter((archive) => !existsSync(join(repoRoot, archive)));
  if (missing.length > 0) {
    throw new Error(`${missing.join(", ")} missing: build the images first (make image test-images)`);
  }
  return {
    archives: images.map((image) => join(repoRoot, imageArchive(image))),
    dpo: imageReference(dpoImage),
    workload: imageReference(busyboxImage),
  };
}
