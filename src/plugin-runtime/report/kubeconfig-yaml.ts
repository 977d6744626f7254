// The kubeconfig's YAML parser, for credentials.ts to load on use. A module of dpo's own on purpose: the
// bundle makes a lazily imported CommonJS package (yaml) a chunk with only a default export, so
// `(await import("yaml")).parse` is undefined there, while this module's named export survives bundling.
export { parse as parseYaml } from "yaml";
