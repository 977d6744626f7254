// The labels a node gets from one config's report (ADR 0011): GPU Feature Discovery's for the NVIDIA
// backend, with its value formats (NVIDIA/k8s-device-plugin, internal/lm: resource.go, nvml.go), and dpo's
// device labels for every backend. A value the report does not carry is left out, never guessed. Pure.
import type { DeviceNodeStateStatus, ReportedDevice } from "../../api/v1beta1/devicenodestate.js";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import { deviceLabelKey, type GfdLabelKey } from "./keys.js";

/**
 * The device attributes the labels are made of, and the only ones the functions below read (through
 * `attribute`, which takes no other key). The operator's report cache keeps exactly these of each device
 * (controllers/cache-transforms.ts), so a label made from a new attribute needs it here, and the cache
 * then keeps it.
 */
export const LABEL_SOURCE_ATTRIBUTES = [
  "model",
  "memoryMiB",
  "driverVersion",
  "cudaVersion",
  "migMode",
  "computeCapability",
  "vendor",
  "device",
] as const;
export type LabelSourceAttribute = (typeof LABEL_SOURCE_ATTRIBUTES)[number];

/** The device's text attribute `key`, one of those labels are made of. */
function attribute(device: ReportedDevice, key: LabelSourceAttribute): string | undefined {
  return device.attributes?.[key];
}

/** A label value as the API server takes one: at most 63 characters, alphanumeric at both ends. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const MAX_LABEL_VALUE = 63;

/**
 * GFD's `sanitise`: characters other than letters, digits, `-`, `_`, `.` and spaces dropped, runs of
 * spaces joined by `-` ("NVIDIA H100 80GB HBM3" → "NVIDIA-H100-80GB-HBM3"). Then bounded as a label
 * value must be, which GFD does not do (a longer name fails its whole label set).
 */
export function sanitiseProduct(text: string): string {
  const kept = text.replace(/[^A-Za-z0-9\-_. ]/g, "");
  const joined = kept
    .split(/\s+/)
    .filter((part) => part !== "")
    .join("-");
  return joined
    .slice(0, MAX_LABEL_VALUE)
    .replace(/^[^A-Za-z0-9]+/, "")
    .replace(/[^A-Za-z0-9]+$/, "");
}

/** GFD's getArchFamily: the architecture of a CUDA compute capability. */
export function archFamily(major: number, minor: number): string {
  switch (major) {
    case 1:
      return "tesla";
    case 2:
      return "fermi";
    case 3:
      return "kepler";
    case 5:
      return "maxwell";
    case 6:
      return "pascal";
    case 7:
      return minor < 5 ? "volta" : "turing";
    case 8:
      return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
      return "hopper";
    case 10:
    case 12:
      return "blackwell";
    case 13:
      return "rubin";
    default:
      return "undefined";
  }
}

/** How many containers share each device: the time-slicing replicas, 1 without sharing. */
function sharingReplicas(spec: Pick<DevicePluginConfigSpec, "sharing">): number {
  return spec.sharing.strategy === "TimeSlicing" ? (spec.sharing.replicas ?? 1) : 1;
}

/** The value every device reports for `attribute`, or undefined when one lacks it or two differ. */
function common(devices: readonly ReportedDevice[], value: (d: ReportedDevice) => string | undefined) {
  const values = new Set(devices.map(value));
  if (values.size !== 1) return undefined;
  return [...values][0];
}

/**
 * The devices of the node's main GPU model: the most numerous, the first by name among equals. GFD labels
 * one model per node too (the last it iterates over, which is not deterministic) and warns of the others.
 */
function mainModel(devices: readonly ReportedDevice[]): ReportedDevice[] {
  const byModel = new Map<string, ReportedDevice[]>();
  for (const device of devices) {
    const model = attribute(device, "model");
    if (model === undefined || model === "") continue;
    byModel.set(model, [...(byModel.get(model) ?? []), device]);
  }
  const ranked = [...byModel.entries()].sort(
    ([a, da], [b, db]) => db.length - da.length || (a < b ? -1 : a > b ? 1 : 0),
  );
  return ranked[0]?.[1] ?? [];
}

/** `X.Y[.Z]` as GFD splits a driver version; undefined when it is not that shape. */
function driverParts(version: string | undefined): [string, string, string] | undefined {
  if (version === undefined) return undefined;
  const parts = version.split(".");
  if (parts.length < 2 || parts.length > 3 || parts.some((p) => !/^\d+$/.test(p))) return undefined;
  return [parts[0]!, parts[1]!, parts[2] ?? ""];
}

/** `major.minor` of a CUDA version or compute capability ("12.4", "9.0"); undefined otherwise. */
function majorMinor(text: string | undefined): [number, number] | undefined {
  const match = /^(\d+)\.(\d+)$/.exec(text ?? "");
  if (match === null) return undefined;
  return [Number.parseInt(match[1]!, 10), Number.parseInt(match[2]!, 10)];
}

/**
 * GFD's labels of a node's full GPUs (`nvidia.com/gpu.*`), CUDA and driver versions and MIG capability,
 * from the NVIDIA backend's report attributes: `model`, `memoryMiB`, `driverVersion`, `cudaVersion`,
 * `migMode` (Enabled, Disabled or NotSupported) and, where the plugin reports it, `computeCapability`
 * ("9.0"). Not written, as the report cannot say them: `nvidia.com/gpu.machine` (GFD reads the DMI
 * product name), `nvidia.com/gpu.mode` (the PCI class), `nvidia.com/mig.strategy` (dpo advertises no MIG
 * devices yet: GFD's `none`, which it writes no label for), the MIG strategies' per-profile labels.
 */
