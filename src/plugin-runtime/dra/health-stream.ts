// The kubelet's DRA resource health stream (KEP-4680): every device of the pool with its health, sent on
// each open NodeWatchResources stream at its start, on every change and as a heartbeat, so a pod that holds
// a failed device shows it in status.containerStatuses[].allocatedResourcesStatus. The decisions (what each
// response says, when a device's status last changed) are pure; the class only keeps the open streams.
import type { ServerWritableStream, ServiceImplementation } from "../grpc/server.js";
import type { Logger } from "../../observability/json-log.js";
import type { Health } from "../devices/types.js";
import { draHealthV1, type draHealthV1alpha1 } from "../proto/wire.js";

/**
 * How often the complete list goes out again although nothing changed. The kubelet stamps each device
 * with the time the response arrived (not last_updated_time) and reads it as Unknown once older than its
 * health timeout, 30 s when the plugin names none (DefaultHealthTimeout, pkg/kubelet/cm/dra/healthinfo.go).
 */
export const DEFAULT_HEALTH_HEARTBEAT_MS = 10_000;
/** Longest message the kubelet keeps (it truncates longer ones to 1021 characters and "..."). */
export const MAX_HEALTH_MESSAGE_LENGTH = 1024;

/** A device of the pool as the health stream needs it: its name in the slice, its health and why. */
export interface HealthSourceDevice {
  readonly name: string;
  readonly health: Health;
  readonly reason: string;
}

/** A device's status and since when it holds (Unix seconds), as this plugin last determined it. */
export interface TrackedHealth {
  readonly health: Health;
  readonly reason: string;
  readonly sinceSeconds: number;
}

/**
 * Each device's status with the time it last changed: a device whose health and reason are as before keeps
 * its time, any other (new, or changed) gets `nowSeconds`. Devices gone from `devices` are dropped. Pure.
 */
export function trackHealth(
  previous: ReadonlyMap<string, TrackedHealth>,
  devices: readonly HealthSourceDevice[],
  nowSeconds: number,
): Map<string, TrackedHealth> {
  const out = new Map<string, TrackedHealth>();
  for (const device of devices) {
    if (out.has(device.name)) continue;
    const before = previous.get(device.name);
    const same = before !== undefined && before.health === device.health && before.reason === device.reason;
    out.set(device.name, {
      health: device.health,
      reason: device.reason,
      sinceSeconds: same ? before.sinceSeconds : nowSeconds,
    });
  }
  return out;
}

/**
 * The complete response of the pool: one entry per device, sorted by name, HEALTHY or UNHEALTHY, the reason
 * as the message (cut to the kubelet's limit), the kubelet's default timeout. The v1 and v1alpha1 messages
 * have the same fields, so the one object fills either. Pure.
 */
export function healthResponse(
  pool: string,
  tracked: ReadonlyMap<string, TrackedHealth>,
): draHealthV1.NodeWatchResourcesResponse {
  const names = [...tracked.keys()].sort();
  return {
    devices: names.map((name) => {
      const t = tracked.get(name)!;
      return {
        device: { poolName: pool, deviceName: name },
        health:
          t.health === "Healthy" ? draHealthV1.HealthStatus.HEALTHY : draHealthV1.HealthStatus.UNHEALTHY,
        lastUpdatedTime: t.sinceSeconds,
        healthCheckTimeoutSeconds: 0,
        message:
          t.reason.length <= MAX_HEALTH_MESSAGE_LENGTH
            ? t.reason
            : t.reason.slice(0, MAX_HEALTH_MESSAGE_LENGTH),
      };
    }),
  };
}

export interface DraHealthStreamsOptions {
  /** The pool the devices are in: the node's name, as in the ResourceSlices. */
  readonly pool: string;
  readonly devices: () => readonly HealthSourceDevice[];
  readonly logger: Logger;
  readonly heartbeatMs?: number;
  readonly now?: () => number;
}

type HealthCall = ServerWritableStream<unknown, draHealthV1.NodeWatchResourcesResponse>;

/** The open NodeWatchResources streams of both versions and what they were last sent. */
export class DraHealthStreams {
  private tracked = new Map<string, TrackedHealth>();
  private readonly calls = new Set<HealthCall>();
  private heartbeat: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: DraHealthStreamsOptions) {}

  /** Open streams (tests, logs). */
  get openStreams(): number {
    return this.calls.size;
  }

  /** The response each stream was last sent, or would be sent now; recomputes the devices' times. */
  current(): draHealthV1.NodeWatchResourcesResponse {
    const nowSeconds = Math.floor((this.opts.now?.() ?? Date.now()) / 1000);
    this.tracked = trackHealth(this.tracked, this.safeDevices(), nowSeconds);
    return healthResponse(this.opts.pool, this.tracked);
  }

  /** The devices changed: every open stream gets the new complete list. */
  changed(): void {
    if (this.calls.size === 0) {
      // Keep the times current, so a stream opened later says since when a device is unhealthy.
      this.current();
      return;
    }
    this.broadcast();
  }

  /** Ends every open stream (the plugin stops) and refuses new ones. */
  close(): void {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    for (const call of this.calls) call.end();
    this.calls.clear();
  }

  /** The v1 service. */
  v1Service(): ServiceImplementation<typeof draHealthV1.DRAResourceHealthService> {
    return { nodeWatchResources: (call) => this.open(call, "v1") };
  }

  /** The v1alpha1 service: the same messages in another package, so the same responses. */
  v1alpha1Service(): ServiceImplementation<typeof draHealthV1alpha1.DRAResourceHealthService> {
    return { nodeWatchResources: (call) => this.open(call, "v1alpha1") };
  }

  private open(call: HealthCall, version: string): void {
    if (this.closed) {
      call.end();
      return;
    }
    this.calls.add(call);
    const log = this.opts.logger.child({ healthService: `${version}.DRAResourceHealth` });
    const forget = (): void => {
      if (!this.calls.delete(call)) return;
      log.info({ streams: this.calls.size }, "the kubelet's device health stream ended");
      if (this.calls.size === 0) {
        clearInterval(this.heartbeat);
        this.heartbeat = undefined;
      }
    };
    call.on("cancelled", forget);
    call.on("close", forget);
    call.on("error", forget);
    log.info({ streams: this.calls.size }, "the kubelet opened the device health stream");
    this.send(call, this.current());
    if (this.heartbeat === undefined) {
      this.heartbeat = setInterval(
        () => this.broadcast(),
        this.opts.heartbeatMs ?? DEFAULT_HEALTH_HEARTBEAT_MS,
      );
      this.heartbeat.unref();
    }
  }

  private broadcast(): void {
    const response = this.current();
    for (const call of this.calls) this.send(call, response);
  }

  private send(call: HealthCall, response: draHealthV1.NodeWatchResourcesResponse): void {
    if (call.cancelled || call.writableEnded) {
      this.calls.delete(call);
      return;
    }
    call.write(response);
  }

  /** A failing device source must not end the stream: the kubelet would read every device as Unknown. */
  private safeDevices(): readonly HealthSourceDevice[] {
    try {
      return this.opts.devices();
    } catch (err) {
      this.opts.logger.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "reading the devices for the health stream failed; sending their last known health",
      );
      return [...this.tracked].map(([name, t]) => ({ name, health: t.health, reason: t.reason }));
    }
  }
}
