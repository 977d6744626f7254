// Picks and builds the backend a DevicePluginConfig asks for; the one place that knows every backend.
import type { Logger } from "../../observability/json-log.js";
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import { DevFSDeviceBackend } from "./devfs.js";
import { MockDeviceBackend } from "./mock.js";
import { NVIDIADeviceBackend } from "./nvidia.js";
import { PCIDeviceBackend } from "./pci.js";

export type { DeviceBackend, DeviceListener } from "../devices/backend.js";
export { UnknownDevicesError, REASON_DEVICE_REMOVED } from "./device-list.js";
export { MockDeviceBackend, MOCK_DEVICE_IDS_ENV, REASON_MARKED_UNHEALTHY } from "./mock.js";
export { DevFSDeviceBackend, REASON_WRONG_FILE_TYPE } from "./devfs.js";
export {
  PCIDeviceBackend,
  pciAddressesEnvName,
  REASON_NO_IOMMU_GROUP,
  REASON_VFIO_DEVICE_MISSING,
} from "./pci.js";
export { NVIDIADeviceBackend, NVIDIA_VISIBLE_DEVICES_ENV } from "./nvidia.js";

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

/** Builds the backend for `spec.backend.type`; throws when the matching member is missing. */
export function createBackend(spec: DevicePluginConfigSpec, options: CreateBackendOptions): DeviceBackend {
  const { backend } = spec;
  const timings = options.timings ?? {};
  switch (backend.type) {
    case "Mock":
      if (backend.mock === undefined) throw new Error("spec.backend.mock: must be set when type is Mock");
      return new MockDeviceBackend(backend.mock, {
        logger: options.logger,
        pollIntervalMs: timings.healthPollIntervalMs,
      });
    case "DevFS":
      if (backend.devFS === undefined) throw new Error("spec.backend.devFS: must be set when type is DevFS");
      return new DevFSDeviceBackend(backend.devFS, {
        logger: options.logger,
        rescanIntervalMs: timings.rescanIntervalMs,
        removedGracePeriodMs: timings.removedGracePeriodMs,
      });
    case "PCI":
      if (backend.pci === undefined) throw new Error("spec.backend.pci: must be set when type is PCI");
      return new PCIDeviceBackend(backend.pci, {
        logger: options.logger,
        resourceName: options.resourceName,
        rescanIntervalMs: timings.rescanIntervalMs,
        removedGracePeriodMs: timings.removedGracePeriodMs,
      });
    case "NVIDIA":
      if (backend.nvidia === undefined)
        throw new Error("spec.backend.nvidia: must be set when type is NVIDIA");
      return new NVIDIADeviceBackend(backend.nvidia, {
        logger: options.logger,
        pollIntervalMs: timings.nvidiaPollIntervalMs,
      });
  }
}
