// A simulated device manager in a fresh directory for each test (useDeviceManager), and scripted device plugins
// that register with it over real unix sockets: the plugin's options and GetPreferredAllocation answers are the
// test's, and it records every call.
import * as grpc from "@grpc/grpc-js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach } from "vitest";
import {
  DevicePluginService,
  RegistrationClient,
  type DevicePluginOptions,
  type DevicePluginServer,
  type PreferredAllocationRequest,
  type PreStartContainerRequest,
} from "../../src/plugin-runtime/proto/index.js";
import { waitFor } from "../../tools/cluster/wait.js";
import { SimulatedDeviceManager } from "../../tools/kubelet-sim/device-manager.js";

export const DEVICE_IDS = ["d-0", "d-1", "d-2", "d-3", "d-4", "d-5"];

/** A device plugin whose options and GetPreferredAllocation answer the test chooses; it records every call. */
export class ScriptedPlugin {
  readonly preStartCalls: { request: PreStartContainerRequest; deadlineMs: number }[] = [];
  readonly preferredRequests: PreferredAllocationRequest[] = [];
  preferredAnswer: (request: PreferredAllocationRequest) => string[] = () => [];
  private server: grpc.Server | undefined;

  constructor(readonly options: DevicePluginOptions) {}

  async listen(path: string): Promise<void> {
    const server = new grpc.Server();
    const implementation: DevicePluginServer = {
      getDevicePluginOptions: (_call, callback) => callback(null, this.options),
      listAndWatch: (call) => {
        call.write({ devices: DEVICE_IDS.map((ID) => ({ ID, health: "Healthy", topology: undefined })) });
      },
      getPreferredAllocation: (call, callback) => {
        this.preferredRequests.push(call.request);
        callback(null, {
          containerResponses: call.request.containerRequests.map(() => ({
            deviceIDs: this.preferredAnswer(call.request),
          })),
        });
      },
      allocate: (call, callback) =>
        callback(null, {
          containerResponses: call.request.containerRequests.map(() => ({
            envs: {},
            mounts: [],
            devices: [],
            annotations: {},
            cdiDevices: [],
          })),
        }),
      preStartContainer: (call, callback) => {
        const deadline = call.getDeadline();
        this.preStartCalls.push({
          request: call.request,
          // grpc-js gives a Date or epoch milliseconds (Infinity without a deadline).
          deadlineMs: (deadline instanceof Date ? deadline.getTime() : deadline) - Date.now(),
        });
        callback(null, {});
      },
    };
    server.addService(DevicePluginService, implementation);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${path}`, grpc.ServerCredentials.createInsecure(), (err) =>
        err ? reject(err) : resolve(),
      ),
    );
    this.server = server;
  }

  close(): void {
    this.server?.forceShutdown();
  }
}

/** The device manager of the running test, in `dir`; useDeviceManager starts one for each test. */
export let dir: string;
export let kubelet: SimulatedDeviceManager;
/** The scripted plugins the running test served; closed after it. */
export const plugins: ScriptedPlugin[] = [];

/** For a test that restarts the device manager with other options: the one afterEach stops. */
export function setKubelet(next: SimulatedDeviceManager): void {
  kubelet = next;
}

/** A fresh simulated device manager in its own directory for each test of the file, stopped after it. */
export function useDeviceManager(): void {
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "dpo-dm-"));
    kubelet = new SimulatedDeviceManager({ dir, gracePeriodMs: 60_000 });
    await kubelet.start();
  });

  afterEach(async () => {
    await kubelet.stop();
    for (const plugin of plugins.splice(0)) plugin.close();
    rmSync(dir, { recursive: true, force: true });
  });
}

/** Serves a scripted plugin in the kubelet's directory and registers it the way a plugin does. */
export async function register(
  resourceName: string,
  options: DevicePluginOptions,
  version = "v1beta1",
): Promise<{ plugin: ScriptedPlugin; error: grpc.ServiceError | undefined }> {
  const plugin = new ScriptedPlugin(options);
  plugins.push(plugin);
  const endpoint = `p-${plugins.length}.sock`;
  await plugin.listen(join(dir, endpoint));
  const client = new RegistrationClient(
    `unix://${join(dir, "kubelet.sock")}`,
    grpc.credentials.createInsecure(),
  );
  const error = await new Promise<grpc.ServiceError | undefined>((resolve) =>
    client.register(
      { version, endpoint, resourceName, options },
      new grpc.Metadata(),
      { deadline: Date.now() + 15_000 },
      (err) => resolve(err ?? undefined),
    ),
  );
  client.close();
  return { plugin, error };
}

/** Register for a plugin already serving `endpoint`; resolves with the kubelet's error, if any. */
export async function registerAgain(
  resourceName: string,
  endpoint: string,
  options: DevicePluginOptions,
): Promise<grpc.ServiceError | undefined> {
  const client = new RegistrationClient(
    `unix://${join(dir, "kubelet.sock")}`,
    grpc.credentials.createInsecure(),
  );
  const error = await new Promise<grpc.ServiceError | undefined>((resolve) =>
    client.register(
      { version: "v1beta1", endpoint, resourceName, options },
      new grpc.Metadata(),
      { deadline: Date.now() + 15_000 },
      (err) => resolve(err ?? undefined),
    ),
  );
  client.close();
  return error;
}

export async function devicesSeen(resourceName: string): Promise<void> {
  await waitFor(
    `the device list of ${resourceName}`,
    (observe) => {
      const r = kubelet.resources.get(resourceName);
      observe({ connected: r?.connected, devices: r?.devices.length, refused: kubelet.refused });
      return r?.connected === true && r.devices.length === DEVICE_IDS.length;
    },
    { timeoutMs: 10_000, intervalMs: 10 },
  );
}
