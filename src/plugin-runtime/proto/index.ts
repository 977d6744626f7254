// The kubelet wire contract with @grpc/grpc-js clients, for tests and tools that talk to the plugin as
// the kubelet does (and serve what the kubelet serves). The plugin itself imports ./wire.js, which loads
// no grpc-js (ADR 0008).
export * from "./wire.js";
export { DevicePluginClient, RegistrationClient } from "./gen/deviceplugin/v1beta1/clients.js";
export { RegistrationClient as PluginRegistrationClient } from "./gen/pluginregistration/v1/clients.js";
export { PodResourcesListerClient } from "./gen/podresources/v1/clients.js";
export * as draV1 from "./gen/dra/v1/clients.js";
export * as draV1beta1 from "./gen/dra/v1beta1/clients.js";
export * as draHealthV1 from "./gen/dra-health/v1/clients.js";
export * as draHealthV1alpha1 from "./gen/dra-health/v1alpha1/clients.js";
