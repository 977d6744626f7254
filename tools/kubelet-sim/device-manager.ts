// A stand-in for the kubelet's device manager, for tests only: it serves Registration on kubelet.sock in
// a directory, validates requests like the kubelet, dials plugins back, consumes ListAndWatch and allocates
// the way pod admission does (device-allocation.ts); with a plugins_registry it also runs the plugin
// watcher (plugin-watcher.ts). It stands in for the kubelet and nothing else.
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { mkdir, readdir, lstat, unlink } from "node:fs/promises";
import { join } from "node:path";
import {
  DevicePluginClient,
  RegistrationService,
  KUBELET_SOCKET_NAME,
  type AllocateResponse,
  type PluginInfo,
  type Device,
  type DevicePluginOptions,
  type ListAndWatchResponse,
  type RegisterRequest,
  type RegistrationServer,
} from "../../src/plugin-runtime/proto/index.js";
import { DeviceAllocations, type AllocatableResource, type AllocateOptions } from "./device-allocation.js";
import { callWithDeadline, KUBELET_CHANNEL_OPTIONS } from "./kubelet-grpc.js";
// The kubelet's rules, implemented here: a test peer sharing the plugin's validation could not catch its bugs.
import {
  invalidResourceNameMessage,
  isExtendedResourceName,
  KUBELET_DEVICE_PLUGIN_VERSIONS,
  kubeletSpeaksAny,
  unsupportedVersionMessage,
} from "./kubelet-rules.js";
import {
  SimulatedPluginWatcher,
  type PluginTypeHandler,
  type WatcherRegistration,
} from "./plugin-watcher.js";

export type { PluginTypeHandler, WatcherRegistration } from "./plugin-watcher.js";

/** What the device manager knows about one resource, as the kubelet tracks it. */
export interface SimulatedResource extends AllocatableResource {
  readonly resourceName: string;
  /** Register's endpoint (a file name in the directory), or the absolute path the plugin watcher dialled. */
  endpoint: string;
  /** The socket dialled: the kubelet tells endpoints apart by it from v1.37. */
  socketPath: string;
  options: DevicePluginOptions;
  client: DevicePluginClient;
  stream: grpc.ClientReadableStream<ListAndWatchResponse> | undefined;
  /** Last device list received; devices are all marked unhealthy when the stream ends. */
  devices: Device[];
  connected: boolean;
  /** Device ids handed to containers. */
  allocated: Set<string>;
  removalTimer: NodeJS.Timeout | undefined;
  /** Number of ListAndWatch responses received. */
  updates: number;
}

export interface DeviceManagerEvents {
  registered: [SimulatedResource];
  devices: [SimulatedResource];
  disconnected: [SimulatedResource];
  removed: [string];
}

export interface SimulatedDeviceManagerOptions {
  /** Stands in for /var/lib/kubelet/device-plugins. */
  dir: string;
  /** How long a disconnected resource is kept before it is removed (the kubelet uses 5 minutes). */
  gracePeriodMs?: number;
  /**
   * Stands in for <root-dir>/plugins_registry. When set, the manager also does the plugin watcher's
   * part: a registration socket appearing there is asked GetInfo, its endpoint is connected like a
   * Register request's, and the verdict goes back with NotifyRegistrationStatus; a socket that goes
   * away deregisters its plugin.
   */
  pluginsRegistryDir?: string;
  /**
   * The device manager of kubelets before v1.37.0 (kubernetes PR #135437): one endpoint per resource
   * name. A second registration takes the resource over while the first plugin keeps running, and when
   * the first plugin's stream ends later its disconnect is applied to the resource, that is to the new
   * plugin (kubernetes #121994): the devices turn unhealthy and stay so until the plugin registers
   * again. The plugin watcher deregisters by resource name too: an old plugin's registration socket
   * going disconnects whichever plugin serves the resource now.
   * Off (v1.37.0 and later): one endpoint per socket. Every connected endpoint keeps its stream and its
   * device lists update the resource; the newest registered serves it; when that one goes, another
   * connected one is promoted, and only the last one's end turns the devices unhealthy. A second
   * registration on a socket that is still connected is refused (`device plugin already connected`).
   */
  oneEndpointPerResource?: boolean;
  /**
   * The plugin watcher's other handlers, by PluginInfo.type (the kubelet's pluginHandlers): a socket of
   * such a type is handed to its handler instead of the device manager. A type with no handler is
   * refused as the kubelet refuses it (`no handler registered for plugin type`).
   */
  pluginHandlers?: Readonly<Record<string, PluginTypeHandler>>;
}

