// The kubelet's DRA plugin and DRA resource health APIs as the plugin uses them, apart from ./wire.js: only
// a config with spec.publish DRA loads these messages (some 60 KB of generated code); a device plugin that
// imports ./wire.js does not.

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
