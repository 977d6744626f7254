// The kubelet wire contract as the plugin uses it: generated messages, service definitions (paths,
// streaming flags, serializers) and constants. Nothing here loads @grpc/grpc-js: the plugin serves and
// calls on node:http2 with its own gRPC layer (../grpc/, ADR 0008). The grpc-js clients that tests and
// tools use are in index.ts, which re-exports this module.

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

// The kubelet's DRA plugin API, v1 and v1beta1: the same messages and service in two packages, so each
// version is exported as a namespace (draV1.Claim, draV1beta1.DRAPluginService, ...).
export * as draV1 from "./gen/dra/v1/api.js";
export * as draV1beta1 from "./gen/dra/v1beta1/api.js";

/** PluginInfo.type the kubelet's plugin watcher routes to its DRA plugin manager. */
export const DRA_PLUGIN_TYPE = "DRAPlugin";

/**
 * What a DRA plugin lists in GetInfo's `supported_versions`: not API versions but gRPC services, as
 * "<last package segment>.<service>" (k8s.io/kubelet pkg/apis/dra/{v1,v1beta1}/types.go,
 * DRAPluginService). How kubelets choose, read in k8s.io/kubernetes pkg/kubelet/cm/dra/plugin/:
 * - 1.34 (dra_plugin_manager.go, validateSupportedServices): walks the plugin's list in order and uses
 *   the first service in its own servicesSupportedByKubelet (dra_plugin.go: v1, then v1beta1); refuses
 *   the plugin when none is known. So the newest goes first, and a 1.34 kubelet picks v1.
 * - 1.33 (registration.go, validateSupportedServices): walks its own list (v1beta1, then v1alpha4) and
 *   uses the first the plugin offers, falling back to v1alpha4 when it offers neither. It has no v1 (nor
 *   has k8s.io/kubelet v0.32 or v0.33), so v1beta1 must be offered as well.
 * Upstream drivers advertise the same list in the same order (k8s.io/dynamic-resource-allocation
 * kubeletplugin/draplugin.go, Start, with both services enabled by default).
 */
export const DRA_V1_SERVICE = "v1.DRAPlugin";
export const DRA_V1BETA1_SERVICE = "v1beta1.DRAPlugin";
export const DRA_SUPPORTED_SERVICES: readonly string[] = [DRA_V1_SERVICE, DRA_V1BETA1_SERVICE];

// The kubelet's DRA resource health API (KEP-4680), v1 and v1alpha1: the same messages and service in two
// packages, each exported as a namespace (draHealthV1.DeviceHealth, draHealthV1alpha1.DRAResourceHealthService).
export * as draHealthV1 from "./gen/dra-health/v1/api.js";
export * as draHealthV1alpha1 from "./gen/dra-health/v1alpha1/api.js";

/**
 * The optional health service, as listed in GetInfo's `supported_versions` (k8s.io/kubelet
 * pkg/apis/dra-health/{v1,v1alpha1}/types.go, DRAResourceHealthService). The 1.37 kubelet
 * (pkg/kubelet/cm/dra/plugin, pickHealthService) walks its own list, v1 then v1alpha1, and streams from
 * the first the plugin lists; a plugin that lists neither gets no stream. Older kubelets pick the
 * DRAPlugin service from the same list and skip names they do not know, so these go after it.
 */
export const DRA_HEALTH_V1_SERVICE = "v1.DRAResourceHealth";
export const DRA_HEALTH_V1ALPHA1_SERVICE = "v1alpha1.DRAResourceHealth";
export const DRA_HEALTH_SERVICES: readonly string[] = [DRA_HEALTH_V1_SERVICE, DRA_HEALTH_V1ALPHA1_SERVICE];
