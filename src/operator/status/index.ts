// Pure status logic of the operator: resource-name conflicts, node health, CR status.
export * from "./aggregate.js";
export * from "./conditions.js";
export * from "./conflicts.js";
export * from "./config-series.js";
export * from "./degraded.js";
export * from "./dra-sharing.js";
export * from "./invalid-spec.js";
export * from "./node-health.js";
export * from "./published-devices.js";
export * from "./transition-events.js";
export * from "./serving.js";
