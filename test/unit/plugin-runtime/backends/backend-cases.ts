// Each backend type with a config of it that builds without its hardware, and the class it builds: one
// table for createBackend's and loadBackend's tests, which must agree.
import {
  DevFSDeviceBackend,
  MockDeviceBackend,
  NVIDIADeviceBackend,
  PCIDeviceBackend,
} from "../../../../src/plugin-runtime/backends/index.js";

export const BACKEND_CASES = [
  [{ type: "Mock", mock: { devices: 2 } }, MockDeviceBackend, "Mock"],
  [
    { type: "DevFS", devFS: { root: "/nonexistent-root", paths: [{ glob: "/dev/x*" }] } },
    DevFSDeviceBackend,
    "DevFS",
  ],
  [{ type: "PCI", pci: { vendor: "10de", sysfsRoot: "/nonexistent-sys" } }, PCIDeviceBackend, "PCI"],
  [{ type: "NVIDIA", nvidia: { nvidiaSmiPath: "/nonexistent/nvidia-smi" } }, NVIDIADeviceBackend, "NVIDIA"],
] as const;
