// The kubelet wire contract as the plugin uses it: generated messages, service definitions (paths,
// streaming flags, serializers) and constants. Nothing here loads @grpc/grpc-js: the plugin serves and
// calls on node:http2 with its own gRPC layer (../grpc/, ADR 0008). The grpc-js clients that tests and
// tools use are in index.ts, which re-exports this module and ./wire-dra.js, the DRA APIs' part.

// Both upstream packages name their registration service `Registration`; the device-plugin one (the
// kubelet serves it on kubelet.sock) keeps the plain name, the plugin-watcher one (the plugin serves
// it in plugins_registry) gets a `PluginRegistration` prefix.
export {
  AllocateRequest,
  AllocateResponse,
  CDIDevice,
  ContainerAllocateRequest,
  ContainerAllocateResponse,
  ContainerPreferredAllocationRequest,
  ContainerPreferredAllocationResponse,
  Device,
  DevicePluginOptions,
  DevicePluginService,
  DeviceSpec,
  Empty,
  ListAndWatchResponse,
  Mount,
  NUMANode,
  PreferredAllocationRequest,
  PreferredAllocationResponse,
  PreStartContainerRequest,
  PreStartContainerResponse,
  RegisterRequest,
  RegistrationService,
  TopologyInfo,
} from "./gen/deviceplugin/v1beta1/api.js";
export type { DevicePluginServer, RegistrationServer } from "./gen/deviceplugin/v1beta1/api.js";

export {
  InfoRequest,
  PluginInfo,
  RegistrationService as PluginRegistrationService,
  RegistrationStatus,
  RegistrationStatusResponse,
} from "./gen/pluginregistration/v1/api.js";
export type { RegistrationServer as PluginRegistrationServer } from "./gen/pluginregistration/v1/api.js";

// The kubelet's PodResources API (package v1): which containers hold which devices. Its TopologyInfo,
// NUMANode and CDIDevice are other messages than the device plugin API's of the same names; only the
// messages the plugin and its tests use are exported.
export {
  AllocatableResourcesRequest,
  AllocatableResourcesResponse,
  ContainerDevices,
  ContainerResources,
  GetPodResourcesRequest,
  GetPodResourcesResponse,
  ListPodResourcesRequest,
  ListPodResourcesResponse,
  PodResources,
  PodResourcesListerService,
} from "./gen/podresources/v1/api.js";
export type { PodResourcesListerServer } from "./gen/podresources/v1/api.js";

/** The device plugin API version this runtime registers with. */
export const KUBELET_API_VERSION = "v1beta1";

/** Every device plugin API version the runtime serves (GetInfo's `supported_versions`). */
export const SUPPORTED_KUBELET_API_VERSIONS: readonly string[] = [KUBELET_API_VERSION];

/** The kubelet's registration socket, a file name inside the device-plugins directory. */
export const KUBELET_SOCKET_NAME = "kubelet.sock";

/** PluginInfo.type the kubelet's plugin watcher routes to the device manager. */
export const DEVICE_PLUGIN_TYPE = "DevicePlugin";

/** Device.health values the kubelet understands; anything else counts as unhealthy. */
export const DEVICE_HEALTHY = "Healthy";
export const DEVICE_UNHEALTHY = "Unhealthy";

/** The kubelet gives PreStartContainer this long before it fails the container start. */
export const PRE_START_CONTAINER_TIMEOUT_MS = 30_000;
