// Builds the backend a DevicePluginConfig asks for from the backend classes its caller loaded: all four
// (index.ts, createBackend) or only the config's own (load.ts, loadBackend, what `dpo plugin` does).
import type { Logger } from "../../observability/json-log.js";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import type { DevFSDeviceBackend } from "./devfs.js";
import type { MockDeviceBackend } from "./mock.js";
import type { NVIDIADeviceBackend } from "./nvidia.js";
import type { PCIDeviceBackend } from "./pci.js";

/** How often backends look again without a file-system event; tests and benchmarks shorten these. */
export interface BackendTimings {
  /** Mock: health file re-read period (fallback to the directory watch). Default 1000 ms. */
  readonly healthPollIntervalMs?: number;
  /** DevFS and PCI: full rescan period. Default 5000 ms. */
  readonly rescanIntervalMs?: number;
  /** DevFS and PCI: how long a removed device stays listed as unhealthy. Default 60000 ms. */
  readonly removedGracePeriodMs?: number;
  /** NVIDIA: nvidia-smi (and dmesg) poll period; default `pollIntervalSeconds` of the config. */
  readonly nvidiaPollIntervalMs?: number;
}

export interface CreateBackendOptions {
  readonly logger: Logger;
  readonly resourceName: string;
  /**
   * CDI settings of the config. The server turns allocated ids into CDI device names itself; backends
   * keep returning device specs so a runtime without CDI still gets the device nodes.
   */
  readonly cdi: { readonly enabled: boolean; readonly kind?: string | undefined };
  readonly timings?: BackendTimings;
}

/** The backends' classes by `spec.backend.type`; a caller loads those it may build. */
export interface BackendClasses {
  Mock?: typeof MockDeviceBackend;
  DevFS?: typeof DevFSDeviceBackend;
  PCI?: typeof PCIDeviceBackend;
  NVIDIA?: typeof NVIDIADeviceBackend;
}

function backendClass<T extends keyof BackendClasses>(
  classes: BackendClasses,
  type: T,
): NonNullable<BackendClasses[T]> {
  const cls = classes[type];
  if (cls === undefined) throw new Error(`backend ${type}: its module was not loaded`);
  return cls;
}

/** What a plugin runtime builds its backend with: CDI names by `spec.cdi.kind`, else the resource name. */
export function runtimeBackendOptions(spec: DevicePluginConfigSpec, logger: Logger): CreateBackendOptions {
  return {
    logger,
    resourceName: spec.resourceName,
    cdi: { enabled: spec.cdi.enabled, kind: spec.cdi.kind ?? spec.resourceName },
  };
}

/**
 * Builds the backend for `spec.backend.type` from `classes`, which hold at least that type's class; throws
 * when the config's matching member is missing.
 */
export function buildBackend(
  spec: DevicePluginConfigSpec,
  options: CreateBackendOptions,
  classes: BackendClasses,
): DeviceBackend {
  const { backend } = spec;
  const timings = options.timings ?? {};
  switch (backend.type) {
    case "Mock":
      if (backend.mock === undefined) throw new Error("spec.backend.mock: must be set when type is Mock");
      return new (backendClass(classes, "Mock"))(backend.mock, {
        logger: options.logger,
        pollIntervalMs: timings.healthPollIntervalMs,
      });
    case "DevFS":
      if (backend.devFS === undefined) throw new Error("spec.backend.devFS: must be set when type is DevFS");
      return new (backendClass(classes, "DevFS"))(backend.devFS, {
        logger: options.logger,
        rescanIntervalMs: timings.rescanIntervalMs,
        removedGracePeriodMs: timings.removedGracePeriodMs,
      });
    case "PCI":
      if (backend.pci === undefined) throw new Error("spec.backend.pci: must be set when type is PCI");
      return new (backendClass(classes, "PCI"))(backend.pci, {
        logger: options.logger,
        resourceName: options.resourceName,
        rescanIntervalMs: timings.rescanIntervalMs,
        removedGracePeriodMs: timings.removedGracePeriodMs,
      });
    case "NVIDIA":
      if (backend.nvidia === undefined)
        throw new Error("spec.backend.nvidia: must be set when type is NVIDIA");
      return new (backendClass(classes, "NVIDIA"))(backend.nvidia, {
        logger: options.logger,
        pollIntervalMs: timings.nvidiaPollIntervalMs,
      });
  }
}
