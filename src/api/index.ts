// Public surface of the dpo.dev API: schemas, types and validation.
export * from "./v1beta1/spec.js";
export * from "./v1beta1/config.js";
export * from "./validate.js";
export * from "./v1beta1/status.js";
export * from "./v1beta1/devicenodestate.js";
export * from "./v1alpha1/spec.js";
export * from "./v1alpha1/config.js";
export * from "./conversion/index.js";
