// Shared set-up for protocol tests: temporary kubelet directories, configs, and a runtime driven by the
// simulated device manager over real unix sockets.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import { validateDevicePluginConfig } from "../../src/api/validate.js";
import type { DevicePluginConfig } from "../../src/api/v1beta1/config.js";
import type { DevicePluginConfigSpecInput } from "../../src/api/v1beta1/spec.js";
import { type RegistrationMode } from "../../src/contract/registration.js";
import type { DeviceBackend } from "../../src/plugin-runtime/devices/backend.js";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";

export { waitFor } from "../../tools/cluster/wait.js";

export const RESOURCE = "hardware-vendor.example/foo";

/** A temporary directory removed by the returned cleanup. Socket paths must stay short (108 bytes). */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `dpo-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function makeConfig(spec: Partial<DevicePluginConfigSpecInput>, name = "test"): DevicePluginConfig {
  const result = validateDevicePluginConfig({
    apiVersion: "dpo.dev/v1beta1",
    kind: "DevicePluginConfig",
    metadata: { name },
    spec: {
      resourceName: RESOURCE,
      backend: { type: "Mock", mock: { devices: 4, idPrefix: "foo", numaNodes: 2 } },
      ...spec,
    },
  });
  if (!result.ok) throw new Error(`bad test config: ${JSON.stringify(result.errors)}`);
  return result.value;
}

export interface Harness {
  dir: string;
  /** The CDI directory the runtime writes its spec into. */
  cdiDir: string;
  kubelet: SimulatedDeviceManager;
  runtime: PluginRuntime;
  close(): Promise<void>;
}

/** Starts a simulated kubelet and an in-process runtime in a fresh directory. */
export async function startHarness(
  config: DevicePluginConfig,
  opts: {
    registration?: RegistrationMode;
    backend?: DeviceBackend;
    startKubelet?: boolean;
    preStartTimeoutMs?: number;
    /** The CDI directory; a fresh one under the harness's directory by default. */
    cdiDir?: string;
    /** The kubelet's PodResources socket the runtime reads, and how often; not read by default. */
    podResources?: { socketPath: string; intervalMs?: number };
    logger?: Logger;
  } = {},
): Promise<Harness> {
  const tmp = tempDir("proto");
  const dir = join(tmp.dir, "dp");
  const kubelet = new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000 });
  if (opts.startKubelet !== false) await kubelet.start();
  const runtime = new PluginRuntime({
    config,
    devicePluginDir: dir,
    pluginsRegistryDir: join(tmp.dir, "reg"),
    registration: opts.registration ?? "kubelet",
    nodeName: "node-a",
    logger: opts.logger ?? pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" }),
    backend: opts.backend,
    pollIntervalMs: 200,
    retryBaseMs: 20,
    retryMaxMs: 200,
    preStartTimeoutMs: opts.preStartTimeoutMs,
    cdiDir: opts.cdiDir ?? join(tmp.dir, "cdi"),
    ...(opts.podResources ? { podResources: opts.podResources } : {}),
  });
  await runtime.start();
  return {
    dir,
    cdiDir: opts.cdiDir ?? join(tmp.dir, "cdi"),
    kubelet,
    runtime,
    close: async () => {
      await runtime.stop();
      await kubelet.stop();
      tmp.cleanup();
    },
  };
}
