// What every backend shares: publishing device lists to subscribers only when they change, the grace
// period that keeps a removed device visible as unhealthy before it goes, and the unknown-id error.
import type { Logger } from "../../observability/json-log.js";
import type { CdiDeviceNode } from "../../cdi/spec.js";
import type { ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import type { DeviceListener } from "../devices/backend.js";

/** Reason given to a device whose file or sysfs entry disappeared, while it is kept for the grace period. */
export const REASON_DEVICE_REMOVED = "DeviceRemoved";

/** Thrown by `allocate` for ids the backend does not know (the caller should have checked them). */
export class UnknownDevicesError extends Error {
  constructor(
    readonly backend: string,
    readonly ids: readonly string[],
  ) {
    super(`${backend} backend does not know device(s) ${ids.join(", ")}`);
    this.name = "UnknownDevicesError";
  }
}

/** True when both lists hold the same devices, in the same order, with the same fields. */
export function sameDeviceLists(a: readonly PhysicalDevice[], b: readonly PhysicalDevice[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((device, i) => {
    const other = b[i];
    return other !== undefined && sameDevice(device, other);
  });
}

function sameDevice(a: PhysicalDevice, b: PhysicalDevice): boolean {
  if (a.id !== b.id || a.numaNode !== b.numaNode || a.health !== b.health || a.reason !== b.reason)
    return false;
  const aKeys = Object.keys(a.attributes);
  const bKeys = Object.keys(b.attributes);
  return aKeys.length === bKeys.length && aKeys.every((key) => a.attributes[key] === b.attributes[key]);
}

/** Freezes a device so subscribers cannot change what other subscribers see. */
export function freezeDevice(device: PhysicalDevice): PhysicalDevice {
  return Object.freeze({ ...device, attributes: Object.freeze({ ...device.attributes }) });
}

/** Holds the current device list and tells subscribers about every real change. */
export class DeviceListPublisher {
  private list: readonly PhysicalDevice[] = Object.freeze([]);
  private readonly listeners = new Set<DeviceListener>();

  constructor(private readonly logger: Logger) {}

  current(): readonly PhysicalDevice[] {
    return this.list;
  }

  subscribe(listener: DeviceListener): () => void {
    // Wrapped so the same function subscribed twice gets two independent subscriptions.
    const entry: DeviceListener = (devices) => listener(devices);
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  /** Replaces the list; delivers it to subscribers and returns true only when it differs from the last one. */
  publish(next: readonly PhysicalDevice[]): boolean {
    if (sameDeviceLists(this.list, next)) return false;
    this.list = Object.freeze(next.map(freezeDevice));
    for (const listener of [...this.listeners]) {
      try {
        listener(this.list);
      } catch (error) {
        // One faulty subscriber must not keep the others (or the watcher that called us) from working.
        this.logger.error({ err: error }, "device list subscriber failed");
      }
    }
    return true;
  }

  clear(): void {
    this.listeners.clear();
  }
}

/** A device as a rescan tracks it: when it went missing, if it did. */
export interface TrackedDevice {
  readonly device: PhysicalDevice;
  /** Milliseconds timestamp of the first scan that did not find the device; undefined while present. */
  readonly missingSince: number | undefined;
}

/**
 * Merges one scan's findings into the tracked set: found devices are taken as found; a device that is no
 * longer found stays for `graceMs`, unhealthy with reason DeviceRemoved, so the kubelet and the API see
 * the loss instead of a silent disappearance, and comes back as it is found again. Pure.
 */
export function trackRemovals(
  previous: ReadonlyMap<string, TrackedDevice>,
  found: readonly PhysicalDevice[],
  now: number,
  graceMs: number,
): Map<string, TrackedDevice> {
  const next = new Map<string, TrackedDevice>();
  for (const device of found) next.set(device.id, { device, missingSince: undefined });
  for (const [id, tracked] of previous) {
    if (next.has(id)) continue;
    const missingSince = tracked.missingSince ?? now;
    if (now - missingSince >= graceMs) continue;
    next.set(id, {
      device: { ...tracked.device, health: "Unhealthy", reason: REASON_DEVICE_REMOVED },
      missingSince,
    });
  }
  return next;
}

/** Logs what changed between two device lists: one summary line at first discovery, then one line per change. */
export function logDeviceChanges(
  logger: Logger,
  before: readonly PhysicalDevice[],
  after: readonly PhysicalDevice[],
): void {
  if (before.length === 0) {
    const unhealthy = after.filter((device) => device.health === "Unhealthy");
    logger.info({ devices: after.length, unhealthy: unhealthy.length }, "devices discovered");
    for (const device of unhealthy) {
      logger.warn({ device: device.id, reason: device.reason }, "device unhealthy");
    }
    return;
  }
  const previous = new Map(before.map((device) => [device.id, device]));
  const remaining = new Set(after.map((device) => device.id));
  for (const device of after) {
    const old = previous.get(device.id);
    if (old === undefined) {
      logger.info({ device: device.id, health: device.health, reason: device.reason }, "device appeared");
    } else if (old.health !== device.health || old.reason !== device.reason) {
      const fields = { device: device.id, health: device.health, reason: device.reason };
      if (device.health === "Unhealthy") logger.warn(fields, "device health changed");
      else logger.info(fields, "device health changed");
    }
  }
  for (const device of before) {
    if (!remaining.has(device.id)) logger.info({ device: device.id }, "device gone");
  }
}

/** A device node as CDI writes it; the host path only when it differs, as it needs CDI 0.5.0. Pure. */
export function cdiDeviceNode(spec: ContainerDeviceSpec): CdiDeviceNode {
  return {
    path: spec.containerPath,
    ...(spec.hostPath !== spec.containerPath ? { hostPath: spec.hostPath } : {}),
    permissions: spec.permissions,
  };
}
