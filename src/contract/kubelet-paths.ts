// Where the kubelet keeps what the plugin talks to, with its default root directory: one place for the
// plugin's flag defaults, the DRA plugin and the DaemonSet's host mounts. No imports, so anything can use it.

/** The kubelet's default `--root-dir`; k0s, MicroK8s and others move it (the operator's --kubelet-root-dir). */
export const DEFAULT_KUBELET_ROOT_DIR = "/var/lib/kubelet";
/** Fixed by the kubelet: `--root-dir` does not move it. Holds kubelet.sock and the plugins' sockets. */
export const DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins";
/** The directory the kubelet's plugin watcher watches (upstream's KubeletRegistryDir). */
export const PLUGINS_REGISTRY_DIR = "/var/lib/kubelet/plugins_registry";
/** Where a DRA driver's node plugin puts its sockets: `<dir>/<driver>/` (upstream's KubeletPluginsDir). */
export const DRA_PLUGINS_DIR = "/var/lib/kubelet/plugins";
/**
 * Where the kubelet serves the PodResources API: `<root-dir>/pod-resources/kubelet.sock`, with the
 * kubelet's default root directory. Unlike the device-plugins directory it moves with `--root-dir`.
 */
export const POD_RESOURCES_DIR = "/var/lib/kubelet/pod-resources";
export const POD_RESOURCES_SOCKET_NAME = "kubelet.sock";

/** The kubelet's directories that move with its `--root-dir`. */
export interface KubeletRootPaths {
  pluginsRegistryDir: string;
  draPluginsDir: string;
  podResourcesDir: string;
}

/**
 * The directories under a kubelet root directory (an absolute path without a trailing slash): the plugin
 * watcher's, the DRA plugins' and the PodResources API's. The device-plugins directory is not one of
 * them: the kubelet keeps it at DEVICE_PLUGINS_DIR whatever its root directory.
 */
export function kubeletRootPaths(rootDir: string = DEFAULT_KUBELET_ROOT_DIR): KubeletRootPaths {
  return {
    pluginsRegistryDir: `${rootDir}/plugins_registry`,
    draPluginsDir: `${rootDir}/plugins`,
    podResourcesDir: `${rootDir}/pod-resources`,
  };
}

/**
 * A kubelet root directory as the operator's `--kubelet-root-dir` takes it: an absolute, normalized path
 * (no `.` or `..` segment, no doubled or trailing '/', not '/' itself); a trailing '/' is dropped. Throws
 * naming `field` otherwise.
 */
export function parseKubeletRootDir(value: string, field: string): string {
  const dir = value.length > 1 ? value.replace(/\/+$/, "") : value;
  const segments = dir.split("/").slice(1);
  if (
    !dir.startsWith("/") ||
    dir === "/" ||
    segments.some((s) => s === "" || s === "." || s === "..") ||
    /[\s,:]/.test(dir)
  ) {
    throw new Error(
      `${field}: '${value}' is not a kubelet root directory (an absolute path such as ${DEFAULT_KUBELET_ROOT_DIR}, without '.', '..', blanks, ',' or ':')`,
    );
  }
  return dir;
}
