// The CustomResourceDefinitions of the dpo.dev API, generated from its zod schemas: every CRD and its YAML.
// The generic zod-to-structural-schema builder is in crd/structural-schema.ts, each CRD in a file of crd/.
import { stringify } from "yaml";
import type { CustomResourceDefinition } from "./crd/definition.js";
import { deviceNodeStateCrd } from "./crd/device-node-state.js";
import { devicePluginConfigCrd } from "./crd/device-plugin-config.js";

export type {
  CustomResourceConversion,
  CustomResourceDefinition,
  CustomResourceDefinitionVersion,
  PrinterColumn,
  WebhookClientConfig,
} from "./crd/definition.js";
export { deviceNodeStateCrd } from "./crd/device-node-state.js";
export {
  CONVERSION_SERVICE,
  DEVICE_PLUGIN_CONFIG_CRD_NAME,
  devicePluginConfigCrd,
  UNOBSERVED_STATUS,
  webhookConversion,
} from "./crd/device-plugin-config.js";
export { re2Incompatibility } from "./crd/re2.js";
export {
  CrdSchemaError,
  structuralSchemaOf,
  type SchemaType,
  type StructuralSchema,
} from "./crd/structural-schema.js";

/** Every CRD of the API, in a fixed order. */
export function allCrds(): CustomResourceDefinition[] {
  return [devicePluginConfigCrd(), deviceNodeStateCrd()];
}

/** The conventional file name, `<group>_<plural>.yaml`. */
export function crdFileName(crd: CustomResourceDefinition): string {
  return `${crd.spec.group}_${crd.spec.names.plural}.yaml`;
}

/** One CRD as a YAML document; key order is the construction order, so output is byte-for-byte stable. */
export function renderCrdYaml(crd: CustomResourceDefinition): string {
  return stringify(crd, { lineWidth: 0, aliasDuplicateObjects: false });
}

/** Every CRD as one YAML stream, for `dpo crds | kubectl apply -f -`. */
export function renderCrdsYamlStream(): string {
  return allCrds()
    .map((crd) => `---\n${renderCrdYaml(crd)}`)
    .join("");
}