export class SimulatedDeviceManager extends EventEmitter<DeviceManagerEvents> {
  readonly resources = new Map<string, SimulatedResource>();
  /**
   * Endpoints a newer registration of their resource took over, still streaming: with one endpoint per
   * resource the kubelet forgot them (their end lands on the resource); with one per socket it keeps
   * them beside the one it uses.
   */
  private readonly replaced = new Set<SimulatedResource>();
  private server: grpc.Server | undefined;
  private readonly gracePeriodMs: number;
  /** Every Register request accepted, in order, for assertions. */
  readonly registrations: RegisterRequest[] = [];
  /** Register requests the manager refused, with the reason, for assertions. */
  readonly refused: { request: RegisterRequest; reason: string }[] = [];
  private readonly allocations = new DeviceAllocations(this.resources);
  /** Every PreStartContainer call made, in order, for assertions. */
  readonly preStartCalls = this.allocations.preStartCalls;
  /** Every registration attempt through plugins_registry, in order (only with pluginsRegistryDir). */
  readonly watcherRegistrations: WatcherRegistration[] = [];
  private readonly watcher: SimulatedPluginWatcher | undefined;

  constructor(private readonly opts: SimulatedDeviceManagerOptions) {
    super();
    this.gracePeriodMs = opts.gracePeriodMs ?? 5 * 60_000;
    this.watcher =
      opts.pluginsRegistryDir === undefined
        ? undefined
        : new SimulatedPluginWatcher({
            dir: opts.pluginsRegistryDir,
            devicePlugins: {
              register: (info, socketPath) => this.registerFromWatcher(info, socketPath),
              registered: (resourceName) => {
                const resource = this.resources.get(resourceName);
                if (resource !== undefined) this.emit("registered", resource);
              },
              deregister: (resourceName, endpoint) => this.deregisterFromWatcher(resourceName, endpoint),
            },
            handlers: opts.pluginHandlers,
            registrations: this.watcherRegistrations,
            serving: () => this.server !== undefined,
          });
  }

  get socketPath(): string {
    return join(this.opts.dir, KUBELET_SOCKET_NAME);
  }

  async start(): Promise<void> {
    await mkdir(this.opts.dir, { recursive: true });
    const server = new grpc.Server();
    const impl: RegistrationServer = {
      register: (call, callback) => {
        this.register(call.request).then(
          () => callback(null, {}),
          (err: Error) => {
            this.refused.push({ request: call.request, reason: err.message });
            callback({ code: grpc.status.UNKNOWN, details: err.message }, null);
          },
        );
      },
    };
    server.addService(RegistrationService, impl);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${this.socketPath}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
    this.server = server;
    await this.watcher?.start();
  }

  /**
   * What the kubelet does when it restarts: stop serving, delete every socket in the directory (not
   * directories, not regular files such as kubelet_internal_checkpoint), then serve a new kubelet.sock.
   * With `forgetDevices`, every resource also loses its device list, as a restarted kubelet that only
   * knows resource names from its checkpoint reports capacity 0 until the plugin registers again.
   */
  async restart(options: { forgetDevices?: boolean } = {}): Promise<void> {
    await this.stopServing();
    this.watcher?.forget();
    this.closeReplaced();
    for (const r of this.resources.values()) {
      this.disconnect(r);
      if (options.forgetDevices) {
        r.devices = [];
        this.emit("devices", r);
      }
    }
    for (const name of await readdir(this.opts.dir)) {
      const path = join(this.opts.dir, name);
      const st = await lstat(path).catch(() => undefined);
      if (st?.isSocket()) await unlink(path).catch(() => undefined);
    }
    await this.start();
  }

