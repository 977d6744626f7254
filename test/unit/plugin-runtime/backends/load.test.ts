// `dpo plugin` builds its backend with loadBackend, which loads the module of the config's backend alone:
// the same backend createBackend builds, the same errors, and a clear one when a caller of buildBackend
// did not load the class the config names.
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSpecSchema } from "../../../../src/api/v1beta1/spec.js";
import { buildBackend, runtimeBackendOptions } from "../../../../src/plugin-runtime/backends/build.js";
import { MockDeviceBackend } from "../../../../src/plugin-runtime/backends/index.js";
import { loadBackend } from "../../../../src/plugin-runtime/backends/load.js";
import { BACKEND_CASES } from "./backend-cases.js";
import { silentLogger } from "./backend-wait.js";

const options = {
  logger: silentLogger(),
  resourceName: "hardware-vendor.example/foo",
  cdi: { enabled: false },
};
const spec = (backend: unknown, extra: Record<string, unknown> = {}) =>
  DevicePluginConfigSpecSchema.parse({ resourceName: "hardware-vendor.example/foo", backend, ...extra });

describe("loadBackend", () => {
  it.each(BACKEND_CASES)(
    "builds the backend named by type, as createBackend does %#",
    async (backend, kind, type) => {
      const built = await loadBackend(spec(backend), options);
      expect(built).toBeInstanceOf(kind);
      expect(built.type).toBe(type);
      await built.start();
      await built.stop();
    },
  );

  it("names the missing member when the config was not validated", async () => {
    const valid = spec({ type: "Mock", mock: { devices: 1 } });
    const broken = { ...valid, backend: { type: "PCI" as const } };
    await expect(loadBackend(broken, options)).rejects.toThrow("spec.backend.pci");
  });
});

describe("buildBackend", () => {
  it("says which backend's module was not loaded instead of building another", () => {
    expect(() =>
      buildBackend(spec({ type: "NVIDIA", nvidia: {} }), options, { Mock: MockDeviceBackend }),
    ).toThrow("backend NVIDIA: its module was not loaded");
  });
});

describe("runtimeBackendOptions", () => {
  it("names CDI devices by spec.cdi.kind, else by the resource, as the runtime always has", () => {
    const logger = silentLogger();
    expect(runtimeBackendOptions(spec({ type: "Mock", mock: { devices: 1 } }), logger)).toEqual({
      logger,
      resourceName: "hardware-vendor.example/foo",
      cdi: { enabled: false, kind: "hardware-vendor.example/foo" },
    });
    const withKind = spec(
      { type: "Mock", mock: { devices: 1 } },
      { cdi: { enabled: true, kind: "vendor.example/gpu" } },
    );
    expect(runtimeBackendOptions(withKind, logger).cdi).toEqual({
      enabled: true,
      kind: "vendor.example/gpu",
    });
  });
});
