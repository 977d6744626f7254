// DevFS backend: device files matched by globs under a root directory, with hot-plug (new matches appear,
// removed ones turn unhealthy and then go) and a file-type health check.
import type { Dirent, Stats } from "node:fs";
import { lstat, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import type { CdiContainerEdits } from "../../cdi/spec.js";
import type { DevFSBackend, DevFSPath } from "../../api/v1beta1/spec.js";
import { globSegments, hasWildcard, matchGlobSegment } from "../../contract/devfs-glob.js";
import type { ContainerAllocation, ContainerDeviceSpec, PhysicalDevice } from "../devices/types.js";
import { RefreshingBackend } from "./refreshing-backend.js";
import { type TrackedDevice, cdiDeviceNode, logDeviceChanges, trackRemovals } from "./device-list.js";

export const DEFAULT_DEVFS_RESCAN_INTERVAL_MS = 5000;
export const DEFAULT_REMOVED_GRACE_PERIOD_MS = 60_000;
/** Reason of a matched path that is not the configured file type (say, a regular file where a char device belongs). */
export const REASON_WRONG_FILE_TYPE = "WrongFileType";

export type DevFSFileType = DevFSPath["type"];
/** What a path turned out to be; `Directory` and `Other` never satisfy a configured type. */
export type ObservedFileType = DevFSFileType | "Directory" | "Other";

/**
 * A stable device id from the path as the glob names it: without a leading `/dev/`, `/` turned into `_`
 * and anything outside [A-Za-z0-9_.-] into `_` (`/dev/ttyUSB0` → `ttyUSB0`, `/dev/bus/usb/001/002` →
 * `bus_usb_001_002`), so ids survive being joined into env values and replica ids. Pure.
 */
export function devfsDeviceId(containerPath: string): string {
  const relative = containerPath.replace(/^\/+/, "").replace(/^dev\/(?=.)/, "");
  return relative.replace(/[^A-Za-z0-9_.-]/g, "_");
}

export function observedFileType(
  info: Pick<Stats, "isCharacterDevice" | "isBlockDevice" | "isFile" | "isDirectory">,
): ObservedFileType {
  if (info.isCharacterDevice()) return "CharDevice";
  if (info.isBlockDevice()) return "BlockDevice";
  if (info.isFile()) return "File";
  if (info.isDirectory()) return "Directory";
  return "Other";
}

/** One path a glob matched, as found on disk. */
export interface DevFSMatch {
  /** Index of the `paths` entry whose glob matched. */
  readonly pathIndex: number;
  /** The path as the glob names it, without the root (`/dev/ttyUSB0`). */
  readonly containerPath: string;
  readonly observed: ObservedFileType;
}

export interface DevFSDevice {
  readonly device: PhysicalDevice;
  readonly spec: ContainerDeviceSpec;
}

/**
 * Turns matches into devices: one per (path, slot), `maxContainersPerDevice` slots per path, ids `<id>`
 * with one slot and `<id>-<slot>` with more, all slots pointing at the same host path. A path matched by
 * several globs, or two paths mapping to one id, keeps the first and reports the rest. Pure.
 */
export function devfsDevices(
  config: DevFSBackend,
  matches: readonly DevFSMatch[],
): { devices: DevFSDevice[]; duplicates: DevFSMatch[] } {
  const devices: DevFSDevice[] = [];
  const duplicates: DevFSMatch[] = [];
  const takenIds = new Set<string>();
  for (const match of matches) {
    const entry = config.paths[match.pathIndex];
    if (entry === undefined) continue;
    const baseId = devfsDeviceId(match.containerPath);
    const slots = entry.maxContainersPerDevice;
    const ids = slots === 1 ? [baseId] : Array.from({ length: slots }, (_, slot) => `${baseId}-${slot}`);
    if (ids.some((id) => takenIds.has(id))) {
      duplicates.push(match);
      continue;
    }
    const healthy = match.observed === entry.type;
    const spec: ContainerDeviceSpec = {
      containerPath: match.containerPath,
      hostPath: join(config.root, match.containerPath),
      permissions: entry.permissions,
    };
    ids.forEach((id, slot) => {
      takenIds.add(id);
      const attributes: Record<string, string> = { path: match.containerPath, type: entry.type };
      if (slots > 1) attributes.slot = String(slot);
      devices.push({
        device: {
          id,
          numaNode: undefined,
          health: healthy ? "Healthy" : "Unhealthy",
          reason: healthy ? "" : REASON_WRONG_FILE_TYPE,
          attributes,
        },
        spec,
      });
    });
  }
  return { devices, duplicates };
}

const byNaturalId = (a: PhysicalDevice, b: PhysicalDevice): number =>
  a.id.localeCompare(b.id, "en", { numeric: true });

/**
 * Finds the paths under `root` that `glob` matches, in a stable order. Every directory looked into is
 * added to `lookedIn`, so the caller can watch exactly where a new match could appear.
 */
export async function resolveGlob(root: string, glob: string, lookedIn: Set<string>): Promise<string[]> {
  const segments = globSegments(glob);
  let candidates = [""];
  for (const [index, segment] of segments.entries()) {
    const last = index === segments.length - 1;
    const next: string[] = [];
    for (const relative of candidates) {
      const dir = join(root, relative);
      lookedIn.add(dir);
      const names = hasWildcard(segment) ? await matchingNames(dir, segment) : [segment];
      for (const name of names) {
        const child = `${relative}/${name}`;
        if (last ? await exists(join(root, child)) : await isDirectory(join(root, child))) next.push(child);
      }
    }
    candidates = next;
  }
  return candidates;
}

async function matchingNames(dir: string, pattern: string): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries
    .map((entry) => entry.name)
    .filter((name) => matchGlobSegment(pattern, name))
    .sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** The type of what `path` points at (symlinks followed, as the container runtime does); undefined if gone. */
async function observe(path: string): Promise<ObservedFileType | undefined> {
  try {
    return observedFileType(await stat(path));
  } catch {
    return undefined;
  }
}

export interface DevFSBackendOptions {
  readonly logger: Logger;
  /** Full rescan period; file-system events trigger scans sooner. */
  readonly rescanIntervalMs?: number;
  /** How long a removed path stays listed as unhealthy (reason DeviceRemoved) before it is dropped. */
  readonly removedGracePeriodMs?: number;
}

export class DevFSDeviceBackend extends RefreshingBackend {
  private readonly removedGracePeriodMs: number;
  private tracked = new Map<string, TrackedDevice>();
  private specs = new Map<string, ContainerDeviceSpec>();
  private readonly warnedDuplicates = new Set<string>();

  constructor(
    private readonly config: DevFSBackend,
    options: DevFSBackendOptions,
  ) {
    super("DevFS", options.logger, options.rescanIntervalMs ?? DEFAULT_DEVFS_RESCAN_INTERVAL_MS, {
      entriesOnly: true,
    });
    this.removedGracePeriodMs = options.removedGracePeriodMs ?? DEFAULT_REMOVED_GRACE_PERIOD_MS;
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, this.specs);
    // Several slots of one path in one container need the device node once.
    const byHostPath = new Map<string, ContainerDeviceSpec>();
    for (const id of physicalIds) {
      const spec = this.specs.get(id);
      if (spec !== undefined && !byHostPath.has(spec.hostPath)) byHostPath.set(spec.hostPath, spec);
    }
    return { envs: {}, mounts: [], devices: [...byHostPath.values()], annotations: {} };
  }

  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    const spec = this.specs.get(physicalId);
    return spec === undefined ? undefined : { deviceNodes: [cdiDeviceNode(spec)] };
  }

  protected async refresh(): Promise<void> {
    if (this.stopped) return;
    const lookedIn = new Set<string>();
    const matches: DevFSMatch[] = [];
    for (const [pathIndex, entry] of this.config.paths.entries()) {
      for (const containerPath of await resolveGlob(this.config.root, entry.glob, lookedIn)) {
        const observed = await observe(join(this.config.root, containerPath));
        // A dangling symlink or a path gone since the directory listing is not (or no longer) a device.
        if (observed !== undefined) matches.push({ pathIndex, containerPath, observed });
      }
    }
    if (this.stopped) return;
    // Watch before publishing so a device plugged in right after this scan triggers the next one.
    await this.watcher.watch(lookedIn);

    const { devices, duplicates } = devfsDevices(this.config, matches);
    for (const duplicate of duplicates) {
      if (this.warnedDuplicates.has(duplicate.containerPath)) continue;
      this.warnedDuplicates.add(duplicate.containerPath);
      this.logger.warn(
        { path: duplicate.containerPath, device: devfsDeviceId(duplicate.containerPath) },
        "path already provides a device with this id (matched by an earlier glob or a similar path); ignored",
      );
    }
    for (const { device, spec } of devices) {
      if (device.reason === REASON_WRONG_FILE_TYPE && !this.tracked.has(device.id)) {
        const observed = matches.find((match) => match.containerPath === spec.containerPath)?.observed;
        this.logger.warn(
          { device: device.id, path: spec.hostPath, observed },
          "matched path has the wrong file type",
        );
      }
    }

    this.tracked = trackRemovals(
      this.tracked,
      devices.map(({ device }) => device),
      Date.now(),
      this.removedGracePeriodMs,
    );
    const specs = new Map<string, ContainerDeviceSpec>();
    for (const { device, spec } of devices) specs.set(device.id, spec);
    for (const id of this.tracked.keys()) {
      const kept = this.specs.get(id);
      if (!specs.has(id) && kept !== undefined) specs.set(id, kept);
    }
    this.specs = specs;

    const before = this.publisher.current();
    const next = [...this.tracked.values()].map(({ device }) => device).sort(byNaturalId);
    if (this.publisher.publish(next)) logDeviceChanges(this.logger, before, next);
  }
}
