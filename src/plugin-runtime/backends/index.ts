// Picks and builds the backend a DevicePluginConfig asks for, with every backend loaded (tests, tools, `dpo
// probe`, the DRA runtime); `dpo plugin` loads only its config's (load.ts).
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import { DevFSDeviceBackend } from "./devfs.js";
import { MockDeviceBackend } from "./mock.js";
import { NVIDIADeviceBackend } from "./nvidia.js";
import { PCIDeviceBackend } from "./pci.js";
import { buildBackend, type CreateBackendOptions } from "./build.js";

export type { DeviceBackend, DeviceListener } from "../devices/backend.js";
export type { BackendTimings, CreateBackendOptions } from "./build.js";
export { runtimeBackendOptions } from "./build.js";
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

/** Builds the backend for `spec.backend.type`; throws when the matching member is missing. */
export function createBackend(spec: DevicePluginConfigSpec, options: CreateBackendOptions): DeviceBackend {
  return buildBackend(spec, options, {
    Mock: MockDeviceBackend,
    DevFS: DevFSDeviceBackend,
    PCI: PCIDeviceBackend,
    NVIDIA: NVIDIADeviceBackend,
  });
}
