// A stand-in for the kubelet's device manager, for tests only: it serves Registration on kubelet.sock in
// a directory, validates requests like the kubelet, dials plugins back, consumes ListAndWatch and allocates
// the way pod admission does. It stands in for the kubelet and nothing else.
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { watch, type FSWatcher } from "node:fs";
import { mkdir, readdir, lstat, unlink } from "node:fs/promises";
import { join } from "node:path";
import {
  DEVICE_PLUGIN_TYPE,
  DevicePluginClient,
  PluginRegistrationClient,
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
// The kubelet's rules, implemented here: a test peer sharing the plugin's validation could not catch its bugs.
import {
  invalidResourceNameMessage,
  isExtendedResourceName,
  KUBELET_DEVICE_PLUGIN_VERSIONS,
  kubeletSpeaksAny,
  unsupportedVersionMessage,
} from "./kubelet-rules.js";

/** What the device manager knows about one resource, as the kubelet tracks it. */
export interface SimulatedResource {
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

/** The plugin watcher's deadlines for GetInfo and NotifyRegistrationStatus, and how often it looks again. */
const WATCHER_GET_INFO_TIMEOUT_MS = 1_000;
const WATCHER_NOTIFY_TIMEOUT_MS = 5_000;
const WATCHER_RESYNC_MS = 1_000;
/**
 * Channel options of every connection the simulated kubelet makes. grpc-js shares one HTTP/2 connection
 * between all clients in a process that dial the same target with the same options (its global
 * subchannel pool), so without this the "kubelet" would ride on the connection of any test client that
 * dials the plugin too, and whatever the plugin does to that client's connection (nghttp2 closes one
 * that resets too many streams) would happen to the kubelet's ListAndWatch as well. The real kubelet is
 * its own process with connections of its own; a local pool per client gives the simulation the same.
 */
const KUBELET_CHANNEL_OPTIONS: grpc.ChannelOptions = { "grpc.use_local_subchannel_pool": 1 };
/** The kubelet's deadline on PreStartContainer (pluginapi.KubeletPreStartContainerRPCTimeoutInSecs). */
const PRE_START_CONTAINER_TIMEOUT_MS = 30_000;

function promisify<Req, Res>(
  fn: (
    req: Req,
    md: grpc.Metadata,
    opts: Partial<grpc.CallOptions>,
    cb: (e: grpc.ServiceError | null, r: Res) => void,
  ) => unknown,
  req: Req,
  timeoutMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
      err ? reject(err) : resolve(res),
    );
  });
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
  /** Devices allocated per owner (a pod's uid), by resource: what release() gives back. */
  private readonly owners = new Map<string, Map<string, Set<string>>>();
  /**
   * Devices allocated per owner and container, by resource, in allocation order: the kubelet's
   * podDevices, which its PodResources API answers from (GetDevices(podUID, containerName)).
   */
  private readonly containers = new Map<string, Map<string, Map<string, string[]>>>();
  /** Every PreStartContainer call made, in order, for assertions. */
  readonly preStartCalls: { resourceName: string; deviceIds: string[] }[] = [];
  /** Every registration attempt through plugins_registry, in order (only with pluginsRegistryDir). */
  readonly watcherRegistrations: WatcherRegistration[] = [];
  /** Registration sockets the plugin watcher handled: socket path → resource registered, or undefined. */
  private readonly watchedSockets = new Map<string, string | undefined>();
  private registryWatcher: FSWatcher | undefined;
  private registryTimer: NodeJS.Timeout | undefined;
  private scanning: Promise<void> | undefined;
  private rescan = false;

  constructor(private readonly opts: SimulatedDeviceManagerOptions) {
    super();
    this.gracePeriodMs = opts.gracePeriodMs ?? 5 * 60_000;
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
    await this.startPluginWatcher();
  }

  /**
   * What the kubelet does when it restarts: stop serving, delete every socket in the directory (not
   * directories, not regular files such as kubelet_internal_checkpoint), then serve a new kubelet.sock.
   * With `forgetDevices`, every resource also loses its device list, as a restarted kubelet that only
   * knows resource names from its checkpoint reports capacity 0 until the plugin registers again.
   */
  async restart(options: { forgetDevices?: boolean } = {}): Promise<void> {
    await this.stopServing();
    // A restarted plugin watcher knows no socket: it finds every one in plugins_registry again.
    this.watchedSockets.clear();
    this.otherSockets.clear();
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
    await this.scanning;
    await Promise.all(this.watcherAttempts.values());
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
    return (
      this.resources.has(resourceName) || [...this.owners.values()].some((held) => held.has(resourceName))
    );
  }

  /**
   * Gives back every device allocated for `owner` (a pod), as the kubelet does when the pod is no
   * longer active (UpdateAllocatedDevices). Devices allocated without an owner stay allocated.
   */
  release(owner: string): void {
    this.containers.delete(owner);
    const held = this.owners.get(owner);
    if (held === undefined) return;
    this.owners.delete(owner);
    for (const [resourceName, ids] of held) {
      const r = this.resources.get(resourceName);
      if (r !== undefined) for (const id of ids) r.allocated.delete(id);
    }
  }

  /** Devices allocated to `owner`, by resource. */
  allocatedTo(owner: string): Map<string, string[]> {
    return new Map([...(this.owners.get(owner) ?? [])].map(([resource, ids]) => [resource, [...ids]]));
  }

  /** Devices allocated to one container of `owner`, by resource (the kubelet's GetDevices). */
  containerDevices(owner: string, container: string): Map<string, string[]> {
    return new Map(
      [...(this.containers.get(owner)?.get(container) ?? [])].map(([resource, ids]) => [resource, [...ids]]),
    );
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

  /**
   * Admits and starts one container that requests `count` devices, the way the kubelet does
   * (devicesToAllocate in pkg/kubelet/cm/devicemanager/manager.go, without NUMA alignment): devices
   * `reuse`d from an init container of the same pod come first; if they do not cover the request and
   * the plugin offers GetPreferredAllocation, it is asked with `must_include` = the devices already
   * chosen, `available` = the free devices plus those, `allocation_size` = the whole request, and the
   * part of its answer that is free is taken; the rest is filled from the free devices. Then Allocate,
   * then PreStartContainer with the container's devices when the plugin's options ask for it (30 s).
   */
  async allocate(
    resourceName: string,
    count: number,
    options: { reuse?: readonly string[]; owner?: string; container?: string } = {},
  ): Promise<{ deviceIds: string[]; response: AllocateResponse }> {
    const r = this.resources.get(resourceName);
    // The kubelet's own errors (devicesToAllocate), which pod admission turns into UnexpectedAdmissionError.
    if (r === undefined) throw new Error(`cannot allocate unregistered device ${resourceName}`);
    // A plugin whose stream ended has every device marked unhealthy until it registers again.
    const healthy = new Set(
      r.connected ? r.devices.filter((d) => d.health === "Healthy").map((d) => d.ID) : [],
    );
    if (healthy.size === 0) {
      throw new Error(`no healthy devices present; cannot allocate unhealthy devices ${resourceName}`);
    }
    const reuse = options.reuse ?? [];
    const notReusable = reuse.filter((id) => !r.allocated.has(id) || !healthy.has(id));
    if (notReusable.length > 0) {
      throw new Error(`cannot reuse ${notReusable.join(", ")}: not allocated to the pod, or unhealthy`);
    }
    const chosen: string[] = [];
    const take = (ids: Iterable<string>): boolean => {
      for (const id of ids) {
        if (chosen.length >= count) break;
        if (!chosen.includes(id)) chosen.push(id);
      }
      return chosen.length >= count;
    };
    if (!take(reuse)) {
      const available = [...healthy].filter((id) => !r.allocated.has(id));
      const needed = count - chosen.length;
      if (available.length < needed) {
        throw new Error(
          `requested number of devices unavailable for ${resourceName}. Requested: ${needed}, Available: ${available.length}`,
        );
      }
      if (r.options.getPreferredAllocationAvailable) {
        const preferred = await promisify(
          r.client.getPreferredAllocation.bind(r.client),
          {
            containerRequests: [
              {
                availableDeviceIDs: [...available, ...chosen],
                mustIncludeDeviceIDs: [...chosen],
                allocationSize: count,
              },
            ],
          },
          10_000,
        );
        const free = new Set(available);
        take((preferred.containerResponses[0]?.deviceIDs ?? []).filter((id) => free.has(id)));
      }
      take(available);
    }
    const response = await promisify(
      r.client.allocate.bind(r.client),
      { containerRequests: [{ devicesIds: chosen }] },
      10_000,
    );
    for (const id of chosen) r.allocated.add(id);
    if (options.owner !== undefined) {
      const held = this.owners.get(options.owner) ?? new Map<string, Set<string>>();
      this.owners.set(options.owner, held);
      const ids = held.get(resourceName) ?? new Set<string>();
      held.set(resourceName, ids);
      for (const id of chosen) ids.add(id);
      if (options.container !== undefined) {
        const byContainer = this.containers.get(options.owner) ?? new Map<string, Map<string, string[]>>();
        this.containers.set(options.owner, byContainer);
        const resources = byContainer.get(options.container) ?? new Map<string, string[]>();
        byContainer.set(options.container, resources);
        resources.set(resourceName, [...(resources.get(resourceName) ?? []), ...chosen]);
      }
    }
    if (r.options.preStartRequired) {
      this.preStartCalls.push({ resourceName, deviceIds: [...chosen] });
      await promisify(
        r.client.preStartContainer.bind(r.client),
        { devicesIds: chosen },
        PRE_START_CONTAINER_TIMEOUT_MS,
      );
    }
    return { deviceIds: chosen, response };
  }

  private async register(req: RegisterRequest): Promise<void> {
    if (!kubeletSpeaksAny([req.version])) throw new Error(unsupportedVersionMessage(req.version));
    if (!isExtendedResourceName(req.resourceName)) {
      throw new Error(invalidResourceNameMessage(req.resourceName));
    }
    if (req.endpoint.includes("/")) throw new Error(`endpoint must be a file name, got ${req.endpoint}`);
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
    const options = await promisify(client.getDevicePluginOptions.bind(client), {}, 10_000);

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

  private async startPluginWatcher(): Promise<void> {
    const dir = this.opts.pluginsRegistryDir;
    if (dir === undefined || this.registryTimer !== undefined) return;
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

  private scanRegistrySoon(): void {
    if (this.server === undefined) return;
    if (this.scanning !== undefined) {
      this.rescan = true;
      return;
    }
    this.scanning = (async () => {
      do {
        this.rescan = false;
        await this.scanRegistry().catch(() => undefined);
      } while (this.rescan && this.server !== undefined);
    })().finally(() => {
      this.scanning = undefined;
    });
  }

  /** One pass of the plugin watcher: register new sockets, deregister sockets that went away. */
  private async scanRegistry(): Promise<void> {
    const dir = this.opts.pluginsRegistryDir;
    if (dir === undefined) return;
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
      // DeRegisterPlugin: before v1.37 the kubelet looks the client up by resource name, so the plugin
      // serving the resource now is disconnected, whoever's socket went (kubernetes #121994); from
      // v1.37 by name and socket.
      const current = this.resources.get(resourceName);
      const gone = this.opts.oneEndpointPerResource
        ? current
        : [current, ...this.replaced].find(
            (r) => r?.resourceName === resourceName && r.endpoint === endpoint,
          );
      if (gone?.connected) this.endpointEnded(gone);
    }
    for (const [path, other] of this.otherSockets) {
      if (present.has(path)) continue;
      this.otherSockets.delete(path);
      other.handler.deregister(other.info, path);
    }
    for (const path of present) {
      if (this.server === undefined) return;
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

  /** Registration attempts through the plugin watcher in flight, by registration socket. */
  private readonly watcherAttempts = new Map<string, Promise<void>>();

  private readonly watcherEndpoints = new Map<string, string>();
  /** Registration sockets registered with another type's handler. */
  private readonly otherSockets = new Map<string, { info: PluginInfo; handler: PluginTypeHandler }>();

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
        info = await promisify(client.getInfo.bind(client), {}, WATCHER_GET_INFO_TIMEOUT_MS);
      } catch (err) {
        // Nothing to notify: the socket does not answer (yet). It is asked again on the next pass.
        this.watchedSockets.set(socketPath, undefined);
        attempt.error = `GetInfo: ${(err as Error).message}`;
        this.watcherRegistrations.push(attempt);
        return;
      }
      attempt.info = info;
      if (info.type !== DEVICE_PLUGIN_TYPE) {
        await this.registerOtherType(client, info, socketPath, attempt);
        return;
      }
      try {
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
        this.watchedSockets.set(socketPath, info.name);
        this.watcherEndpoints.set(socketPath, endpoint);
        attempt.registered = true;
      } catch (err) {
        this.watchedSockets.set(socketPath, undefined);
        attempt.error = (err as Error).message;
      }
      this.watcherRegistrations.push(attempt);
      await promisify(
        client.notifyRegistrationStatus.bind(client),
        { pluginRegistered: attempt.registered, error: attempt.error },
        WATCHER_NOTIFY_TIMEOUT_MS,
      ).catch(() => undefined);
      const resource = attempt.registered ? this.resources.get(info.name) : undefined;
      if (resource !== undefined) this.emit("registered", resource);
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
    const handler = this.opts.pluginHandlers?.[info.type];
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
    this.watcherRegistrations.push(attempt);
    await promisify(
      client.notifyRegistrationStatus.bind(client),
      { pluginRegistered: attempt.registered, error: attempt.error },
      WATCHER_NOTIFY_TIMEOUT_MS,
    ).catch(() => undefined);
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
    clearInterval(this.registryTimer);
    this.registryTimer = undefined;
    this.registryWatcher?.close();
    this.registryWatcher = undefined;
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    server.forceShutdown();
  }
}
