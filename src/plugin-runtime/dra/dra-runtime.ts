// The plugin runtime in DRA mode (`spec.publish: DRA`): the same backend and DeviceSet as the device-plugin
// runtime, but the devices go out as this node's ResourceSlices and the kubelet talks to the DRA plugin
// (registered through the plugin watcher as DRAPlugin) instead of a device-plugin endpoint. It answers the
// node report the way PluginRuntime does, so the DeviceNodeState keeps being written in both modes, and
// labels its devices with the pods holding them from the kubelet's PodResources API, as PluginRuntime does.
import { EventEmitter } from "node:events";
import { join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import type { DevicePluginConfig } from "../../api/v1beta1/config.js";
import { draDriverName } from "../../api/v1beta1/dra-names.js";
import type { Sharing } from "../../api/v1beta1/spec.js";
import { DEFAULT_CDI_DIR } from "../../cdi/index.js";
import { DRA_PLUGINS_DIR, PLUGINS_REGISTRY_DIR } from "../../contract/kubelet-paths.js";
import type { DeviceBackend } from "../devices/backend.js";
import { createBackend } from "../backends/index.js";
import { DeviceSet, type DeviceSetSnapshot } from "../devices/device-set.js";
import { advertiseDevices } from "../devices/sharing.js";
import { PluginMetrics } from "../metrics.js";
import {
  allocationsOf,
  deviceSeries,
  draAllocationsOf,
  devicePluginShares,
} from "../podresources/allocations.js";
import { FIRST_ANSWER_WAIT_MS, PodResourcesMonitor } from "../podresources/monitor.js";
import type { ApiClient } from "../report/api-client.js";
import type { PluginRuntimeEvents, RuntimeStatus } from "../runtime.js";
import { ApiResourceClaimGetter } from "./claims-api.js";
import { allocationEdits, draDeviceName, draDevicesOf, draPoolDevices } from "./devices.js";
import { DRA_SOCKET_PREFIX, DraPlugin, type DraRegistrationStatus } from "./dra-plugin.js";
import { NewerInstanceProbe } from "../registration/handover.js";
import { SlicePublisher, type PublishedPool } from "./publisher.js";
import { DeviceTaintProbe } from "./taint-support.js";

export interface DraRuntimeOptions {
  readonly config: DevicePluginConfig;
  readonly nodeName: string;
  /** Carries the `config`, `resource` and `node` bindings. */
  readonly logger: Logger;
  /** The API server: ResourceSlices are written and watched, and ResourceClaims read, through it. */
  readonly api: Pick<ApiClient, "request" | "watch">;
  /** Replaces the backend built from the config (tests). */
  readonly backend?: DeviceBackend;
  /** The kubelet's plugins directory; the DRA socket goes into `<dir>/<driver>`. */
  readonly draPluginsDir?: string;
  readonly pluginsRegistryDir?: string;
  /** Where the claims' CDI specs go (default /var/run/cdi). */
  readonly cdiDir?: string;
  /** Device changes closer together than this are one ResourceSlice update. */
  readonly sliceCoalesceMs?: number;
  readonly sliceRetryBaseMs?: number;
  /** How often to look for a newer instance of the driver beside this one (surge upgrades). */
  readonly handoverPollMs?: number;
  /** The kubelet's PodResources socket and how often to read it, for the pods holding the devices. */
  readonly podResources?: { readonly socketPath: string; readonly intervalMs?: number };
}

const NO_SHARING: Sharing = { strategy: "None", failRequestsGreaterThanOne: false };

export class DraRuntime extends EventEmitter<PluginRuntimeEvents> {
  readonly metrics = new PluginMetrics();
  /** Pods admitted through the config's device plugin may hold devices on this node since a switch. */
  readonly otherPath = "DevicePlugin";
  readonly devices: DeviceSet;
  readonly driverName: string;
  readonly plugin: DraPlugin;
  readonly publisher: SlicePublisher;
  private readonly log: Logger;
  private readonly resourceName: string;
  private readonly startedAtMs = Date.now();
  private registrationChangedAtMs = this.startedAtMs;
  private registered = false;
  private lastRegistrationError: string | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;
  /** Set once the DRA socket is served: it is how newer instances of the driver are told apart. */
  private newerInstances: NewerInstanceProbe | undefined;
  private podResources: PodResourcesMonitor | undefined;

  constructor(private readonly opts: DraRuntimeOptions) {
    super();
    const spec = opts.config.spec;
    this.resourceName = spec.resourceName;
    this.driverName = draDriverName(spec);
    this.log = opts.logger;
    const backend =
      opts.backend ??
      createBackend(spec, {
        logger: this.log,
        resourceName: spec.resourceName,
        // Claims are always prepared through CDI (the DRA plugin writes one spec per claim).
        cdi: { enabled: true },
      });
    this.devices = new DeviceSet(backend, spec.sharing);
    this.plugin = new DraPlugin({
      driverName: this.driverName,
      nodeName: opts.nodeName,
      devices: () => draDevicesOf(backend),
      requestEdits: (ids) => allocationEdits(backend.allocate(ids), spec.resourceName, ids),
      claims: new ApiResourceClaimGetter(opts.api),
      logger: this.log,
      pluginDir: join(opts.draPluginsDir ?? DRA_PLUGINS_DIR, this.driverName),
      registryDir: opts.pluginsRegistryDir ?? PLUGINS_REGISTRY_DIR,
      cdiDir: opts.cdiDir ?? DEFAULT_CDI_DIR,
      onRegistrationStatus: (status) => this.onRegistrationStatus(status),
      onAnswered: (method, seconds) =>
        (method === "NodePrepareResources"
          ? this.metrics.draPrepareDuration
          : this.metrics.draUnprepareDuration
        ).observe({ resource: this.resourceName }, seconds),
    });
    this.publisher = new SlicePublisher({
      client: opts.api,
      driver: this.driverName,
      node: opts.nodeName,
      configName: opts.config.metadata.name,
      // Not the devices the device plugin's pods hold (a switch from it): the scheduler would hand them
      // out a second time.
      devices: () => draPoolDevices(this.devices.snapshot().unheld, spec.sharing),
      logger: this.log,
      coalesceMs: opts.sliceCoalesceMs,
      retryBaseMs: opts.sliceRetryBaseMs,
      handover: {
        newerLiveInstance: () => this.newerInstances?.newerLiveInstance() ?? Promise.resolve(undefined),
      },
      handoverPollMs: opts.handoverPollMs,
      // The kubelet deletes every slice of its node when it starts: the watch puts them back at once.
      watch: opts.api,
      deviceTaints: new DeviceTaintProbe({
        client: opts.api,
        driver: this.driverName,
        node: opts.nodeName,
        logger: this.log,
      }),
    });
  }

  /** The same shape as PluginRuntime's: serving is the DRA socket, registered the kubelet's last verdict. */
  status(): RuntimeStatus {
    return {
      serving: this.plugin.endpoint !== undefined,
      registered: this.registered,
      socketPath: this.plugin.endpoint,
      registrationSocketPath: this.plugin.registrationSocket,
      // The kubelet does not say which of the offered services it picked.
      kubeletAPIVersion: "",
      lastRegistrationError: this.lastRegistrationError,
      registrationChangedAtMs: this.registrationChangedAtMs,
      kubeletRestarts: 0,
    };
  }

  /** The pool as last published; undefined until the first successful write. */
  published(): PublishedPool | undefined {
    return this.publisher.state();
  }

  /** The devices the device plugin's pods hold, left out of the slices. */
  heldElsewhere(): ReadonlySet<string> {
    return this.devices.snapshot().heldElsewhere;
  }

  /** Not known in DRA mode: claims, not the PodResources device counts, say what is in use. */
  allocatedDevices(): number | undefined {
    return undefined;
  }

  /**
   * Discovers the devices, serves the DRA socket, publishes the devices, then registers with the kubelet.
   * Resolves once registering; a slice write that fails keeps retrying in the background. With an older
   * instance of the driver still running (a surge upgrade), this one publishes from now on and the older
   * one stands by; with a newer one running (this one was started again meanwhile), this one stands by.
   */
  async start(): Promise<void> {
    const snap = await this.devices.start();
    this.recordDevices(snap);
    this.unsubscribe = this.devices.onChange((s) => {
      this.recordDevices(s);
      this.publisher.changed();
      this.plugin.healthChanged();
      this.emit("devices", s);
    });
    this.followPodResources();
    // Before the first slice: after a switch from the device plugin, its pods may still hold devices.
    await this.podResources?.firstAnswer(FIRST_ANSWER_WAIT_MS);
    // The socket first: the other instances of the driver on the node see this one by it. Then the
    // slices, since a kubelet that registers us may see claims allocated against them at once.
    await this.plugin.serve();
    const endpoint = this.plugin.endpoint;
    if (endpoint !== undefined) this.newerInstances = new NewerInstanceProbe(DRA_SOCKET_PREFIX, endpoint);
    await this.publisher.start();
    await this.plugin.register();
    this.log.info(
      { driver: this.driverName, socket: this.plugin.endpoint, slices: this.publisher.state() },
      "serving the DRA plugin",
    );
  }

  /** Stops serving and watching; the ResourceSlices stay, so a restart or an upgrade never empties the pool. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    await this.podResources?.stop();
    await this.publisher.stop();
    await this.plugin.stop();
    await this.devices.stop();
    this.setRegistered(false);
    this.log.info("DRA runtime stopped; ResourceSlices left in place");
  }

  private onRegistrationStatus(status: DraRegistrationStatus): void {
    this.metrics.registrations.inc({
      resource: this.resourceName,
      path: "watcher",
      result: status.registered ? "ok" : "error",
    });
    if (status.registered) {
      this.lastRegistrationError = undefined;
    } else if (status.error !== this.lastRegistrationError) {
      this.lastRegistrationError = status.error;
      this.emit("registrationError", this.status());
    }
    this.setRegistered(status.registered);
  }

  private setRegistered(registered: boolean): void {
    this.metrics.registered.set({ resource: this.resourceName }, registered ? 1 : 0);
    if (registered === this.registered) return;
    this.registered = registered;
    this.registrationChangedAtMs = Date.now();
    this.emit(registered ? "registered" : "unregistered", this.status());
  }

  private recordDevices(snap: DeviceSetSnapshot): void {
    this.metrics.recordDeviceCounts(this.resourceName, snap.advertised);
    // One series per device the slice publishes: claims name devices, not the device plugin's replica ids
    // (under time-slicing those would put every share's holder on one replica).
    const published = advertiseDevices(snap.unheld, NO_SHARING);
    this.metrics.recordDeviceSeries(
      this.resourceName,
      deviceSeries(published, this.podResources?.allocations),
    );
  }

  /**
   * Reads the kubelet's PodResources API for the claims' devices of this driver in this node's pool (the
   * pool is the node), so the per-device series name their pods as in device-plugin mode.
   */
  private followPodResources(): void {
    if (this.opts.podResources === undefined) return;
    const monitor = new PodResourcesMonitor({
      socketPath: this.opts.podResources.socketPath,
      intervalMs: this.opts.podResources.intervalMs,
      resourceName: this.resourceName,
      // The device plugin's ids of the same name (replica ids under time-slicing) name physical devices.
      heldElsewhereOf: (response) => devicePluginShares(allocationsOf(response, this.resourceName)),
      allocationsOf: (response) =>
        draAllocationsOf(response, {
          driver: this.driverName,
          pool: this.opts.nodeName,
          // Every device the backend has, unhealthy ones too (left out of the slice, still held), by
          // physical id: the series name devices as the slice does.
          ids: new Map(this.devices.snapshot().physical.map((d) => [draDeviceName(d.id), d.id])),
        }),
      logger: this.log,
      metrics: this.metrics,
    });
    // The scheduler never counts device-plugin pods against the slices: a device they hold leaves the
    // slice whole, whatever its sharing (held.ts).
    monitor.on("heldElsewhere", (shares) => this.devices.holdElsewhere(new Set(shares.keys())));
    monitor.on("allocations", () => this.recordDevices(this.devices.snapshot()));
    this.podResources = monitor;
    monitor.start();
  }
}
