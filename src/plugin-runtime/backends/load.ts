// Loads the module of the one backend a config names and builds it: `dpo plugin` holds that backend's code and
// no other's (each module loaded stays in an idle plugin's heap; docs/benchmarks.md, bench-plugin).
import type { DevicePluginConfigSpec } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import { buildBackend, type BackendClasses, type CreateBackendOptions } from "./build.js";

async function classesFor(type: DevicePluginConfigSpec["backend"]["type"]): Promise<BackendClasses> {
  switch (type) {
    case "Mock":
      return { Mock: (await import("./mock.js")).MockDeviceBackend };
    case "DevFS":
      return { DevFS: (await import("./devfs.js")).DevFSDeviceBackend };
    case "PCI":
      return { PCI: (await import("./pci.js")).PCIDeviceBackend };
    case "NVIDIA":
      return { NVIDIA: (await import("./nvidia.js")).NVIDIADeviceBackend };
  }
}

/** Builds the backend for `spec.backend.type`, loading its module alone; rejects as createBackend throws. */
export async function loadBackend(
  spec: DevicePluginConfigSpec,
  options: CreateBackendOptions,
): Promise<DeviceBackend> {
  return buildBackend(spec, options, await classesFor(spec.backend.type));
}
