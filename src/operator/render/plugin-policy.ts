// The operator's allowlist of plugin images and backend host paths: what a config's author may make the operator run as root on nodes.
import { posix } from "node:path";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import { globSegments, hasWildcard } from "../../contract/devfs-glob.js";

/**
 * What the admin lets config authors choose. A config's author can create plugin pods that run as root
 * with host mounts on every node the config targets, so which images and which host directories are
 * the admin's decision (the operator's flags), not the author's.
 */
export interface PluginPolicy {
  /**
   * Image repositories a config's spec.plugin.image may name: `registry.example/team/dpo` (that
   * repository, any tag or digest), `registry.example/team/` (any repository under it), or `*` (any).
   */
  images: readonly string[];
  /** Host directories a backend may mount, each with everything under it; `/` for any. */
  hostPaths: readonly string[];
}

/** The host directories today's backends read with their defaults, and the Mock health file's home. */
export const DEFAULT_PLUGIN_HOST_PATHS: readonly string[] = ["/dev", "/sys", "/run/dpo"];

/** One refused field: the path as dpo validate and the API server name it, and why. */
export interface PolicyRefusal {
  field: string;
  message: string;
}

/**
 * The repository of an image reference: without its digest (`@sha256:...`) and tag (a ':' after the
 * last '/', so a registry's port stays).
 */
export function imageRepository(image: string): string {
  const at = image.indexOf("@");
  const name = at === -1 ? image : image.slice(0, at);
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? name.slice(0, colon) : name;
}

/**
 * The policy of the operator's flags. No image entries: the operator's own repository only (where the
 * plugin's build comes from). No host path entries: DEFAULT_PLUGIN_HOST_PATHS. Throws naming the flag
 * on an entry that is not usable.
 */
export function pluginPolicyFromFlags(
  images: string,
  hostPaths: string,
  operatorImage: string,
): PluginPolicy {
  const split = (value: string) =>
    value
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  const imageEntries = split(images);
  for (const entry of imageEntries) {
    if (
      entry !== "*" &&
      (/[\s@]/.test(entry) || (!entry.endsWith("/") && imageRepository(entry) !== entry))
    ) {
      throw new Error(
        `--plugin-image-allow: '${entry}' must be a repository (no tag or digest), a prefix ending in '/', or *`,
      );
    }
  }
  const pathEntries = split(hostPaths);
  for (const entry of pathEntries) {
    if (!posix.isAbsolute(entry)) {
      throw new Error(`--plugin-host-path-allow: '${entry}' must be an absolute directory`);
    }
  }
  return {
    images: imageEntries.length > 0 ? imageEntries : [imageRepository(operatorImage)],
    hostPaths: pathEntries.length > 0 ? pathEntries.map(directory) : DEFAULT_PLUGIN_HOST_PATHS,
  };
}

/** The policy a render context holds, or the default one for its operator image. */
export function effectivePluginPolicy(ctx: {
  operatorImage: string;
  pluginPolicy?: PluginPolicy | undefined;
}): PluginPolicy {
  return ctx.pluginPolicy ?? pluginPolicyFromFlags("", "", ctx.operatorImage);
}

function directory(path: string): string {
  const normalized = posix.normalize(path);
  return normalized.length > 1 ? normalized.replace(/\/+$/, "") : normalized;
}

export function imageAllowed(image: string, allowed: readonly string[]): boolean {
  const repository = imageRepository(image);
  return allowed.some((entry) =>
    entry === "*" ? true : entry.endsWith("/") ? repository.startsWith(entry) : repository === entry,
  );
}

function pathAllowed(path: string, allowed: readonly string[]): boolean {
  const dir = directory(path);
  return allowed.some((entry) => entry === "/" || dir === entry || dir.startsWith(`${entry}/`));
}

interface FieldPath {
  field: string;
  path: string;
}

