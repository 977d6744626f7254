// Conversion between the dpo.dev API versions: the functions the webhook and `dpo convert` share.
export * from "./convert.js";
export * from "./merge-patch.js";
export * from "./manifest.js";
