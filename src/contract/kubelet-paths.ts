// Where the kubelet keeps what the plugin talks to, with its default root directory: one place for the
// plugin's flag defaults, the DRA plugin and the DaemonSet's host mounts. No imports, so anything can use it.

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