  /** Closes replaced endpoints without applying their end to anything (a kubelet restart, a stop). */
  private closeReplaced(): void {
    const replaced = [...this.replaced];
    this.replaced.clear();
    for (const r of replaced) {
      r.stream?.cancel();
      r.client.close();
    }
  }

  async stop(): Promise<void> {
    await this.stopServing();
    await this.watcher?.settled();
    this.closeReplaced();
    for (const r of this.resources.values()) {
      clearTimeout(r.removalTimer);
      r.stream?.cancel();
      r.client.close();
    }
    this.resources.clear();
    await unlink(this.socketPath).catch(() => undefined);
  }

  /**
   * Whether the kubelet treats `resourceName` as a device-plugin resource (isDevicePluginResource):
   * one a plugin registered, or one it still has devices allocated from.
   */
  isDevicePluginResource(resourceName: string): boolean {
    return this.resources.has(resourceName) || this.allocations.holds(resourceName);
  }

  /**
   * Gives back every device allocated for `owner` (a pod), as the kubelet does when the pod is no
   * longer active (UpdateAllocatedDevices). Devices allocated without an owner stay allocated.
   */
  release(owner: string): void {
    this.allocations.release(owner);
  }

  /** Devices allocated to `owner`, by resource. */
  allocatedTo(owner: string): Map<string, string[]> {
    return this.allocations.allocatedTo(owner);
  }

  /** Devices allocated to one container of `owner`, by resource (the kubelet's GetDevices). */
  containerDevices(owner: string, container: string): Map<string, string[]> {
    return this.allocations.containerDevices(owner, container);
  }

  /**
   * Every healthy device of every resource whose plugin is connected, with its NUMA nodes: what the
   * kubelet's GetAllocatableDevices answers (allDevices filtered by healthyDevices).
   */
  allocatableDevices(): { resourceName: string; device: Device }[] {
    return [...this.resources.values()].flatMap((r) =>
      r.connected
        ? r.devices
            .filter((d) => d.health === "Healthy")
            .map((device) => ({ resourceName: r.resourceName, device }))
        : [],
    );
  }

  /** The device `id` of `resourceName` as its plugin last listed it (for its NUMA nodes). */
  device(resourceName: string, id: string): Device | undefined {
    return this.resources.get(resourceName)?.devices.find((d) => d.ID === id);
  }

  /**
   * A device's health as the kubelet holds it: the plugin's last word, or Unhealthy for every device of a
   * resource whose stream ended (the kubelet marks them so); undefined for a device it does not know.
   */
  deviceHealth(resourceName: string, id: string): string | undefined {
    const r = this.resources.get(resourceName);
    const device = r?.devices.find((d) => d.ID === id);
    if (!r || !device) return undefined;
    return r.connected ? device.health : "Unhealthy";
  }

  /** Capacity counts every device, allocatable only the healthy ones (0 while disconnected). */
  capacity(resourceName: string): { capacity: number; allocatable: number } | undefined {
    const r = this.resources.get(resourceName);
    if (!r) return undefined;
    const healthy = r.connected ? r.devices.filter((d) => d.health === "Healthy").length : 0;
    return { capacity: r.devices.length, allocatable: healthy };
  }

  /** Admits and starts one container that requests `count` devices (see DeviceAllocations.allocate). */
  allocate(
    resourceName: string,
    count: number,
    options: AllocateOptions = {},
  ): Promise<{ deviceIds: string[]; response: AllocateResponse }> {
    return this.allocations.allocate(resourceName, count, options);
  }

  private async register(req: RegisterRequest): Promise<void> {
    validateRegister(req);
    await this.connectPlugin(req.resourceName, join(this.opts.dir, req.endpoint), req.endpoint);
    this.registrations.push(req);
    this.emit("registered", this.resources.get(req.resourceName)!);
  }

