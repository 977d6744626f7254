// The kubelet DevicePlugin gRPC service (v1beta1): protocol only. Device state comes from the DeviceSet,
// container details from the backend, choices from the allocation policies; nothing here knows hardware.
import { link, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import type { AllocationPolicy, Sharing } from "../../api/v1beta1/spec.js";
import type { DeviceBackend } from "../devices/backend.js";
import { UnknownDevicesError } from "../backends/device-list.js";
import { checkAllocateRequest, preferredAllocation } from "../devices/allocation.js";
import type { DeviceSet, DeviceSetSnapshot } from "../devices/device-set.js";
import { heldConflicts, heldOfferedIds, type HeldShares } from "../devices/held.js";
import { resourceEnvName } from "../devices/env.js";
import type { AdvertisedDevice } from "../devices/types.js";
import type { PluginMetrics } from "../metrics.js";
import {
  GrpcServer,
  type ServerWritableStream,
  type ServiceError,
  type ServiceImplementation,
} from "../grpc/server.js";
import { Status, statusName } from "../grpc/status.js";
import {
  DevicePluginService,
  type AllocateRequest,
  type AllocateResponse,
  type ContainerAllocateResponse,
  type Device,
  type DevicePluginOptions,
  type Empty,
  type ListAndWatchResponse,
  type PreferredAllocationRequest,
  type PreferredAllocationResponse,
  type PreStartContainerRequest,
  type PreStartContainerResponse,
  PRE_START_CONTAINER_TIMEOUT_MS,
} from "../proto/wire.js";
import { shutdownServer } from "./shutdown.js";

export interface DevicePluginServiceOptions {
  resourceName: string;
  devices: DeviceSet;
  backend: DeviceBackend;
  sharing: Sharing;
  allocationPolicy: AllocationPolicy;
  cdi: { enabled: boolean; kind: string };
  logger: Logger;
  metrics: PluginMetrics;
  /** Budget for the backend's pre-start hook; kept under the kubelet's 30 s. */
  preStartTimeoutMs?: number;
  /**
   * What the node's DRA path holds (pods admitted through it before a switch back), and the ids the
   * kubelet gave through this path, both from its PodResources API: never handed out twice (held.ts).
   */
  heldElsewhere?: () => { shares: HeldShares; allocated: Iterable<string> };
  /**
   * Called when the last open ListAndWatch stream ended from the client's side (cancelled, or its
   * connection closed) rather than by endStreams: the kubelet stopped watching this endpoint although
   * it still serves. `lastedMs` is how long that stream was open.
   */
  onStreamsEnded?: (ended: { lastedMs: number }) => void;
}

/** Largest request the runtime accepts; anything bigger is a malformed request, not a real pod. */
const MAX_IDS_PER_REQUEST = 100_000;

/** A request the runtime refuses, with the gRPC status the kubelet gets. */
class RequestError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * At most this many ids go into a status message. The message travels in the grpc-message trailer; one
 * naming 100k ids is megabytes, past HTTP/2's header limits, and the client then resets the whole
 * connection, failing every other call the kubelet has in flight on it.
 */
const MAX_IDS_IN_MESSAGE = 10;

/** The ids for a status message, shortened to the first few plus a count. */
export function describeIds(ids: readonly string[]): string {
  const shown = ids
    .slice(0, MAX_IDS_IN_MESSAGE)
    .map((id) => JSON.stringify(id.length > 64 ? `${id.slice(0, 64)}…` : id));
  const more = ids.length - shown.length;
  return more > 0 ? `${shown.join(", ")} and ${more} more` : shown.join(", ");
}

function toServiceError(err: unknown): ServiceError {
  if (err instanceof RequestError) return { code: err.code, details: err.message };
  // A device vanished between the check and the backend call (hot-unplug): the ids are unknown now.
  if (err instanceof UnknownDevicesError) return { code: Status.INVALID_ARGUMENT, details: err.message };
  return { code: Status.INTERNAL, details: `internal error: ${(err as Error)?.message ?? String(err)}` };
}

export function toProtoDevice(d: AdvertisedDevice): Device {
  return {
    ID: d.id,
    health: d.health,
    topology: d.numaNode === undefined ? undefined : { nodes: [{ ID: d.numaNode }] },
  };
}

/** Builds the DevicePlugin service implementation plus a way to end its open streams. */
export function createDevicePluginService(opts: DevicePluginServiceOptions): {
  implementation: ServiceImplementation<typeof DevicePluginService>;
  endStreams(): void;
} {
  const { logger, metrics, resourceName } = opts;
  const envName = resourceEnvName(resourceName);
  const streams = new Set<ServerWritableStream<Empty, ListAndWatchResponse>>();
  /** Set by endStreams: the ends that follow are ours, not the client's. */
  let ending = false;
  const preStartTimeoutMs = Math.min(
    opts.preStartTimeoutMs ?? 25_000,
    PRE_START_CONTAINER_TIMEOUT_MS - 1_000,
  );

  function options(): DevicePluginOptions {
    return {
      preStartRequired: opts.backend.preStartRequired,
      // Asked at registration: with devices held by DRA pods, the kubelet must ask which to give, or it
      // picks a held one and the pod fails admission.
      getPreferredAllocationAvailable:
        opts.allocationPolicy !== "None" || (opts.heldElsewhere?.().shares.size ?? 0) > 0,
    };
  }

  function conflictsWithHeld(snap: DeviceSetSnapshot): ((ids: readonly string[]) => string[]) | undefined {
    const held = opts.heldElsewhere?.();
    if (held === undefined || held.shares.size === 0) return undefined;
    return (ids) => heldConflicts(ids, snap.byId, held.shares, held.allocated);
  }

  function allocateContainer(ids: readonly string[], snap: DeviceSetSnapshot): ContainerAllocateResponse {
    if (!Array.isArray(ids) || ids.length > MAX_IDS_PER_REQUEST) {
      throw new RequestError(Status.INVALID_ARGUMENT, "devices_ids must be a list of at most 100000 ids");
    }
    const check = checkAllocateRequest(ids, snap.byId, opts.sharing, conflictsWithHeld(snap));
    switch (check.kind) {
      case "Ok":
        break;
      case "Unknown":
        throw new RequestError(
          Status.INVALID_ARGUMENT,
          `unknown device ids for ${resourceName}: ${describeIds(check.ids)}`,
        );
      case "Unhealthy":
        throw new RequestError(
          Status.FAILED_PRECONDITION,
          `unhealthy devices for ${resourceName}: ${describeIds(check.ids)}`,
        );
      case "HeldElsewhere":
        throw new RequestError(
          Status.FAILED_PRECONDITION,
          `devices of ${resourceName} held through DRA claims by pods admitted before the switch of spec.publish: ${describeIds(check.ids)}`,
        );
      case "Duplicate":
        throw new RequestError(
          Status.INVALID_ARGUMENT,
          `device ids requested twice: ${describeIds(check.ids)}`,
        );
      case "TooManyReplicas":
        throw new RequestError(
          Status.INVALID_ARGUMENT,
          `${resourceName} is time-sliced with failRequestsGreaterThanOne: a container may request only 1, got ${ids.length}`,
        );
      case "Empty":
        throw new RequestError(
          Status.INVALID_ARGUMENT,
          "a container request must name at least one device id",
        );
    }
    const details = opts.backend.allocate(check.physicalIds);
    return {
      envs: { ...details.envs, [envName]: ids.join(",") },
      mounts: details.mounts.map((m) => ({ ...m })),
      devices: details.devices.map((d) => ({ ...d })),
      annotations: { ...details.annotations },
      cdiDevices: opts.cdi.enabled ? check.physicalIds.map((id) => ({ name: `${opts.cdi.kind}=${id}` })) : [],
    };
  }

  const implementation: ServiceImplementation<typeof DevicePluginService> = {
    getDevicePluginOptions(_call, callback) {
      callback(null, options());
    },

    listAndWatch(call) {
      const send = (snap: DeviceSetSnapshot): void => {
        if (call.cancelled || call.writableEnded) return;
        call.write({ devices: snap.advertised.map(toProtoDevice) });
        metrics.deviceListUpdates.inc({ resource: resourceName });
      };
      streams.add(call);
      const openedAtMs = Date.now();
      metrics.listAndWatchStreams.set({ resource: resourceName }, streams.size);
      logger.info({ resource: resourceName, streams: streams.size }, "ListAndWatch stream opened");
      const unsubscribe = opts.devices.onChange(send);
      const close = (): void => {
        if (!streams.delete(call)) return;
        unsubscribe();
        metrics.listAndWatchStreams.set({ resource: resourceName }, streams.size);
        logger.info({ resource: resourceName, streams: streams.size }, "ListAndWatch stream closed");
        // Another client's stream (a tool's) ending while the kubelet's stays open means nothing.
        if (!ending && streams.size === 0) opts.onStreamsEnded?.({ lastedMs: Date.now() - openedAtMs });
      };
      call.on("cancelled", close);
      call.on("close", close);
      call.on("finish", close);
      call.on("error", (err: Error) => {
        logger.warn({ resource: resourceName, err: err.message }, "ListAndWatch stream error");
        close();
      });
      send(opts.devices.snapshot());
    },

    getPreferredAllocation(call, callback) {
      try {
        const req: PreferredAllocationRequest = call.request;
        const snap = opts.devices.snapshot();
        const shares = opts.heldElsewhere?.().shares;
        const interconnect = opts.backend.interconnect?.();
        const containerResponses = req.containerRequests.map((r, i) => {
          const size = r.allocationSize;
          if (!Number.isInteger(size) || size < 0 || size > MAX_IDS_PER_REQUEST) {
            throw new RequestError(
              Status.INVALID_ARGUMENT,
              `container_requests[${i}].allocation_size: must be between 0 and ${MAX_IDS_PER_REQUEST}, got ${size}`,
            );
          }
          if (
            r.availableDeviceIDs.length > MAX_IDS_PER_REQUEST ||
            r.mustIncludeDeviceIDs.length > MAX_IDS_PER_REQUEST
          ) {
            throw new RequestError(Status.INVALID_ARGUMENT, `container_requests[${i}]: too many device ids`);
          }
          return {
            deviceIDs: preferredAllocation(
              opts.allocationPolicy,
              snap.byId,
              {
                available: r.availableDeviceIDs,
                mustInclude: r.mustIncludeDeviceIDs,
                size,
                ...(shares !== undefined && shares.size > 0
                  ? { held: heldOfferedIds(r.availableDeviceIDs, snap.byId, shares) }
                  : {}),
              },
              interconnect,
            ),
          };
        });
        metrics.preferredAllocations.inc({ resource: resourceName, result: "OK" });
        const res: PreferredAllocationResponse = { containerResponses };
        callback(null, res);
      } catch (err) {
        const e = toServiceError(err);
        metrics.preferredAllocations.inc({
          resource: resourceName,
          result: statusName(e.code ?? Status.UNKNOWN),
        });
        logger.warn(
          { resource: resourceName, code: e.code, err: e.details },
          "GetPreferredAllocation refused",
        );
        callback(e, null);
      }
    },

    allocate(call, callback) {
      const started = performance.now();
      const req: AllocateRequest = call.request;
      try {
        if (req.containerRequests.length === 0) {
          throw new RequestError(Status.INVALID_ARGUMENT, "container_requests is empty");
        }
        const snap = opts.devices.snapshot();
        const containerResponses = req.containerRequests.map((r, i) => {
          try {
            return allocateContainer(r.devicesIds, snap);
          } catch (err) {
            if (err instanceof RequestError) {
              throw new RequestError(err.code, `container_requests[${i}]: ${err.message}`);
            }
            throw err;
          }
        });
        const res: AllocateResponse = { containerResponses };
        metrics.allocations.inc({ resource: resourceName, result: "OK" }, containerResponses.length);
        logger.debug(
          { resource: resourceName, devices: req.containerRequests.map((r) => r.devicesIds) },
          "Allocate answered",
        );
        callback(null, res);
      } catch (err) {
        const e = toServiceError(err);
        metrics.allocations.inc({
          resource: resourceName,
          result: statusName(e.code ?? Status.UNKNOWN),
        });
        logger.warn(
          { resource: resourceName, code: statusName(e.code ?? 2), err: e.details },
          "Allocate refused",
        );
        callback(e, null);
      } finally {
        metrics.allocateDuration.observe({ resource: resourceName }, (performance.now() - started) / 1000);
      }
    },

    preStartContainer(call, callback) {
      const req: PreStartContainerRequest = call.request;
      const hook = opts.backend.preStart?.bind(opts.backend);
      if (!hook) {
        const empty: PreStartContainerResponse = {};
        callback(null, empty);
        return;
      }
      const check = checkAllocateRequest(req.devicesIds, opts.devices.snapshot().byId, {
        ...opts.sharing,
        failRequestsGreaterThanOne: false,
      });
      if (check.kind === "Unhealthy") {
        callback(
          { code: Status.FAILED_PRECONDITION, details: `unhealthy devices: ${describeIds(check.ids)}` },
          null,
        );
        return;
      }
      if (check.kind !== "Ok") {
        callback(
          { code: Status.INVALID_ARGUMENT, details: `PreStartContainer: ${check.kind} device ids` },
          null,
        );
        return;
      }
      const physicalIds = check.physicalIds;
      // Answer before the kubelet's deadline even when the hook hangs: abort it and report the timeout.
      // Whichever comes first, the hook's outcome or the timer, answers; the other is ignored.
      const controller = new AbortController();
      let answered = false;
      const answer = (err: ServiceError | null): void => {
        clearTimeout(timer);
        if (answered) return;
        answered = true;
        if (err)
          logger.warn(
            { resource: resourceName, devices: physicalIds, err: err.details },
            "PreStartContainer failed",
          );
        callback(err, err ? null : {});
      };
      const timer = setTimeout(() => {
        controller.abort(new Error("pre-start hook timed out"));
        answer({
          code: Status.DEADLINE_EXCEEDED,
          details: `pre-start hook exceeded ${preStartTimeoutMs} ms`,
        });
      }, preStartTimeoutMs);
      hook(physicalIds, controller.signal).then(
        () => answer(null),
        (err: unknown) => answer({ code: Status.INTERNAL, details: `pre-start hook failed: ${String(err)}` }),
      );
    },
  };

  return {
    implementation,
    endStreams() {
      ending = true;
      for (const call of [...streams]) {
        try {
          call.end();
        } catch {
          // The stream may already be gone with its client.
        }
      }
    },
  };
}

let binds = 0;

/**
 * A gRPC server on one unix socket serving the DevicePlugin service. The socket file outlives the server:
 * it is bound under a temporary name and linked to its own, so closing the server (which removes the
 * path it bound at once, before the last bytes are written) leaves it, and its owner removes it after
 * close, when the kubelet has had everything the server sent (see close).
 */
export class DevicePluginEndpoint {
  private server: GrpcServer | undefined;
  private service: ReturnType<typeof createDevicePluginService> | undefined;

  constructor(private readonly opts: DevicePluginServiceOptions) {}

  /** Binds the socket and starts serving; resolves once the socket accepts connections. */
  async listen(socketPath: string): Promise<void> {
    // 4 MiB, as grpc-go's and grpc-js's servers: a larger request is answered RESOURCE_EXHAUSTED.
    const server = new GrpcServer({ maxReceiveBytes: 4 * 1024 * 1024 });
    const service = createDevicePluginService(this.opts);
    server.addService(DevicePluginService, service.implementation);
    // Short, in the same directory (a link cannot cross file systems), and no plugin socket's name.
    const bindPath = join(dirname(socketPath), `.dpo-bind-${process.pid.toString(36)}-${++binds}`);
    await unlink(bindPath).catch(() => undefined);
    await server.listen(bindPath);
    try {
      await link(bindPath, socketPath);
    } catch (err) {
      server.forceShutdown();
      throw err;
    } finally {
      await unlink(bindPath).catch(() => undefined);
    }
    this.server = server;
    this.service = service;
  }

  /**
   * Ends open streams cleanly, then stops the server (forcefully after graceMs); the socket file stays
   * for the caller to remove. In this order: a standby instance of the plugin registers as soon as that
   * file goes, and the kubelet must have the end of this one's ListAndWatch by then, or (before v1.37)
   * its late handling of that end would cut the new registration off (kubernetes #121994).
   */
  async close(graceMs = 1_000): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    this.service?.endStreams();
    await shutdownServer(server, graceMs);
  }
}
