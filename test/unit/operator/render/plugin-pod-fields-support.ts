// Builders for the spec.plugin tests: a config with given pod fields, the field errors of a spec.plugin, and a
// spec.plugin that sets every pod field.
import { validateAnyVersion, type FieldError } from "../../../../src/api/validate.js";
import { type DevicePluginConfigSpecInput } from "../../../../src/api/v1beta1/spec.js";
import { config, configInput as input } from "./render-support.js";

export type Plugin = NonNullable<DevicePluginConfigSpecInput["plugin"]>;

export const withPlugin = (plugin: Plugin) => config({ plugin });

export function errorsOf(plugin: unknown): FieldError[] {
  const r = validateAnyVersion({ ...input(), spec: { ...input().spec, plugin } });
  return r.ok ? [] : r.errors;
}

export const ALL_FIELDS: Plugin = {
  imagePullSecrets: [{ name: "regcred" }, { name: "mirror.example" }],
  imagePullPolicy: "Always",
  runtimeClassName: "nvidia",
  podAnnotations: { "example.com/team": "gpu", "prometheus.io/scrape": "true" },
  env: [
    { name: "LANG", value: "C.UTF-8" },
    { name: "TZ", value: "UTC" },
  ],
};
