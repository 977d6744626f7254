// The CustomResourceDefinitions of the dpo.dev API, generated from its zod schemas: every CRD and its YAML.
// The generic zod-to-structural-schema builder is in crd/structural-schema.ts, each CRD in a file of crd/.
import { stringify } from "yaml";
import type { CustomResourceDefinition } from "./crd/definition.js";
import { deviceNodeStateCrd } from "./crd/device-node-state.js";
import { CONVERSION_SERVICE, devicePluginConfigCrd } from "./crd/device-plugin-config.js";

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

export interface CrdOptions {
  /**
   * The namespace of the conversion webhook's Service the DevicePluginConfig CRD names (default
   * dpo-system, where config/default installs the operator; the chart's CRD hook gives its release's).
   */
  webhookNamespace?: string;
  /** The name of that Service (default dpo-webhook; the chart's names follow its fullnameOverride). */
  webhookService?: string;
}

/** Every CRD of the API, in a fixed order. */
export function allCrds(options: CrdOptions = {}): CustomResourceDefinition[] {
  const service = {
    ...CONVERSION_SERVICE,
    namespace: options.webhookNamespace ?? CONVERSION_SERVICE.namespace,
    name: options.webhookService ?? CONVERSION_SERVICE.name,
  };
  return [devicePluginConfigCrd({ service }), deviceNodeStateCrd()];
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
export function renderCrdsYamlStream(options: CrdOptions = {}): string {
  return allCrds(options)
    .map((crd) => `---\n${renderCrdYaml(crd)}`)
    .join("");
}
