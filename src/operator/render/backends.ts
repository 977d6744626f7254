// What each backend needs from the plugin pod (host paths, env, privilege), as one declarative table.
import { posix } from "node:path";
import type { V1EnvVar } from "@kubernetes/client-node";
import {
  BACKEND_MEMBER,
  type BackendType,
  type DevFSBackend,
  type DevicePluginConfigSpec,
  type MockBackend,
  type NVIDIABackend,
  type PCIBackend,
} from "../../api/v1beta1/spec.js";
import { globSegments, hasWildcard } from "../../contract/devfs-glob.js";

/** A host directory bind-mounted into the plugin container. */
export interface HostPathMount {
  /** Volume name, a DNS label unique in the pod. */
  name: string;
  hostPath: string;
  mountPath: string;
  /** `Directory` fails the pod on a node that lacks the path; `DirectoryOrCreate` creates it. */
  type: "Directory" | "DirectoryOrCreate";
  readOnly: boolean;
}

/** What one backend asks of the pod. */
export interface BackendPodNeeds {
  hostPaths: HostPathMount[];
  env: V1EnvVar[];
  /** Only for a backend that cannot work otherwise; none of today's can justify it. */
  privileged: boolean;
  /** Capabilities added back after dropping ALL. */
  addCapabilities: string[];
}

interface BackendMembers {
  Mock: MockBackend;
  DevFS: DevFSBackend;
  PCI: PCIBackend;
  NVIDIA: NVIDIABackend;
}

type BackendPodProfile<M> = (member: M) => BackendPodNeeds;

/**
 * One entry per backend type. Every backend today only reads and stats: the socket work in the
 * device-plugins directory needs uid 0 (see the DaemonSet's securityContext) but no capability.
 */
export const BACKEND_POD_PROFILES: { readonly [T in BackendType]: BackendPodProfile<BackendMembers[T]> } = {
  // The health file is written on the host (by demos and tests) and watched by the plugin: mount its
  // directory, created when missing so a demo can drop the file in later.
  Mock: (mock) => ({
    hostPaths: sameAsHost(
      mock.healthFile === undefined ? [] : [posix.dirname(mock.healthFile)],
      "mock-health",
      {
        type: "DirectoryOrCreate",
      },
    ),
    env: [],
    privileged: false,
    addCapabilities: [],
  }),
  // The plugin resolves globs under `root` and hands the kubelet host paths joined the same way, so the
  // host tree must appear at the same path. A root other than "/" is mounted whole; under "/" only the
  // top directory of each glob (/dev for /dev/ttyUSB*) — a whole directory rather than the glob's
  // deepest fixed one, so relative symlinks (/dev/serial/by-id/* → ../../ttyUSB0) still resolve.
  // stat() on a device node needs neither privilege nor the device cgroup.
  DevFS: (devFS) => ({
    hostPaths: sameAsHost(devfsHostDirectories(devFS), "devfs", { type: "Directory" }),
    env: [],
    privileged: false,
    addCapabilities: [],
  }),
  // Discovery reads world-readable sysfs attributes (vendor, device, class, numa_node, iommu_group)
  // and stats /dev/vfio: no privilege.
  PCI: (pci) => ({
    hostPaths: sameAsHost([pci.sysfsRoot, pci.devRoot], "pci", { type: "Directory" }),
    env: [],
    privileged: false,
    addCapabilities: [],
  }),
  // nvidia-smi needs the driver's device nodes in the container's device cgroup and the NVML library:
  // the NVIDIA Container Toolkit (the node's default runtime on GPU nodes) injects both, and nvidia-smi
  // itself, when NVIDIA_VISIBLE_DEVICES asks for the GPUs and the `utility` capability for the tools.
  // sysfs gives the NUMA nodes; /dev is read to see which /dev/nvidia* nodes exist. XID events come
  // from the kernel log (/dev/kmsg, or the deprecated dmesg), which needs CAP_SYSLOG where
  // kernel.dmesg_restrict is 1; the kernel log's directory is mounted with /dev's.
  NVIDIA: (nvidia) => ({
    hostPaths: sameAsHost(
      [
        nvidia.sysfsRoot,
        nvidia.devRoot,
        ...(nvidia.kmsgPath === undefined ? [] : [posix.dirname(nvidia.kmsgPath)]),
      ],
      "nvidia",
      { type: "Directory" },
    ),
    env: [
      { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
      { name: "NVIDIA_DRIVER_CAPABILITIES", value: "utility" },
      // With a MIG strategy nvidia-smi must see every MIG device (the toolkit then gives the container the
      // MIG monitor capability), as NVIDIA's plugin asks for it; ADR 0007.
      ...((nvidia.mig?.strategy ?? "None") === "None"
        ? []
        : [{ name: "NVIDIA_MIG_MONITOR_DEVICES", value: "all" }]),
    ],
    privileged: false,
    addCapabilities: nvidia.dmesgPath === undefined && nvidia.kmsgPath === undefined ? [] : ["SYSLOG"],
  }),
};

/** The pod needs of a config's backend, looked up in the table by `backend.type`. */
export function backendPodNeeds(backend: DevicePluginConfigSpec["backend"]): BackendPodNeeds {
  const member = backend[BACKEND_MEMBER[backend.type]];
  if (member === undefined) {
    // The schema refuses this; a config built around it is a programming error.
    throw new Error(`backend.${BACKEND_MEMBER[backend.type]} must be set when type is ${backend.type}`);
  }
  // The table is keyed by type and the schema ties the member to the type; TypeScript cannot follow
  // that correlation through an index, hence the widening.
  const profile = BACKEND_POD_PROFILES[backend.type] as BackendPodProfile<typeof member>;
  return profile(member);
}

/** Host directories a DevFS backend must see at the same path in the container. */
export function devfsHostDirectories(devFS: DevFSBackend): string[] {
  const root = hostDirectory(devFS.root);
  // sysfs, where grouping and the locality attributes read, is mounted at the same path too.
  const sysfs = devFS.sysfsRoot === undefined ? [] : [hostDirectory(devFS.sysfsRoot)];
  if (root !== "/") return [root, ...sysfs];
  const dirs: string[] = [...sysfs];
  for (const { glob } of [...devFS.paths, ...(devFS.sharedPaths ?? [])]) {
    const [top, ...rest] = globSegments(glob);
    // A glob directly under "/" (or with a wildcard top directory) would need the host's root over
    // the container's own: not mountable, so such a path finds nothing in a pod.
    if (top === undefined || rest.length === 0 || hasWildcard(top)) continue;
    dirs.push(`/${top}`);
  }
  return [...new Set(dirs)];
}

/** A directory path in one spelling: normalized, without a trailing slash. */
function hostDirectory(path: string): string {
  const normalized = posix.normalize(path);
  return normalized.length > 1 ? normalized.replace(/\/+$/, "") : normalized;
}

/**
 * Read-only mounts of host directories at the same path: sorted, without duplicates and without
 * directories already inside another mount (a nested bind mount would only shadow the same files).
 */
function sameAsHost(
  directories: readonly string[],
  namePrefix: string,
  options: { type: HostPathMount["type"] },
): HostPathMount[] {
  const sorted = [...new Set(directories.map(hostDirectory))].filter((d) => d !== "/").sort();
  const kept: string[] = [];
  for (const dir of sorted) {
    if (!kept.some((outer) => dir.startsWith(`${outer}/`))) kept.push(dir);
  }
  return kept.map((dir, index) => ({
    name: kept.length === 1 ? namePrefix : `${namePrefix}-${index}`,
    hostPath: dir,
    mountPath: dir,
    type: options.type,
    readOnly: true,
  }));
}