  /**
   * What both registration paths share: dial the plugin (the kubelet does so before it answers), ask its
   * options, replace an earlier client of the resource and consume ListAndWatch.
   */
  private async connectPlugin(resourceName: string, socketPath: string, endpoint: string): Promise<void> {
    const client = new DevicePluginClient(
      `unix://${socketPath}`,
      grpc.credentials.createInsecure(),
      KUBELET_CHANNEL_OPTIONS,
    );
    // The kubelet dials back before it answers Register; an unreachable endpoint fails the registration.
    await new Promise<void>((resolve, reject) =>
      client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())),
    ).catch((err: Error) => {
      client.close();
      throw new Error(`cannot dial ${endpoint}: ${err.message}`);
    });
    const options = await callWithDeadline(client.getDevicePluginOptions.bind(client), {}, 10_000);
    this.attach(resourceName, socketPath, endpoint, client, options);
  }

  /**
   * Register for a plugin that runs in this process (the node simulator's processless mode): the same
   * validation, bookkeeping and events as a Register request, with `client` answering the calls the
   * device manager makes instead of a connection to a socket. `endpoint` is the socket file name the
   * plugin would have served (one per plugin start, so v1.37 tells two instances apart).
   */
  registerInProcess(
    request: RegisterRequest,
    client: DevicePluginClient,
    options: DevicePluginOptions,
  ): void {
    validateRegister(request);
    const socketPath = join(this.opts.dir, request.endpoint);
    this.attach(request.resourceName, socketPath, request.endpoint, client, options);
    this.registrations.push(request);
    this.emit("registered", this.resources.get(request.resourceName)!);
  }

  /** A dialled plugin becomes the resource's endpoint: an earlier one is replaced, ListAndWatch consumed. */
  private attach(
    resourceName: string,
    socketPath: string,
    endpoint: string,
    client: DevicePluginClient,
    options: DevicePluginOptions,
  ): void {
    const previous = this.resources.get(resourceName);
    if (
      !this.opts.oneEndpointPerResource &&
      [previous, ...this.replaced].some(
        (r) => r?.connected && r.resourceName === resourceName && r.socketPath === socketPath,
      )
    ) {
      client.close();
      throw new Error(`device plugin already connected: ${socketPath}`);
    }
    if (previous) {
      clearTimeout(previous.removalTimer);
      // The old plugin's stream goes on: a kubelet with one endpoint per resource just forgets it, and
      // takes its end for the resource's (below); a kubelet with one per socket keeps it as a spare.
      if (previous.connected) {
        this.replaced.add(previous);
      } else {
        previous.stream?.cancel();
        previous.client.close();
      }
    }
    const resource: SimulatedResource = {
      resourceName,
      endpoint,
      socketPath,
      options,
      client,
      stream: undefined,
      devices: previous?.devices ?? [],
      connected: true,
      allocated: previous?.allocated ?? new Set(),
      removalTimer: undefined,
      updates: 0,
    };
    this.resources.set(resourceName, resource);
    const stream = client.listAndWatch({});
    resource.stream = stream;
    stream.on("data", (res: ListAndWatchResponse) => {
      const current = this.resources.get(resourceName);
      if (current === resource) {
        resource.devices = res.devices;
        resource.updates++;
        this.emit("devices", resource);
      } else if (!this.opts.oneEndpointPerResource && this.replaced.has(resource) && current?.connected) {
        // From v1.37 every connected endpoint's list is the resource's (genericDeviceUpdateCallback
        // by resource name); the replaced plugin's updates are not simulated on older kubelets.
        current.devices = res.devices;
        this.emit("devices", current);
      }
    });
    stream.on("end", () => this.endpointEnded(resource));
    stream.on("error", () => this.endpointEnded(resource));
  }

  /**
   * An endpoint's stream ended, or its registration socket went (the kubelet disconnects the client in
   * both cases). With one endpoint per resource the end is the resource's, whichever plugin it came
   * from (kubernetes #121994). With one per socket it removes that endpoint alone; the resource turns
   * unhealthy only when no other connected endpoint is left, and otherwise one of them serves it (the
   * kubelet promotes an arbitrary one; here the newest).
   */
  private endpointEnded(resource: SimulatedResource): void {
    const current = this.resources.get(resource.resourceName);
    const spare = this.replaced.delete(resource);
    if (spare) {
      resource.connected = false;
      resource.stream?.cancel();
      resource.client.close();
    }
    if (this.opts.oneEndpointPerResource) {
      if (current?.connected && (spare || current === resource)) this.disconnect(current);
      return;
    }
    if (current !== resource || !resource.connected) return;
    const promoted = [...this.replaced]
      .filter((r) => r.resourceName === resource.resourceName && r.connected)
      .at(-1);
    if (promoted === undefined) {
      this.disconnect(resource);
      return;
    }
    this.replaced.delete(promoted);
    resource.connected = false;
    resource.stream?.cancel();
    resource.client.close();
    clearTimeout(resource.removalTimer);
    promoted.devices = resource.devices;
    promoted.allocated = resource.allocated;
    this.resources.set(resource.resourceName, promoted);
    this.emit("devices", promoted);
  }

  /** The plugin watcher's DevicePlugin handler: the kubelet's ValidatePlugin, then the endpoint connected. */
  private async registerFromWatcher(info: PluginInfo, socketPath: string): Promise<string> {
    if (!kubeletSpeaksAny(info.supportedVersions)) {
      throw new Error(
        `manager version, ${KUBELET_DEVICE_PLUGIN_VERSIONS.join(",")}, is not among plugin supported versions [${info.supportedVersions.join(" ")}]`,
      );
    }
    if (!isExtendedResourceName(info.name)) {
      throw new Error(`invalid name of device plugin socket: ${invalidResourceNameMessage(info.name)}`);
    }
    const endpoint = info.endpoint === "" ? socketPath : info.endpoint;
    await this.connectPlugin(info.name, endpoint, endpoint);
    return endpoint;
  }

  /**
   * DeRegisterPlugin: before v1.37 the kubelet looks the client up by resource name, so the plugin
   * serving the resource now is disconnected, whoever's socket went (kubernetes #121994); from v1.37 by
   * name and socket.
   */
  private deregisterFromWatcher(resourceName: string, endpoint: string | undefined): void {
    const current = this.resources.get(resourceName);
    const gone = this.opts.oneEndpointPerResource
      ? current
      : [current, ...this.replaced].find((r) => r?.resourceName === resourceName && r.endpoint === endpoint);
    if (gone?.connected) this.endpointEnded(gone);
  }

  /** The stream is gone: every device is unhealthy until the plugin registers again or the grace period ends. */
  private disconnect(resource: SimulatedResource): void {
    resource.connected = false;
    resource.stream?.cancel();
    resource.client.close();
    resource.devices = resource.devices.map((d) => ({ ...d, health: "Unhealthy" }));
    this.emit("disconnected", resource);
    clearTimeout(resource.removalTimer);
    resource.removalTimer = setTimeout(() => {
      if (this.resources.get(resource.resourceName) === resource && !resource.connected) {
        this.resources.delete(resource.resourceName);
        this.emit("removed", resource.resourceName);
      }
    }, this.gracePeriodMs);
    resource.removalTimer.unref();
  }

  private async stopServing(): Promise<void> {
    this.watcher?.stop();
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    server.forceShutdown();
  }
}

/** The kubelet's checks of a Register request before it dials the plugin. */
function validateRegister(req: RegisterRequest): void {
  if (!kubeletSpeaksAny([req.version])) throw new Error(unsupportedVersionMessage(req.version));
  if (!isExtendedResourceName(req.resourceName)) {
    throw new Error(invalidResourceNameMessage(req.resourceName));
  }
  if (req.endpoint.includes("/")) throw new Error(`endpoint must be a file name, got ${req.endpoint}`);
}
