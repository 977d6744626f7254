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

import type { ApiRequest, ApiWatchRequest } from "../../src/plugin-runtime/report/api-client.js";
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

/**
 * Just enough of the API server for the slice publisher: slices kept by name with a resourceVersion, a
 * watch that stays open until it is stopped, every write recorded (a test can read the first one).
 */
export class SliceStore {
  readonly objects = new Map<
    string,
    { metadata: { name: string }; spec?: { devices?: { name: string }[] } }
  >();
  readonly writes: { devices: string[] }[] = [];
  private rv = 0;

  request<T>(req: ApiRequest): Promise<T> {
    const name = req.path.split("?")[0]!.split("/")[5];
    switch (req.method) {
      case "GET":
        return Promise.resolve(
          (name === undefined
            ? { metadata: { resourceVersion: String(this.rv) }, items: [...this.objects.values()] }
            : this.objects.get(name)) as T,
        );
      case "POST":
      case "PUT": {
        const body = req.body as { metadata: { name: string }; spec?: { devices?: { name: string }[] } };
        const stored = { ...body, metadata: { ...body.metadata, resourceVersion: String(++this.rv) } };
        this.objects.set(body.metadata.name, stored);
        this.writes.push({ devices: (body.spec?.devices ?? []).map((d) => d.name) });
        return Promise.resolve(stored as T);
      }
      case "DELETE":
        if (name !== undefined) this.objects.delete(name);
        return Promise.resolve({} as T);
      default:
        return Promise.reject(new Error(`unexpected ${req.method} ${req.path}`));
    }
  }

  watch(req: ApiWatchRequest): Promise<void> {
    return new Promise((_resolve, reject) =>
      req.signal?.addEventListener("abort", () => reject(new Error("watch stopped")), { once: true }),
    );
  }

  /** The devices the node's slices publish now, sorted. */
  published(): string[] {
    return [...this.objects.values()].flatMap((s) => (s.spec?.devices ?? []).map((d) => d.name)).sort();
  }
}
