// The kubelet's plugin watcher over a node's plugins_registry: a registration socket appearing there is
// asked GetInfo and handed to the handler of its type (the device manager for DevicePlugin), the verdict
// goes back with NotifyRegistrationStatus, and a socket that goes away deregisters its plugin.
import * as grpc from "@grpc/grpc-js";
import { watch, type FSWatcher } from "node:fs";
import { lstat, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  DEVICE_PLUGIN_TYPE,
  PluginRegistrationClient,
  type PluginInfo,
} from "../../src/plugin-runtime/proto/index.js";
import { callWithDeadline, KUBELET_CHANNEL_OPTIONS } from "./kubelet-grpc.js";

/** The plugin watcher's deadlines for GetInfo and NotifyRegistrationStatus, and how often it looks again. */
const WATCHER_GET_INFO_TIMEOUT_MS = 1_000;
const WATCHER_NOTIFY_TIMEOUT_MS = 5_000;
const WATCHER_RESYNC_MS = 1_000;

/**
 * A plugin watcher handler for another plugin type (the kubelet's PluginHandler): `register` validates
 * and registers, throwing the message the watcher sends back with NotifyRegistrationStatus;
 * `deregister` is called when the registration socket goes away.
 */
export interface PluginTypeHandler {
  register(info: PluginInfo, socketPath: string): Promise<void>;
  deregister(info: PluginInfo, socketPath: string): void;
}

/** One plugin found by the plugin watcher, for assertions. */
export interface WatcherRegistration {
  socket: string;
  info: PluginInfo | undefined;
  registered: boolean;
  error: string;
}

/** The device manager's part in the plugin watcher: the handler of DevicePlugin sockets. */
export interface DevicePluginHandler {
  /** Validates the plugin and connects its endpoint; returns the endpoint, or throws the refusal. */
  register(info: PluginInfo, socketPath: string): Promise<string>;
  /** After NotifyRegistrationStatus told the plugin it registered. */
  registered(resourceName: string): void;
  /** The registration socket of the plugin of `resourceName` at `endpoint` went away. */
  deregister(resourceName: string, endpoint: string | undefined): void;
}

export interface SimulatedPluginWatcherOptions {
  /** Stands in for <root-dir>/plugins_registry. */
  dir: string;
  devicePlugins: DevicePluginHandler;
  /** The handlers of other plugin types, by PluginInfo.type. */
  handlers: Readonly<Record<string, PluginTypeHandler>> | undefined;
  /** Every registration attempt, in order: the watcher appends to it. */
  registrations: WatcherRegistration[];
  /** Whether the kubelet serves: the watcher registers nothing while it does not. */
  serving: () => boolean;
}

export class SimulatedPluginWatcher {
  /** Registration sockets the plugin watcher handled: socket path → resource registered, or undefined. */
  private readonly watchedSockets = new Map<string, string | undefined>();
  private readonly watcherEndpoints = new Map<string, string>();
  /** Registration sockets registered with another type's handler. */
  private readonly otherSockets = new Map<string, { info: PluginInfo; handler: PluginTypeHandler }>();
  /** Registration attempts in flight, by registration socket. */
  private readonly watcherAttempts = new Map<string, Promise<void>>();
  private registryWatcher: FSWatcher | undefined;
  private registryTimer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;
  private rescan = false;

  constructor(private readonly options: SimulatedPluginWatcherOptions) {}

  async start(): Promise<void> {
    const { dir } = this.options;
    if (this.registryTimer !== undefined) return;
    await mkdir(dir, { recursive: true });
    try {
      this.registryWatcher = watch(dir, () => this.scanRegistrySoon());
      this.registryWatcher.on("error", () => {
        this.registryWatcher?.close();
        this.registryWatcher = undefined;
      });
    } catch {
      // Polling alone still finds every socket, a second later.
    }
    // The kubelet's reconciler looks again every second; so does the simulation, for missed events.
    this.registryTimer = setInterval(() => this.scanRegistrySoon(), WATCHER_RESYNC_MS);
    this.registryTimer.unref();
    this.scanRegistrySoon();
    await this.scanning;
  }

  /** Stops looking; attempts in flight go on (see settled). */
  stop(): void {
    clearInterval(this.registryTimer);
    this.registryTimer = undefined;
    this.registryWatcher?.close();
    this.registryWatcher = undefined;
  }

  /** A restarted plugin watcher knows no socket: it finds every one in plugins_registry again. */
  forget(): void {
    this.watchedSockets.clear();
    this.otherSockets.clear();
  }

  /** Resolves once the pass and the registration attempts in flight are over. */
  async settled(): Promise<void> {
    await this.scanning;
    await Promise.all(this.watcherAttempts.values());
  }

