// Which Kubernetes, etcd and KWOK a run uses (versions.env, K8S_VERSION) and where build.sh put their
// binaries.
import { execFile } from "node:child_process";
import { access, readFile } from "node:fs/promises";
import { arch } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { goArchitecture, type SimulatedNodeFacts } from "./nodes.js";

const run = promisify(execFile);

export const COMPONENTS = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kwok",
] as const;
export type ComponentName = (typeof COMPONENTS)[number];
export const BINARIES = [...COMPONENTS, "kubectl"] as const;

export interface PinnedVersions {
  kubernetes: string;
  etcd: string;
  kwok: string;
}

/**
 * The Kubernetes release a run uses: `K8S_VERSION` (as k8s-version.sh reads it, so the binaries build.sh
 * printed and the nodes' kubeletVersion agree), else the pinned one.
 */
export function selectedKubernetesVersion(pinned: string, env: NodeJS.ProcessEnv = process.env): string {
  const wanted = env.K8S_VERSION?.trim();
  return wanted ? `v${wanted.replace(/^v/, "")}` : pinned;
}

/** The versions of versions.env, with the Kubernetes release `K8S_VERSION` picks. */
export async function readPinnedVersions(): Promise<PinnedVersions> {
  const text = await readFile(new URL("./versions.env", import.meta.url), "utf8");
  const value = (key: string): string => {
    const match = new RegExp(`^${key}=(\\S+)$`, "m").exec(text);
    if (!match?.[1]) throw new Error(`tools/cluster/versions.env has no ${key}`);
    return match[1];
  };
  return {
    kubernetes: selectedKubernetesVersion(value("KUBERNETES_VERSION")),
    etcd: value("ETCD_VERSION"),
    kwok: value("KWOK_VERSION"),
  };
}

/** What every simulated node reports of its kubelet, KWOK and machine, from the pinned versions. */
export function simulatedNodeFacts(versions: PinnedVersions): SimulatedNodeFacts {
  return {
    kubernetesVersion: versions.kubernetes,
    kwokVersion: versions.kwok,
    architecture: goArchitecture(arch()),
  };
}

/**
 * Runs build.sh, which builds the binaries once per version set and afterwards only prints where
 * they are; its progress goes to this process's stderr.
 */
export async function buildOrReuseBinaries(): Promise<string> {
  const build = fileURLToPath(new URL("./build.sh", import.meta.url));
  const child = run(build, [], { maxBuffer: 1 << 20 });
  child.child.stderr?.pipe(process.stderr);
  const { stdout } = await child;
  const binDir = stdout.trim().split("\n").at(-1);
  if (!binDir) throw new Error(`${build} printed no binary directory`);
  return binDir;
}

/** Fails naming every binary `binDir` lacks, and how to build them. */
export async function assertBinaries(binDir: string): Promise<void> {
  const missing: string[] = [];
  for (const binary of BINARIES) {
    try {
      await access(join(binDir, binary));
    } catch {
      missing.push(binary);
    }
  }
  if (missing.length > 0) {
    throw new Error(`${binDir} lacks ${missing.join(", ")}; build them with tools/cluster/build.sh`);
  }
}
