// The Node labels the operator writes from its plugins' reports (ADR 0011), and how it tells its own from
// another labeller's: GPU Feature Discovery's `nvidia.com/` keys for the NVIDIA backend, dpo's own
// `<attribute>.device.dpo.dev/<config>` keys for every backend, each config's written under a field manager
// of its own, `dpo-node-labels/<config>`, by server-side apply. No imports but names.
import { configLabelValue } from "../../contract/names.js";

/**
 * GPU Feature Discovery's keys (NVIDIA/k8s-device-plugin, internal/lm), each written only where the
 * report says its value. The admission policy (config/policy/operator_node_policy.yaml) lets the operator
 * change these and no other `nvidia.com/` label: not `nvidia.com/mig.config`, say, which NVIDIA's MIG
 * manager acts on.
 */
export const GFD_LABEL_KEYS = [
  "nvidia.com/gpu.product",
  "nvidia.com/gpu.count",
  "nvidia.com/gpu.memory",
  "nvidia.com/gpu.family",
  "nvidia.com/gpu.compute.major",
  "nvidia.com/gpu.compute.minor",
  "nvidia.com/gpu.replicas",
  "nvidia.com/gpu.sharing-strategy",
  "nvidia.com/cuda.driver.major",
  "nvidia.com/cuda.driver.minor",
  "nvidia.com/cuda.driver.rev",
  "nvidia.com/cuda.driver-version.major",
  "nvidia.com/cuda.driver-version.minor",
  "nvidia.com/cuda.driver-version.revision",
  "nvidia.com/cuda.driver-version.full",
  "nvidia.com/cuda.runtime.major",
  "nvidia.com/cuda.runtime.minor",
  "nvidia.com/cuda.runtime-version.major",
  "nvidia.com/cuda.runtime-version.minor",
  "nvidia.com/cuda.runtime-version.full",
  "nvidia.com/mig.capable",
  "nvidia.com/mig.strategy",
  "nvidia.com/mps.capable",
] as const;
export type GfdLabelKey = (typeof GFD_LABEL_KEYS)[number];

const GFD_KEYS: ReadonlySet<string> = new Set(GFD_LABEL_KEYS);

/**
 * dpo's own keys, one per attribute and config: `<attribute>.device.dpo.dev/<config label value>`. The
 * config is the name part (at most 63 characters, as a name part must be), as in ADR 0004's
 * `revision.dpo.dev/<config>`; the prefix stays under 253 characters whatever the attribute.
 */
export const DEVICE_LABEL_ATTRIBUTES = ["count", "replicas", "product"] as const;
export type DeviceLabelAttribute = (typeof DEVICE_LABEL_ATTRIBUTES)[number];
export const DEVICE_LABEL_DOMAIN = "device.dpo.dev";

export function deviceLabelKey(attribute: DeviceLabelAttribute, configName: string): string {
  return `${attribute}.${DEVICE_LABEL_DOMAIN}/${configLabelValue(configName)}`;
}

/** The config label value a dpo device label is of, or undefined when the key is none. */
export function configOfDeviceLabel(key: string): string | undefined {
  const slash = key.indexOf("/");
  if (slash < 0) return undefined;
  const prefix = key.slice(0, slash);
  const attribute = DEVICE_LABEL_ATTRIBUTES.find((a) => prefix === `${a}.${DEVICE_LABEL_DOMAIN}`);
  return attribute === undefined ? undefined : key.slice(slash + 1);
}

/** Whether the operator may ever write this label key: GFD's or its own device labels. */
export function isDeviceLabelKey(key: string): boolean {
  return GFD_KEYS.has(key) || configOfDeviceLabel(key) !== undefined;
}

/**
 * The field manager of a config's labels: each config applies its own set, so dropping a key from it
 * removes the label (unless another manager also owns it), and a config that is gone is found again on
 * a Node by its manager alone. At most 16 + 63 characters, under the API server's bound of 128.
 */
export const LABEL_MANAGER_PREFIX = "dpo-node-labels/";

export function labelFieldManager(configName: string): string {
  return LABEL_MANAGER_PREFIX + configLabelValue(configName);
}

/** The config label value a field manager applies labels for, or undefined when it is not one of dpo's. */
export function configOfLabelManager(manager: string | undefined): string | undefined {
  if (manager === undefined || !manager.startsWith(LABEL_MANAGER_PREFIX)) return undefined;
  const value = manager.slice(LABEL_MANAGER_PREFIX.length);
  return value === "" ? undefined : value;
}