  private scanRegistrySoon(): void {
    if (!this.options.serving()) return;
    if (this.scanning !== undefined) {
      this.rescan = true;
      return;
    }
    this.scanning = (async () => {
      do {
        this.rescan = false;
        await this.scanRegistry().catch(() => undefined);
      } while (this.rescan && this.options.serving());
    })().finally(() => {
      this.scanning = undefined;
    });
  }

  /** One pass of the plugin watcher: register new sockets, deregister sockets that went away. */
  private async scanRegistry(): Promise<void> {
    const { dir } = this.options;
    const present = new Set<string>();
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const path = join(dir, name);
      if ((await lstat(path).catch(() => undefined))?.isSocket()) present.add(path);
    }
    for (const [path, resourceName] of this.watchedSockets) {
      if (present.has(path)) continue;
      this.watchedSockets.delete(path);
      const endpoint = this.watcherEndpoints.get(path);
      this.watcherEndpoints.delete(path);
      if (resourceName === undefined) continue;
      this.options.devicePlugins.deregister(resourceName, endpoint);
    }
    for (const [path, other] of this.otherSockets) {
      if (present.has(path)) continue;
      this.otherSockets.delete(path);
      other.handler.deregister(other.info, path);
    }
    for (const path of present) {
      if (!this.options.serving()) return;
      // A socket whose registration failed is tried again on the next pass, as the kubelet retries.
      if (
        this.watchedSockets.get(path) !== undefined ||
        this.otherSockets.has(path) ||
        this.watcherAttempts.has(path)
      )
        continue;
      // Attempts run side by side: one plugin that is slow to answer must not hold up the others.
      const attempt = this.registerThroughWatcher(path)
        .catch(() => undefined)
        .finally(() => this.watcherAttempts.delete(path));
      this.watcherAttempts.set(path, attempt);
    }
  }

  private async registerThroughWatcher(socketPath: string): Promise<void> {
    const client = new PluginRegistrationClient(
      `unix://${socketPath}`,
      grpc.credentials.createInsecure(),
      KUBELET_CHANNEL_OPTIONS,
    );
    const attempt: WatcherRegistration = {
      socket: socketPath,
      info: undefined,
      registered: false,
      error: "",
    };
    try {
      let info: PluginInfo;
      try {
        info = await callWithDeadline(client.getInfo.bind(client), {}, WATCHER_GET_INFO_TIMEOUT_MS);
      } catch (err) {
        // Nothing to notify: the socket does not answer (yet). It is asked again on the next pass.
        this.watchedSockets.set(socketPath, undefined);
        attempt.error = `GetInfo: ${(err as Error).message}`;
        this.options.registrations.push(attempt);
        return;
      }
      attempt.info = info;
      if (info.type !== DEVICE_PLUGIN_TYPE) {
        await this.registerOtherType(client, info, socketPath, attempt);
        return;
      }
      try {
        const endpoint = await this.options.devicePlugins.register(info, socketPath);
        this.watchedSockets.set(socketPath, info.name);
        this.watcherEndpoints.set(socketPath, endpoint);
        attempt.registered = true;
      } catch (err) {
        this.watchedSockets.set(socketPath, undefined);
        attempt.error = (err as Error).message;
      }
      this.options.registrations.push(attempt);
      await notifyRegistrationStatus(client, attempt);
      if (attempt.registered) this.options.devicePlugins.registered(info.name);
    } finally {
      client.close();
    }
  }

  /** The plugin watcher's part for a socket of another type: its handler, or the kubelet's refusal. */
  private async registerOtherType(
    client: PluginRegistrationClient,
    info: PluginInfo,
    socketPath: string,
    attempt: WatcherRegistration,
  ): Promise<void> {
    const handler = this.options.handlers?.[info.type];
    try {
      if (handler === undefined) {
        throw new Error(
          `RegisterPlugin error -- no handler registered for plugin type: ${info.type} at socket ${socketPath}`,
        );
      }
      await handler.register(info, socketPath);
      this.otherSockets.set(socketPath, { info, handler });
      attempt.registered = true;
    } catch (err) {
      this.watchedSockets.set(socketPath, undefined);
      attempt.error = (err as Error).message;
    }
    this.options.registrations.push(attempt);
    await notifyRegistrationStatus(client, attempt);
  }
}

/** The verdict back to the plugin; a plugin that does not take it is not asked again. */
async function notifyRegistrationStatus(
  client: PluginRegistrationClient,
  attempt: WatcherRegistration,
): Promise<void> {
  await callWithDeadline(
    client.notifyRegistrationStatus.bind(client),
    { pluginRegistered: attempt.registered, error: attempt.error },
    WATCHER_NOTIFY_TIMEOUT_MS,
  ).catch(() => undefined);
}
