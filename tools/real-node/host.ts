// What the real node changes on the host, and how it is put back: the node's network namespace, the sysctls
// the kubelet sets, mounts under the kubelet's and containerd's directories, the kubepods cgroups, and the
// directories it creates.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir, readFile, rm, rmdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { RealNodeNetwork } from "./config.js";

const run = promisify(execFile);

async function sh(command: string, args: string[]): Promise<string> {
  try {
    const { stdout } = await run(command, args, { maxBuffer: 16 << 20 });
    return stdout;
  } catch (error) {
    const err = error as { stderr?: string; message: string };
    throw new Error(`${command} ${args.join(" ")}: ${(err.stderr ?? "").trim() || err.message}`, {
      cause: error,
    });
  }
}

/** Why this machine cannot host the real node, or undefined when it can. */
export async function realNodeUnsupportedReason(): Promise<string | undefined> {
  if (process.platform !== "linux") return `the real node needs Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0)
    return "the real node needs root (the kubelet, containerd and runc manage cgroups and mounts)";
  for (const tool of ["ip", "nsenter", "mount", "umount"]) {
    try {
      await run("which", [tool]);
    } catch {
      return `the real node needs ${tool} on PATH`;
    }
  }
  const kubeletDir = "/var/lib/kubelet/device-plugins";
  if (existsSync(join(kubeletDir, "kubelet.sock"))) {
    return `${kubeletDir}/kubelet.sock exists: another kubelet runs on this machine (its device-plugin directory is fixed)`;
  }
  return undefined;
}

/** The node's namespace, its veth pair, and forwarding inside it. Idempotent: an old one is removed first. */
export async function createNodeNetwork(network: RealNodeNetwork): Promise<void> {
  await deleteNodeNetwork(network);
  const inside = "eth0";
  const peer = `${network.hostInterface}p`;
  const ns = (args: string[]): Promise<string> => sh("ip", ["-n", network.namespace, ...args]);
  await sh("ip", ["netns", "add", network.namespace]);
  await sh("ip", ["link", "add", network.hostInterface, "type", "veth", "peer", "name", peer]);
  await sh("ip", ["link", "set", peer, "netns", network.namespace]);
  await ns(["link", "set", peer, "name", inside]);
  await sh("ip", [
    "addr",
    "add",
    `${network.hostAddress}/${network.prefixLength}`,
    "dev",
    network.hostInterface,
  ]);
  await sh("ip", ["link", "set", network.hostInterface, "up"]);
  await ns(["addr", "add", `${network.nodeAddress}/${network.prefixLength}`, "dev", inside]);
  await ns(["link", "set", inside, "up"]);
  await ns(["link", "set", "lo", "up"]);
  await ns(["route", "add", "default", "via", network.hostAddress]);
  // The API server reaches pods (webhooks, probes from the host) through the node.
  await sh("ip", ["route", "add", network.podCidr, "via", network.nodeAddress]);
  await sh("ip", ["netns", "exec", network.namespace, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
}

export async function deleteNodeNetwork(network: RealNodeNetwork): Promise<void> {
  await sh("ip", ["route", "del", network.podCidr]).catch(() => undefined);
  await sh("ip", ["link", "del", network.hostInterface]).catch(() => undefined);
  await sh("ip", ["netns", "del", network.namespace]).catch(() => undefined);
}

export function netnsPath(network: RealNodeNetwork): string {
  return `/run/netns/${network.namespace}`;
}

/** The kubelet sets these at start (protectKernelDefaults false); the values from before are put back. */
const KUBELET_SYSCTLS = [
  "kernel/panic",
  "kernel/panic_on_oops",
  "vm/overcommit_memory",
  "kernel/keys/root_maxkeys",
  "kernel/keys/root_maxbytes",
];

export type SysctlSnapshot = Record<string, string>;

export async function snapshotSysctls(): Promise<SysctlSnapshot> {
  const entries = await Promise.all(
    KUBELET_SYSCTLS.map(async (key) => {
      try {
        return [key, (await readFile(`/proc/sys/${key}`, "utf8")).trim()] as const;
      } catch {
        return undefined;
      }
    }),
  );
  return Object.fromEntries(entries.filter((e) => e !== undefined));
}

export async function restoreSysctls(snapshot: SysctlSnapshot): Promise<void> {
  for (const [key, value] of Object.entries(snapshot)) {
    await writeFile(`/proc/sys/${key}`, `${value}\n`).catch(() => undefined);
  }
}

/** Mount points at or below any of `prefixes`, deepest first. */
export async function mountsUnder(prefixes: readonly string[]): Promise<string[]> {
  const text = await readFile("/proc/self/mountinfo", "utf8");
  const points = text
    .split("\n")
    .map((line) => line.split(" ")[4])
    .filter((p): p is string => p !== undefined && p !== "")
    .map((p) => p.replace(/\\040/g, " "))
    .filter((p) => prefixes.some((prefix) => p === prefix || p.startsWith(`${prefix}/`)));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Unmounts everything below the prefixes (lazily, deepest first); throws naming what stays mounted. */
export async function unmountUnder(prefixes: readonly string[]): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const points = await mountsUnder(prefixes);
    if (points.length === 0) return;
    for (const point of points) await sh("umount", ["-l", point]).catch(() => undefined);
  }
  const left = await mountsUnder(prefixes);
  if (left.length > 0) throw new Error(`still mounted after unmounting: ${left.join(", ")}`);
}

/** Network namespaces containerd made for pods (`cni-*` in /run/netns) that were not there before. */
export async function podNetnsNames(): Promise<string[]> {
  try {
    return (await readdir("/run/netns")).filter((name) => name.startsWith("cni-"));
  } catch {
    return [];
  }
}

export async function removePodNetns(before: readonly string[]): Promise<void> {
  for (const name of await podNetnsNames()) {
    if (before.includes(name)) continue;
    await sh("umount", ["-l", `/run/netns/${name}`]).catch(() => undefined);
    await rm(`/run/netns/${name}`, { force: true });
  }
}

/** The kubelet's `kubepods` cgroups in every hierarchy, removed leaf first (their tasks must be gone). */
export async function removeKubepodsCgroups(): Promise<string[]> {
  const left: string[] = [];
  const subdirectories = async (dir: string): Promise<string[]> => {
    try {
      const entries = await readdir(dir, { withFileTypes: true });
      return entries.filter((e) => e.isDirectory()).map((e) => join(dir, e.name));
    } catch {
      return [];
    }
  };
  const removeTree = async (dir: string): Promise<void> => {
    for (const child of await subdirectories(dir)) await removeTree(child);
    try {
      await rmdir(dir);
    } catch {
      left.push(dir);
    }
  };
  // cgroup v1 has a hierarchy per controller below /sys/fs/cgroup; v2 (or hybrid's unified) one at the top.
  for (const hierarchy of ["/sys/fs/cgroup", ...(await subdirectories("/sys/fs/cgroup"))]) {
    const top = join(hierarchy, "kubepods");
    if (existsSync(top)) await removeTree(top);
  }
  return left;
}

/** Directories the node creates, recorded before start so the teardown removes only its own. */
export const NODE_HOST_DIRECTORIES = [
  "/var/lib/kubelet",
  "/var/log/pods",
  "/var/log/containers",
  "/var/run/cdi",
  "/etc/cdi",
];

export async function existingDirectories(paths: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const path of paths) {
    try {
      if ((await stat(path)).isDirectory()) found.push(path);
    } catch {
      // absent
    }
  }
  return found;
}

/** Removes the directories that did not exist before, once nothing is mounted below them. */
export async function removeCreatedDirectories(before: readonly string[]): Promise<void> {
  const created = NODE_HOST_DIRECTORIES.filter((path) => !before.includes(path));
  await unmountUnder(created);
  for (const path of created) await rm(path, { recursive: true, force: true });
}