export function gfdLabels(
  spec: Pick<DevicePluginConfigSpec, "sharing">,
  report: Pick<DeviceNodeStateStatus, "devices">,
): Partial<Record<GfdLabelKey, string>> {
  const gpus = mainModel(report.devices);
  const first = gpus[0];
  if (first === undefined) return {};
  // A MIG-enabled GPU is labelled without sharing (replicas 0), as GFD labels one.
  const migOnly = gpus.every((g) => attribute(g, "migMode") === "Enabled");
  const replicas = migOnly ? 0 : sharingReplicas(spec);
  const shared = replicas > 1;
  const labels: Partial<Record<GfdLabelKey, string>> = {
    "nvidia.com/gpu.product": sanitiseProduct(`${attribute(first, "model") ?? ""}${shared ? " SHARED" : ""}`),
    "nvidia.com/gpu.count": String(gpus.length),
    "nvidia.com/gpu.replicas": String(replicas),
    "nvidia.com/gpu.sharing-strategy": shared ? "time-slicing" : "none",
    "nvidia.com/mps.capable": "false",
  };
  const memory = common(gpus, (g) => attribute(g, "memoryMiB"));
  if (memory !== undefined && /^[1-9]\d*$/.test(memory)) labels["nvidia.com/gpu.memory"] = memory;
  const compute = majorMinor(common(gpus, (g) => attribute(g, "computeCapability")));
  if (compute !== undefined && compute[0] !== 0) {
    labels["nvidia.com/gpu.family"] = archFamily(compute[0], compute[1]);
    labels["nvidia.com/gpu.compute.major"] = String(compute[0]);
    labels["nvidia.com/gpu.compute.minor"] = String(compute[1]);
  }
  const driver = driverParts(common(report.devices, (d) => attribute(d, "driverVersion")));
  if (driver !== undefined) {
    const [major, minor, rev] = driver;
    labels["nvidia.com/cuda.driver.major"] = major;
    labels["nvidia.com/cuda.driver.minor"] = minor;
    labels["nvidia.com/cuda.driver.rev"] = rev;
    labels["nvidia.com/cuda.driver-version.major"] = major;
    labels["nvidia.com/cuda.driver-version.minor"] = minor;
    labels["nvidia.com/cuda.driver-version.revision"] = rev;
    labels["nvidia.com/cuda.driver-version.full"] = [major, minor, rev].filter((p) => p !== "").join(".");
  }
  const cuda = majorMinor(common(report.devices, (d) => attribute(d, "cudaVersion")));
  if (cuda !== undefined) {
    labels["nvidia.com/cuda.runtime.major"] = String(cuda[0]);
    labels["nvidia.com/cuda.runtime.minor"] = String(cuda[1]);
    labels["nvidia.com/cuda.runtime-version.major"] = String(cuda[0]);
    labels["nvidia.com/cuda.runtime-version.minor"] = String(cuda[1]);
    labels["nvidia.com/cuda.runtime-version.full"] = `${cuda[0]}.${cuda[1]}`;
  }
  const migModes = report.devices.map((d) => attribute(d, "migMode")).filter((m) => m !== undefined);
  if (migModes.length > 0)
    labels["nvidia.com/mig.capable"] = String(migModes.some((m) => m === "Enabled" || m === "Disabled"));
  return labels;
}

/**
 * dpo's labels of any backend's devices, under the config's name: how many physical devices the report
 * lists, how many containers share each, and the product when every device names the same one (the
 * `model` attribute, or a PCI device's `vendor`-`device` ids).
 */
export function deviceLabels(
  configName: string,
  spec: Pick<DevicePluginConfigSpec, "sharing">,
  report: Pick<DeviceNodeStateStatus, "devices">,
): Record<string, string> {
  const labels: Record<string, string> = {
    [deviceLabelKey("count", configName)]: String(report.devices.length),
    [deviceLabelKey("replicas", configName)]: String(sharingReplicas(spec)),
  };
  const product = common(report.devices, (d) => {
    const model = attribute(d, "model");
    if (model !== undefined) return model;
    const vendor = attribute(d, "vendor");
    const id = attribute(d, "device");
    return vendor !== undefined && id !== undefined ? `${vendor}-${id}` : undefined;
  });
  const value = product === undefined ? "" : sanitiseProduct(product);
  if (value !== "") labels[deviceLabelKey("product", configName)] = value;
  return labels;
}

/**
 * Every label a node gets from the config's report: dpo's device labels, and GFD's for the NVIDIA
 * backend. Values that are not valid label values are left out rather than sent to be refused.
 */
export function labelsFromReport(
  config: { metadata: { name: string }; spec: Pick<DevicePluginConfigSpec, "sharing" | "backend"> },
  report: Pick<DeviceNodeStateStatus, "devices">,
): Record<string, string> {
  const labels: Record<string, string> = {
    ...deviceLabels(config.metadata.name, config.spec, report),
    ...(config.spec.backend.type === "NVIDIA" ? gfdLabels(config.spec, report) : {}),
  };
  return Object.fromEntries(
    Object.entries(labels).filter(([, v]) => v.length <= MAX_LABEL_VALUE && LABEL_VALUE.test(v)),
  );
}
