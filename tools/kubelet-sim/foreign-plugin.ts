// A device plugin that is not dpo, for tests on the simulated and the real kubelet: it serves DevicePlugin on
// a socket in the kubelet's device-plugins directory, registers a resource name, answers ListAndWatch with a
// fixed device list and keeps the stream open. Registering a resource dpo serves with an empty list is how a
// leftover or incumbent plugin takes the resource's devices from under a registered plugin: the kubelet
// keeps each resource's devices from the last answer of any of its endpoints (genericDeviceUpdateCallback).
import * as grpc from "@grpc/grpc-js";
import { unlink } from "node:fs/promises";
import { join } from "node:path";
import {
  DevicePluginService,
  KUBELET_API_VERSION,
  KUBELET_SOCKET_NAME,
  type DevicePluginServer,
} from "../../src/plugin-runtime/proto/index.js";
import {
  registerRequest,
  registerWithKubelet,
} from "../../src/plugin-runtime/registration/kubelet-registration.js";

export class ForeignDevicePlugin {
  private server: grpc.Server | undefined;

  constructor(
    private readonly opts: {
      /** The kubelet's device-plugins directory. */
      dir: string;
      /** The socket's file name; must not start with dpo's socket prefix for the resource. */
      socketName: string;
      resourceName: string;
      /** The device ids it advertises as healthy (none: it takes the resource's devices away). */
      deviceIds?: readonly string[];
    },
  ) {}

  get socketPath(): string {
    return join(this.opts.dir, this.opts.socketName);
  }

  /** Serves and registers; resolves once the kubelet accepted the registration. */
  async start(): Promise<void> {
    const server = new grpc.Server();
    const devices = (this.opts.deviceIds ?? []).map((ID) => ({ ID, health: "Healthy" }));
    const impl: DevicePluginServer = {
      getDevicePluginOptions: (_call, callback) =>
        callback(null, { preStartRequired: false, getPreferredAllocationAvailable: false }),
      listAndWatch: (call) => {
        call.write({ devices });
      },
      getPreferredAllocation: (_call, callback) => callback(null, { containerResponses: [] }),
      allocate: (_call, callback) => callback(null, { containerResponses: [] }),
      preStartContainer: (_call, callback) => callback(null, {}),
    };
    server.addService(DevicePluginService, impl);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${this.socketPath}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    this.server = server;
    await registerWithKubelet({
      kubeletSocketPath: join(this.opts.dir, KUBELET_SOCKET_NAME),
      request: registerRequest(KUBELET_API_VERSION, this.opts.socketName, this.opts.resourceName, {
        preStartRequired: false,
        getPreferredAllocationAvailable: false,
      }),
    });
  }

  async stop(): Promise<void> {
    this.server?.forceShutdown();
    this.server = undefined;
    await unlink(this.socketPath).catch(() => undefined);
  }
}
