// Backend selection from a config, and the resource-named env var every Allocate response carries.
import { describe, expect, it } from "vitest";
import { DevicePluginConfigSpecSchema } from "../../../../src/api/v1beta1/spec.js";
import { createBackend } from "../../../../src/plugin-runtime/backends/index.js";
import { resourceEnvName } from "../../../../src/plugin-runtime/devices/env.js";
import { BACKEND_CASES } from "./backend-cases.js";
import { silentLogger } from "./backend-wait.js";

describe("resourceEnvName", () => {
  it.each([
    ["hardware-vendor.example/foo", "DPO_HARDWARE_VENDOR_EXAMPLE_FOO"],
    ["example.com/gpu", "DPO_EXAMPLE_COM_GPU"],
    ["vendor.example/Mixed_Case.v2", "DPO_VENDOR_EXAMPLE_MIXED_CASE_V2"],
    ["a.b/c-d", "DPO_A_B_C_D"],
  ])("%s → %s", (resourceName, want) => {
    expect(resourceEnvName(resourceName)).toBe(want);
    expect(want).toMatch(/^[A-Z_][A-Z0-9_]*$/);
  });
});

describe("createBackend", () => {
  const options = {
    logger: silentLogger(),
    resourceName: "hardware-vendor.example/foo",
    cdi: { enabled: false },
  };
  const spec = (backend: unknown) =>
    DevicePluginConfigSpecSchema.parse({ resourceName: "hardware-vendor.example/foo", backend });

  it.each(BACKEND_CASES)("builds the backend named by type %#", async (backend, kind, type) => {
    const built = createBackend(spec(backend), options);
    expect(built).toBeInstanceOf(kind);
    expect(built.type).toBe(type);
    expect(built.preStartRequired).toBe(false);
    await built.start();
    await built.stop();
  });

  it("names the missing member when the config was not validated", () => {
    const valid = spec({ type: "Mock", mock: { devices: 1 } });
    const broken = { ...valid, backend: { type: "PCI" as const } };
    expect(() => createBackend(broken, options)).toThrow("spec.backend.pci");
  });
});
