// Pure rendering of a DevicePluginConfig into the objects the operator applies.
export * from "./backends.js";
export * from "./configmap.js";
export * from "./context.js";
export * from "./daemonset.js";
export * from "./names.js";
export * from "./placement.js";
export * from "./drift.js";
export * from "./pull-secrets.js";
export * from "./node-terms.js";
export * from "./plugin-policy.js";
