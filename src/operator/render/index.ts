// Pure rendering of a DevicePluginConfig into the objects the operator applies.
export * from "./backends.js";
export * from "./configmap.js";
export * from "./context.js";
export * from "./daemonset.js";
export * from "./pull-secrets.js";
export * from "./plugin-policy.js";
export * from "./revision.js";
