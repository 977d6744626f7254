// A stand-in for the kubelet's device manager, for tests only: it serves Registration on kubelet.sock in
// a directory, validates requests like the kubelet, dials plugins back, consumes ListAndWatch and allocates
// the way pod admission does. It stands in for the kubelet and nothing else.
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { mkdir, readdir, lstat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { checkExtendedResourceName } from "../../src/api/v1beta1/spec.js";
import {
  DevicePluginClient,
  RegistrationService,
  KUBELET_SOCKET_NAME,
  SUPPORTED_KUBELET_API_VERSIONS,
  type AllocateResponse,
  type Device,
  type DevicePluginOptions,
  type ListAndWatchResponse,
  type RegisterRequest,
  type RegistrationServer,
} from "../../src/plugin-runtime/proto/index.js";

/** What the device manager knows about one resource, as the kubelet tracks it. */
export interface SimulatedResource {
  readonly resourceName: string;
  endpoint: string;
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
}

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
  private server: grpc.Server | undefined;
  private readonly gracePeriodMs: number;
  /** Every Register request accepted, in order, for assertions. */
  readonly registrations: RegisterRequest[] = [];
  /** Register requests the manager refused, with the reason, for assertions. */
  readonly refused: { request: RegisterRequest; reason: string }[] = [];

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
  }

  /**
   * What the kubelet does when it restarts: stop serving, delete every socket in the directory (not
   * directories, not regular files such as kubelet_internal_checkpoint), then serve a new kubelet.sock.
   */
  async restart(): Promise<void> {
    await this.stopServing();
    for (const r of this.resources.values()) this.disconnect(r);
    for (const name of await readdir(this.opts.dir)) {
      const path = join(this.opts.dir, name);
      const st = await lstat(path).catch(() => undefined);
      if (st?.isSocket()) await unlink(path).catch(() => undefined);
    }
    await this.start();
  }

  async stop(): Promise<void> {
    await this.stopServing();
    for (const r of this.resources.values()) {
      clearTimeout(r.removalTimer);
      r.stream?.cancel();
      r.client.close();
    }
    this.resources.clear();
    await unlink(this.socketPath).catch(() => undefined);
  }

  /** Capacity counts every device, allocatable only the healthy ones (0 while disconnected). */
  capacity(resourceName: string): { capacity: number; allocatable: number } | undefined {
    const r = this.resources.get(resourceName);
    if (!r) return undefined;
    const healthy = r.connected ? r.devices.filter((d) => d.health === "Healthy").length : 0;
    return { capacity: r.devices.length, allocatable: healthy };
  }

  /**
   * Allocates `count` devices for one container the way pod admission does: asks GetPreferredAllocation
   * when the plugin offers it, keeps the part of the answer that is available, fills up, then Allocate.
   */
  async allocate(
    resourceName: string,
    count: number,
  ): Promise<{ deviceIds: string[]; response: AllocateResponse }> {
    const r = this.resources.get(resourceName);
    if (!r?.connected) throw new Error(`resource ${resourceName} is not registered`);
    const available = r.devices
      .filter((d) => d.health === "Healthy" && !r.allocated.has(d.ID))
      .map((d) => d.ID);
    if (available.length < count) {
      throw new Error(`requested ${count} of ${resourceName}, ${available.length} available`);
    }
    let chosen: string[] = [];
    if (r.options.getPreferredAllocationAvailable) {
      const preferred = await promisify(
        r.client.getPreferredAllocation.bind(r.client),
        {
          containerRequests: [
            { availableDeviceIDs: available, mustIncludeDeviceIDs: [], allocationSize: count },
          ],
        },
        10_000,
      );
      const free = new Set(available);
      chosen = (preferred.containerResponses[0]?.deviceIDs ?? [])
        .filter((id) => free.has(id))
        .slice(0, count);
    }
    for (const id of available) {
      if (chosen.length >= count) break;
      if (!chosen.includes(id)) chosen.push(id);
    }
    const response = await promisify(
      r.client.allocate.bind(r.client),
      { containerRequests: [{ devicesIds: chosen }] },
      10_000,
    );
    for (const id of chosen) r.allocated.add(id);
    return { deviceIds: chosen, response };
  }

  private async register(req: RegisterRequest): Promise<void> {
    if (!SUPPORTED_KUBELET_API_VERSIONS.includes(req.version)) {
      throw new Error(`requested device plugin version ${req.version} is not supported`);
    }
    const nameProblem = checkExtendedResourceName(req.resourceName);
    if (nameProblem !== undefined)
      throw new Error(`invalid resource name ${req.resourceName}: ${nameProblem}`);
    if (req.endpoint.includes("/")) throw new Error(`endpoint must be a file name, got ${req.endpoint}`);

    const client = new DevicePluginClient(
      `unix://${join(this.opts.dir, req.endpoint)}`,
      grpc.credentials.createInsecure(),
    );
    // The kubelet dials back before it answers Register; an unreachable endpoint fails the registration.
    await new Promise<void>((resolve, reject) =>
      client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())),
    ).catch((err: Error) => {
      client.close();
      throw new Error(`cannot dial ${req.endpoint}: ${err.message}`);
    });
    const options = await promisify(client.getDevicePluginOptions.bind(client), {}, 10_000);

    const previous = this.resources.get(req.resourceName);
    if (previous) {
      clearTimeout(previous.removalTimer);
      previous.stream?.cancel();
      previous.client.close();
    }
    const resource: SimulatedResource = {
      resourceName: req.resourceName,
      endpoint: req.endpoint,
      options,
      client,
      stream: undefined,
      devices: previous?.devices ?? [],
      connected: true,
      allocated: previous?.allocated ?? new Set(),
      removalTimer: undefined,
      updates: 0,
    };
    this.resources.set(req.resourceName, resource);
    this.registrations.push(req);
    const stream = client.listAndWatch({});
    resource.stream = stream;
    stream.on("data", (res: ListAndWatchResponse) => {
      if (this.resources.get(req.resourceName) !== resource) return;
      resource.devices = res.devices;
      resource.updates++;
      this.emit("devices", resource);
    });
    const ended = (): void => {
      if (this.resources.get(req.resourceName) === resource && resource.connected) this.disconnect(resource);
    };
    stream.on("end", ended);
    stream.on("error", ended);
    this.emit("registered", resource);
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
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    server.forceShutdown();
  }
}