/** Each host directory the backend mounts, with the field that asks for it (as backends.ts mounts them). */
function backendHostPaths(backend: DevicePluginConfigSpec["backend"]): FieldPath[] {
  const at = (field: string, path: string) => ({ field: `spec.backend.${field}`, path });
  switch (backend.type) {
    case "Mock":
      return backend.mock?.healthFile === undefined
        ? []
        : [at("mock.healthFile", posix.dirname(backend.mock.healthFile))];
    case "DevFS": {
      const devFS = backend.devFS;
      if (devFS === undefined) return [];
      const sysfs = devFS.sysfsRoot === undefined ? [] : [at("devFS.sysfsRoot", devFS.sysfsRoot)];
      if (directory(devFS.root) !== "/") return [at("devFS.root", devFS.root), ...sysfs];
      const globs = (list: readonly { glob: string }[], field: string) =>
        list.flatMap(({ glob }, i) => {
          const [top, ...rest] = globSegments(glob);
          // Not mounted (backends.ts): nothing of the host is reached through it.
          if (top === undefined || rest.length === 0 || hasWildcard(top)) return [];
          return [at(`devFS.${field}[${i}].glob`, `/${top}`)];
        });
      return [...globs(devFS.paths, "paths"), ...globs(devFS.sharedPaths ?? [], "sharedPaths"), ...sysfs];
    }
    case "PCI":
      return backend.pci === undefined
        ? []
        : [at("pci.sysfsRoot", backend.pci.sysfsRoot), at("pci.devRoot", backend.pci.devRoot)];
    case "NVIDIA":
      return backend.nvidia === undefined
        ? []
        : [at("nvidia.sysfsRoot", backend.nvidia.sysfsRoot), at("nvidia.devRoot", backend.nvidia.devRoot)];
  }
}

/**
 * The NVIDIA backend's programs, which the plugin runs as root: they must come from the image or the
 * container runtime (the NVIDIA Container Toolkit mounts nvidia-smi), never from a host mount, where
 * whoever may write on the node would choose what runs.
 */
function executableRefusals(spec: DevicePluginConfigSpec, mounts: readonly FieldPath[]): PolicyRefusal[] {
  const nvidia = spec.backend.type === "NVIDIA" ? spec.backend.nvidia : undefined;
  if (nvidia === undefined) return [];
  const programs: [string, string | undefined][] = [
    ["nvidiaSmiPath", nvidia.nvidiaSmiPath],
    ["dmesgPath", nvidia.dmesgPath],
  ];
  return programs.flatMap(([field, path]) => {
    if (path === undefined) return [];
    const mount = mounts.find((m) => pathAllowed(path, [directory(m.path)]));
    return mount === undefined
      ? []
      : [
          {
            field: `spec.backend.nvidia.${field}`,
            message: `${path} is inside the host mount ${directory(mount.path)} (${mount.field}): the plugin runs it as root, so it must come from the image or the container runtime`,
          },
        ];
  });
}

/**
 * What the operator's policy refuses in a config, each naming the field: the image (an empty one is the
 * operator's own, always allowed), each backend host directory outside the allowed ones, and programs
 * the NVIDIA backend would run from a host mount. Empty: the config may have workloads. Pure.
 */
export function pluginPolicyRefusals(spec: DevicePluginConfigSpec, policy: PluginPolicy): PolicyRefusal[] {
  const refusals: PolicyRefusal[] = [];
  const image = spec.plugin.image;
  if (image !== "" && !imageAllowed(image, policy.images)) {
    refusals.push({
      field: "spec.plugin.image",
      message: `${image} is not in an allowed repository (${policy.images.join(", ")}; the operator's --plugin-image-allow)`,
    });
  }
  // A directory of "/" is not mounted (backends.ts: the host's root cannot go over the container's).
  const mounts = backendHostPaths(spec.backend).filter((m) => directory(m.path) !== "/");
  for (const mount of mounts) {
    if (!pathAllowed(mount.path, policy.hostPaths)) {
      refusals.push({
        field: mount.field,
        message: `mounts the host directory ${directory(mount.path)}, which is not under an allowed one (${policy.hostPaths.join(", ")}; the operator's --plugin-host-path-allow)`,
      });
    }
  }
  refusals.push(...executableRefusals(spec, mounts));
  return refusals;
}
