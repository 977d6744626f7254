// Registration through the kubelet's plugin watcher: serve pluginregistration.Registration on a socket in
// plugins_registry; the kubelet calls GetInfo, connects to our endpoint (device plugin or DRA plugin)
// and reports back.
import { unlink } from "node:fs/promises";
import { socketPath } from "./sockets.js";
import type { Logger } from "../../observability/json-log.js";
import { DEVICE_PLUGIN_TYPE, PluginRegistrationService, type PluginInfo } from "../proto/wire.js";
import { GrpcServer, type ServiceImplementation } from "../grpc/server.js";
import { shutdownServer } from "../server/shutdown.js";

export interface PluginWatcherOptions {
  registryDir: string;
  /** Socket file name for this registration socket (unique per start, see sockets.ts). */
  socketName: () => string;
  /** PluginInfo.type: DEVICE_PLUGIN_TYPE (the default) or DRA_PLUGIN_TYPE. */
  pluginType?: string;
  /** PluginInfo.name: the extended resource name of a device plugin, the driver name of a DRA plugin. */
  resourceName: string;
  /** Absolute path of the plugin's socket currently served (it changes after a kubelet restart). */
  endpointPath: () => string;
  /** API versions for a device plugin; gRPC service names ("v1.DRAPlugin") for a DRA plugin. */
  supportedVersions: readonly string[];
  logger: Logger;
  /**
   * Called with the kubelet's verdict from NotifyRegistrationStatus and the `supported_versions` of the
   * GetInfo answer it judged (empty when it never asked GetInfo on this socket).
   */
  onStatus: (registered: boolean, error: string, offeredVersions: readonly string[]) => void;
  /** Called when the kubelet asks GetInfo, i.e. the watcher has found the socket. */
  onInfoRequested?: () => void;
}

export class PluginWatcherRegistration {
  private server: GrpcServer | undefined;
  private path: string | undefined;
  /** supported_versions of the last GetInfo answer on the current socket. */
  private offered: readonly string[] = [];

  constructor(private readonly opts: PluginWatcherOptions) {}

  get socketPath(): string | undefined {
    return this.path;
  }

  /** Serves the registration service on a fresh socket; the old one (if any) is closed and removed first. */
  async serve(): Promise<string> {
    await this.close();
    const path = socketPath(this.opts.registryDir, this.opts.socketName());
    this.offered = [];
    const server = new GrpcServer();
    const implementation: ServiceImplementation<typeof PluginRegistrationService> = {
      getInfo: (_call, callback) => {
        this.opts.onInfoRequested?.();
        const info: PluginInfo = {
          type: this.opts.pluginType ?? DEVICE_PLUGIN_TYPE,
          name: this.opts.resourceName,
          endpoint: this.opts.endpointPath(),
          supportedVersions: [...this.opts.supportedVersions],
        };
        this.offered = info.supportedVersions;
        callback(null, info);
      },
      notifyRegistrationStatus: (call, callback) => {
        const { pluginRegistered, error } = call.request;
        callback(null, {});
        this.opts.onStatus(pluginRegistered, error, this.offered);
      },
    };
    server.addService(PluginRegistrationService, implementation);
    await server.listen(path);
    this.server = server;
    this.path = path;
    this.opts.logger.info(
      { resource: this.opts.resourceName, socket: path },
      "serving plugin-watcher registration",
    );
    return path;
  }

  async close(): Promise<void> {
    const server = this.server;
    const path = this.path;
    this.server = undefined;
    this.path = undefined;
    if (server) {
      await shutdownServer(server, 500);
    }
    if (path) await unlink(path).catch(() => undefined);
  }
}

/**
 * The device plugin API version a kubelet uses after accepting a plugin-watcher registration. The
 * kubelet does not say which one it picked: its device manager accepts a plugin when any entry of
 * GetInfo's `supported_versions` is a version it speaks, then uses that version. So the version in
 * use is the first offered one that both sides speak; undefined when nothing was offered (the kubelet
 * never asked GetInfo on this socket) or nothing offered is ours. Pure.
 */
export function acceptedWatcherVersion(
  offered: readonly string[],
  served: readonly string[],
): string | undefined {
  return offered.find((version) => served.includes(version));
}
