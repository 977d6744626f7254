// The plugin runtime's lifecycle: devices, the DevicePlugin socket, kubelet registration (direct or via
// the plugin watcher), kubelet-restart detection, registering again when the kubelet ends ListAndWatch,
// which pods hold the devices (the kubelet's PodResources API), probes and metrics, and a clean shutdown.
import { mkdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { EventEmitter } from "node:events";
import type { Logger } from "../observability/json-log.js";
import { DEFAULT_CDI_DIR } from "../cdi/index.js";
import type { DeviceBackend } from "./devices/backend.js";
import { createBackend } from "./backends/index.js";
import { CdiSpecSync } from "./cdi-spec-sync.js";
import { DeviceSet, type DeviceSetSnapshot } from "./devices/device-set.js";
import { PluginMetrics } from "./metrics.js";
import { draDriverName } from "../api/v1beta1/dra-names.js";
import { draDeviceName } from "./dra/devices.js";
import type { HeldShares } from "./devices/held.js";
import { deviceSeries, draClaimShares, type Allocations } from "./podresources/allocations.js";
import { FIRST_ANSWER_WAIT_MS, PodResourcesMonitor } from "./podresources/monitor.js";
import { ReconcileTrigger } from "./reconcile-trigger.js";
import { KUBELET_API_VERSION, KUBELET_SOCKET_NAME, SUPPORTED_KUBELET_API_VERSIONS } from "./proto/wire.js";
import { registerRequest, registerWithKubelet } from "./registration/kubelet-registration.js";
import { acceptedWatcherVersion, PluginWatcherRegistration } from "./registration/plugin-watcher.js";
import { NewerInstanceProbe } from "./registration/handover.js";
import { Reregistration } from "./registration/reregistration.js";
import { CapacityHeal } from "./registration/capacity-heal.js";
import { Standby } from "./registration/standby.js";
import {
  fileIdentity,
  monotonicStartMs,
  removeStaleSockets,
  socketFileName,
  socketPath,
  socketPrefix,
} from "./registration/sockets.js";
import { DevicePluginEndpoint } from "./server/device-plugin-server.js";

import type { PluginRuntimeEvents, PluginRuntimeOptions, RuntimeStatus } from "./runtime-types.js";

export type { PluginRuntimeEvents, PluginRuntimeOptions, RuntimeStatus } from "./runtime-types.js";

const NOTHING_HELD: HeldShares = new Map();

export class PluginRuntime extends EventEmitter<PluginRuntimeEvents> {
  readonly metrics = new PluginMetrics();
  /** Pods of the config's DRA driver may hold devices on this node since a switch of spec.publish. */
  readonly otherPath = "DRA";
  readonly devices: DeviceSet;
  private readonly log: Logger;
  private readonly resourceName: string;
  private readonly prefix: string;
  private readonly startedAtMs = Date.now();
  /** This instance's place among the plugin's instances on the node (socket names): not the wall clock. */
  private readonly instanceStartMs = monotonicStartMs();
  private sequence = 0;

  private endpoint: DevicePluginEndpoint | undefined;
  private socketName: string | undefined;
  private watcherRegistration: PluginWatcherRegistration | undefined;
  /** Identity of the kubelet.sock we registered with; undefined while not registered. */
  private registeredWith: string | undefined;
  private watcherRegistered = false;
  /** The endpoint served now has no registration socket yet (watcher mode). */
  private watcherServeDue = false;
  /** Version the kubelet accepted for the current registration; "" while not registered. */
  private negotiatedVersion = "";
  private lastRegistrationError: string | undefined;
  private registrationChangedAtMs = this.startedAtMs;
  private kubeletRestarts = 0;
  /** Whether the absence of kubelet.sock has been logged since it was last seen, to log it once. */
  private kubeletAbsenceLogged = false;

  /** Registering again after the kubelet ended ListAndWatch on the socket served now. */
  private readonly reregistration: Reregistration;

  /** Whether to wait for an older instance (a Replace with this one started ahead) before registering. */
  private readonly standby: Standby;
  /** Reconciles on changes in the kubelet's directory, on a poll and when asked; one at a time. */
  private readonly reconciles: ReconcileTrigger;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelayMs: number;
  private stopped = false;

  constructor(private readonly opts: PluginRuntimeOptions) {
    super();
    const spec = opts.config.spec;
    this.resourceName = spec.resourceName;
    this.prefix = socketPrefix(spec.resourceName);
    this.log = opts.logger;
    this.retryDelayMs = opts.retryBaseMs ?? 100;
    const backend =
      opts.backend ??
      createBackend(spec, {
        logger: this.log,
        resourceName: spec.resourceName,
        cdi: { enabled: spec.cdi.enabled, kind: spec.cdi.kind ?? spec.resourceName },
      });
    this.devices = new DeviceSet(backend, spec.sharing);
    this.backend = backend;
    if (spec.cdi.enabled) {
      this.cdiSpec = new CdiSpecSync({
        dir: opts.cdiDir ?? DEFAULT_CDI_DIR,
        kind: spec.cdi.kind ?? spec.resourceName,
        backend,
        devices: () => this.devices.snapshot(),
        newerInstanceLive: () => this.newerInstanceLive(),
        logger: this.log,
      });
    }
    this.reconciles = new ReconcileTrigger({
      dir: opts.devicePluginDir,
      // While standing by, the older instance's socket going is the signal to register.
      relevant: (name) =>
        name === undefined ||
        name === KUBELET_SOCKET_NAME ||
        name === this.socketName ||
        (this.standby.standingBy !== undefined && name.startsWith(this.prefix)),
      pollIntervalMs: opts.pollIntervalMs ?? 500,
      reconcile: () => this.reconcile(),
      logger: this.log,
    });
    this.standby = new Standby({
      dir: opts.devicePluginDir,
      prefix: this.prefix,
      configName: opts.config.metadata.name,
      revision: opts.revision,
      readNode: opts.readNode,
      logger: this.log,
      onChange: () => this.emit("standby", this.status()),
      onOlderGone: () => this.reconciles.kick(),
      incumbentSocket: opts.config.spec.takeover?.socket,
    });
    this.reregistration = new Reregistration({
      retryBaseMs: opts.retryBaseMs ?? 100,
      prefix: this.prefix,
      logger: this.log,
      onDue: () => this.reconciles.kick(),
      onStandingBy: (newer) =>
        this.recordRegistrationError(`a newer instance of the plugin serves the resource (${newer})`),
    });
  }

  private readonly backend: DeviceBackend;
  private podResources: PodResourcesMonitor | undefined;
  private capacityHeal: CapacityHeal | undefined;
  /** Keeps the spec the CDI names Allocate returns resolve against; undefined without CDI. */
  private readonly cdiSpec: CdiSpecSync | undefined;

  status(): RuntimeStatus {
    return {
      serving: this.endpoint !== undefined,
      registered:
        this.opts.registration === "kubelet" ? this.registeredWith !== undefined : this.watcherRegistered,
      socketPath: this.socketName ? join(this.opts.devicePluginDir, this.socketName) : undefined,
      registrationSocketPath: this.watcherRegistration?.socketPath,
      kubeletAPIVersion: this.negotiatedVersion,
      lastRegistrationError: this.lastRegistrationError,
      registrationChangedAtMs: this.registrationChangedAtMs,
      kubeletRestarts: this.kubeletRestarts,
      standingBy: this.standby.standingBy,
      selfHeal: this.capacityHeal?.last,
    };
  }

  /**
   * How many devices of the resource the kubelet has given to containers, as its PodResources API last
   * said (through this plugin, and through DRA claims before a switch back); undefined when it is not
   * read or has not answered yet.
   */
  allocatedDevices(): number | undefined {
    const own = this.podResources?.allocations?.size;
    if (own === undefined) return undefined;
    return [...(this.podResources?.heldElsewhere ?? NOTHING_HELD).values()].reduce((a, n) => a + n, own);
  }

  /** The physical devices DRA claims hold on this node (still advertised, never handed out twice). */
  heldElsewhere(): ReadonlySet<string> {
    return new Set(this.podResources?.heldElsewhere?.keys() ?? []);
  }

  /** The kubelet's last answer on which container holds which device; undefined while unknown. */
  allocations(): Allocations | undefined {
    return this.podResources?.allocations;
  }

  /** Discovers devices, serves the socket and starts registering; resolves once serving. */
  async start(): Promise<void> {
    await mkdir(this.opts.devicePluginDir, { recursive: true });
    if (this.opts.registration === "watcher") await mkdir(this.opts.pluginsRegistryDir, { recursive: true });
    const removed = await removeStaleSockets(this.opts.devicePluginDir, this.prefix, new Set());
    if (this.opts.registration === "watcher") {
      removed.push(...(await removeStaleSockets(this.opts.pluginsRegistryDir, this.prefix, new Set())));
    }
    if (removed.length > 0) this.log.info({ sockets: removed }, "removed stale sockets of earlier instances");

    const snap = await this.devices.start();
    this.recordDevices(snap);
    // Before the first registration: the kubelet may allocate (and a runtime resolve the names) at once.
    await this.cdiSpec?.write(snap);
    this.devices.onChange((s) => {
      this.recordDevices(s);
      void this.cdiSpec?.write(s);
      this.emit("devices", s);
    });

    if (this.opts.podResources !== undefined) {
      const monitor = new PodResourcesMonitor({
        socketPath: this.opts.podResources.socketPath,
        intervalMs: this.opts.podResources.intervalMs,
        resourceName: this.resourceName,
        heldElsewhereOf: (response) => draClaimShares(response, this.draTable()),
        logger: this.log,
        metrics: this.metrics,
        readAllocatable: (this.opts.podResources.capacityHealAfterMs ?? 0) > 0,
      });
      this.watchCapacity(monitor, this.opts.podResources.capacityHealAfterMs ?? 0);
      // Held devices stay advertised: the scheduler counts the DRA pods' requests against them (held.ts).
      monitor.on("heldElsewhere", () => this.emit("allocations", monitor.allocations ?? new Map()));
      monitor.on("allocations", (allocations) => {
        this.recordDeviceSeries(this.devices.snapshot());
        this.emit("allocations", allocations);
      });
      this.podResources = monitor;
      monitor.start();
      // Before registering: after a switch back from DRA, the claims' pods may still hold devices, and the
      // kubelet reads at registration whether to ask this plugin which devices to give.
      await monitor.firstAnswer(FIRST_ANSWER_WAIT_MS);
    }

    if (this.opts.registration === "watcher") {
      this.watcherRegistration = new PluginWatcherRegistration({
        registryDir: this.opts.pluginsRegistryDir,
        socketName: () => socketFileName(this.prefix, this.instanceStartMs, ++this.sequence, "-reg.sock"),
        resourceName: this.resourceName,
        endpointPath: () => this.status().socketPath ?? "",
        supportedVersions: SUPPORTED_KUBELET_API_VERSIONS,
        logger: this.log,
        onStatus: (registered, error, offered) => this.onWatcherStatus(registered, error, offered),
      });
    }

    await this.reconciles.start();
  }

  /** Stops serving, ends streams, removes our sockets; safe to call twice. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.reconciles.stop();
    clearTimeout(this.retryTimer);
    this.reregistration.cancel();
    this.cdiSpec?.stop();
    await this.podResources?.stop();
    await this.reconciles.settled();
    this.standby.stop();
    const socketPath = this.status().socketPath;
    await this.endpoint?.close(1_000);
    this.endpoint = undefined;
    if (socketPath) await unlink(socketPath).catch(() => undefined);
    await this.watcherRegistration?.close();
    await this.devices.stop();
    // The CDI spec stays: containers of pods admitted through Allocate name its devices, and containerd
    // resolves them whenever it creates one (a pod admitted just before a switch to DRA, a restart), for
    // as long as the pod lives, which can be longer than this plugin. The next plugin rewrites it.
    this.setRegistered(false);
    this.log.info("plugin runtime stopped");
  }

  /** The config's DRA driver's devices on this node as its claims name them, by physical id. */
  private draTable(): { driver: string; pool: string; ids: ReadonlyMap<string, string> } {
    return {
      driver: draDriverName(this.opts.config.spec),
      pool: this.opts.nodeName,
      ids: new Map(this.devices.snapshot().physical.map((d) => [draDeviceName(d.id), d.id])),
    };
  }

  private recordDevices(snap: DeviceSetSnapshot): void {
    this.metrics.recordDeviceCounts(this.resourceName, snap.advertised);
    this.recordDeviceSeries(snap);
  }

  /** The per-device series of this resource, with their holders (PluginMetrics.recordDeviceSeries). */
  private recordDeviceSeries(snap: DeviceSetSnapshot): void {
    this.metrics.recordDeviceSeries(
      this.resourceName,
      deviceSeries(snap.advertised, this.podResources?.allocations),
    );
  }

  /** Level-triggered: makes the socket and the registration match what is on disk now. */
  private async reconcile(): Promise<void> {
    if (this.stopped) return;
    const dir = this.opts.devicePluginDir;
    const kubeletId = await fileIdentity(join(dir, KUBELET_SOCKET_NAME));
    const ownSocketGone =
      this.socketName === undefined || (await fileIdentity(join(dir, this.socketName))) === undefined;
    const kubeletRecreated =
      this.opts.registration === "kubelet" &&
      this.registeredWith !== undefined &&
      kubeletId !== this.registeredWith;

    if (ownSocketGone || kubeletRecreated) {
      if (this.endpoint !== undefined) {
        this.kubeletRestarts++;
        this.metrics.kubeletRestarts.inc({ resource: this.resourceName });
        this.log.warn(
          { socketRemoved: ownSocketGone, kubeletSocketRecreated: kubeletRecreated },
          "kubelet restart detected; serving on a fresh socket",
        );
      }
      this.setRegistered(false);
      await this.serveFreshSocket();
      this.watcherServeDue = this.watcherRegistration !== undefined;
    } else if (this.reregistration.pending) {
      const ownSocket = this.socketName === undefined ? undefined : join(dir, this.socketName);
      if (!(await this.reregistration.due(ownSocket))) return;
      this.log.info({ socket: this.socketName }, "registering again on a fresh socket");
      // A Register answered after the kubelet had already ended the stream it opened still counted.
      this.setRegistered(false);
      await this.serveFreshSocket();
      this.watcherServeDue = this.watcherRegistration !== undefined;
    }

    if (this.watcherServeDue && this.watcherRegistration) {
      // The plugin watcher registers any registration socket that appears: standing by, serve none yet.
      if (this.socketName !== undefined && (await this.standby.check(this.socketName)) !== undefined) return;
      await this.watcherRegistration.serve();
      this.watcherServeDue = false;
    }
    if (this.opts.registration !== "kubelet" || this.registeredWith !== undefined) return;
    if (kubeletId === undefined) {
      // At info, once per absence: a plugin that never registers is most often a kubelet directory
      // elsewhere, and the operator reading the logs must see why without turning debug on.
      if (!this.kubeletAbsenceLogged) {
        this.log.info(
          { kubeletSocket: join(dir, KUBELET_SOCKET_NAME) },
          "kubelet.sock absent; waiting for the kubelet",
        );
      }
      this.kubeletAbsenceLogged = true;
      return;
    }
    this.kubeletAbsenceLogged = false;
    if (this.socketName !== undefined && (await this.standby.check(this.socketName)) !== undefined) return;
    await this.registerOnce(kubeletId);
    // Leaving standby is news only if the registration that follows failed (it emits its own change).
    if (this.standby.takeLeft() && !this.status().registered) this.emit("standby", this.status());
  }

  /** Registers again when the kubelet hands out fewer devices than advertised for `boundMs` (capacity-heal.ts). */
  private watchCapacity(monitor: PodResourcesMonitor, boundMs: number): void {
    if (boundMs <= 0) return;
    const heal = new CapacityHeal({
      boundMs,
      resourceName: this.resourceName,
      metrics: this.metrics,
      logger: this.log,
      plugin: () => ({
        registered: this.status().registered && this.endpoint !== undefined,
        standingBy: this.standby.standingBy !== undefined,
        pluginHealthy: new Set(
          this.devices
            .snapshot()
            .advertised.filter((d) => d.health === "Healthy")
            .map((d) => d.id),
        ),
      }),
      reregister: (message) => {
        if (this.stopped) return;
        // The same path as a stream the kubelet ended: never while a newer instance serves (due()).
        this.reregistration.drop(Date.now() - this.registrationChangedAtMs);
        this.recordRegistrationError(message);
        this.setRegistered(false);
      },
      onChange: () => this.emit("selfHeal", this.status()),
    });
    this.capacityHeal = heal;
    monitor.on("allocatable", (ids) => heal.observe(ids));
  }

  /**
   * The kubelet ended the last ListAndWatch stream of `endpoint` while the plugin still serves it (a
   * kubelet restart ends it too; its socket deletion then takes over). Unless the plugin is stopping or
   * has moved to another socket since, it is no longer registered and registers again after the backoff.
   */
  private onStreamsEnded(endpoint: DevicePluginEndpoint, lastedMs: number): void {
    if (this.stopped || endpoint !== this.endpoint) return;
    const delayMs = this.reregistration.drop(lastedMs);
    this.log.warn(
      { socket: this.socketName, streamLastedMs: lastedMs, registerAgainInMs: delayMs },
      "the kubelet ended ListAndWatch while the plugin still serves; registering again",
    );
    this.recordRegistrationError("the kubelet ended ListAndWatch; registering again");
    this.setRegistered(false);
  }

  private async serveFreshSocket(): Promise<void> {
    // Whatever made the plugin move to a fresh socket also ends the wait to register again.
    this.reregistration.cancel();
    const old = this.endpoint;
    const oldName = this.socketName;
    this.endpoint = undefined;
    if (old) await old.close(200);
    if (oldName) await unlink(join(this.opts.devicePluginDir, oldName)).catch(() => undefined);
    const spec = this.opts.config.spec;
    const endpoint: DevicePluginEndpoint = new DevicePluginEndpoint({
      resourceName: this.resourceName,
      devices: this.devices,
      backend: this.backend,
      sharing: spec.sharing,
      allocationPolicy: spec.topology.allocationPolicy,
      cdi: { enabled: spec.cdi.enabled, kind: spec.cdi.kind ?? spec.resourceName },
      logger: this.log,
      metrics: this.metrics,
      preStartTimeoutMs: this.opts.preStartTimeoutMs,
      heldElsewhere: () => ({
        shares: this.podResources?.heldElsewhere ?? NOTHING_HELD,
        allocated: this.podResources?.allocations?.keys() ?? [],
      }),
      onStreamsEnded: ({ lastedMs }) => this.onStreamsEnded(endpoint, lastedMs),
    });
    const name = socketFileName(this.prefix, this.instanceStartMs, ++this.sequence);
    await endpoint.listen(socketPath(this.opts.devicePluginDir, name));
    this.endpoint = endpoint;
    this.socketName = name;
    this.log.info({ socket: name }, "serving DevicePlugin");
    // Older instances see this one from now on and leave the CDI spec to it: the write at start may
    // have come before one of theirs.
    void this.cdiSpec?.write(this.devices.snapshot());
  }

  /** Whether a newer instance of this plugin serves on the node (handover.ts); false until this one serves. */
  private async newerInstanceLive(): Promise<boolean> {
    const own = this.status().socketPath;
    if (own === undefined) return false;
    return (await new NewerInstanceProbe(this.prefix, own).newerLiveInstance()) !== undefined;
  }

  private async registerOnce(kubeletId: string): Promise<void> {
    const socketName = this.socketName;
    if (!socketName) return;
    const spec = this.opts.config.spec;
    try {
      await registerWithKubelet({
        kubeletSocketPath: join(this.opts.devicePluginDir, KUBELET_SOCKET_NAME),
        request: registerRequest(KUBELET_API_VERSION, socketName, this.resourceName, {
          preStartRequired: this.backend.preStartRequired,
          getPreferredAllocationAvailable: spec.topology.allocationPolicy !== "None",
        }),
      });
    } catch (err) {
      const message = (err as Error).message;
      this.recordRegistrationError(message);
      this.metrics.registrations.inc({ resource: this.resourceName, path: "kubelet", result: "error" });
      this.log.warn({ err: message, retryInMs: this.retryDelayMs }, "registration with the kubelet failed");
      this.scheduleRetry();
      return;
    }
    this.lastRegistrationError = undefined;
    this.retryDelayMs = this.opts.retryBaseMs ?? 100;
    this.metrics.registrations.inc({ resource: this.resourceName, path: "kubelet", result: "ok" });
    // The kubelet that answered is the one whose socket is there now: the identity read before the call
    // may be of the socket a restarting kubelet was just replacing, and keeping that one would make the
    // next pass take the new socket for another restart and register a second time. A restart after
    // this point also removes our own socket, which the next pass notices on its own.
    const identity = (await fileIdentity(join(this.opts.devicePluginDir, KUBELET_SOCKET_NAME))) ?? kubeletId;
    this.setRegistered(true, KUBELET_API_VERSION, identity);
    this.log.info({ socket: socketName, version: KUBELET_API_VERSION }, "registered with the kubelet");
  }

  private scheduleRetry(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.reconciles.kick(), this.retryDelayMs);
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, this.opts.retryMaxMs ?? 5_000);
  }

  private onWatcherStatus(registered: boolean, error: string, offered: readonly string[]): void {
    this.metrics.registrations.inc({
      resource: this.resourceName,
      path: "watcher",
      result: registered ? "ok" : "error",
    });
    if (registered) {
      this.lastRegistrationError = undefined;
      this.retryDelayMs = this.opts.retryBaseMs ?? 100;
      const version = acceptedWatcherVersion(offered, SUPPORTED_KUBELET_API_VERSIONS) ?? "";
      this.log.info({ socket: this.socketName, version }, "registered through the plugin watcher");
      this.setRegistered(true, version);
      return;
    }
    this.recordRegistrationError(error);
    this.log.error(
      { err: error, retryInMs: this.retryDelayMs },
      "kubelet refused the plugin-watcher registration",
    );
    this.setRegistered(false);
    // The watcher registers a socket once; a fresh socket makes it try again.
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      if (this.stopped || !this.watcherRegistration) return;
      this.watcherRegistration.serve().catch((err: unknown) => {
        this.log.error({ err: String(err) }, "re-creating the registration socket failed");
      });
    }, this.retryDelayMs);
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, this.opts.retryMaxMs ?? 5_000);
  }

  private recordRegistrationError(message: string): void {
    const changed = message !== this.lastRegistrationError;
    this.lastRegistrationError = message;
    if (changed) this.emit("registrationError", this.status());
  }

  /** `version`: what the kubelet accepted, when `registered`; cleared otherwise. */
  /** `kubeletIdentity`: the kubelet.sock a kubelet registration was made with (registeredWith). */
  private setRegistered(registered: boolean, version = "", kubeletIdentity?: string): void {
    // Read before registeredWith changes: the event must fire when the registration itself changes.
    const was = this.status().registered;
    this.negotiatedVersion = registered ? version : "";
    if (this.opts.registration === "kubelet") {
      this.registeredWith = registered ? (kubeletIdentity ?? this.registeredWith) : undefined;
    } else {
      this.watcherRegistered = registered;
    }
    this.metrics.registered.set({ resource: this.resourceName }, registered ? 1 : 0);
    if (was !== registered) {
      this.registrationChangedAtMs = Date.now();
      this.emit(registered ? "registered" : "unregistered", this.status());
    }
  }
}
