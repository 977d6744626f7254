// Public surface of the dpo.dev API: schemas, types and validation.
export * from "./v1beta1/spec.js";
export * from "./v1beta1/config.js";
export * from "./validate.js";
