// DevFS backend: device files matched by globs under a root directory, with hot-plug (new matches appear,
// removed ones turn unhealthy and then go) and a file-type health check; optionally nodes grouped into
// devices, shared nodes every container gets, and locality from sysfs (devfs-group.ts, devfs-sysfs.ts).
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
import {
  REASON_WRONG_FILE_TYPE,
  groupDevfsDevices,
  uniqueNodes,
  withLocality,
  withSharedNodes,
  type KeyedMatch,
} from "./devfs-group.js";
import { classEntries, patternGroupKey, readNodeSysfs, sysfsGroupKey } from "./devfs-sysfs.js";
import { readPciLocality, type PciLocality } from "./sysfs-pci.js";

export const DEFAULT_DEVFS_RESCAN_INTERVAL_MS = 5000;
export const DEFAULT_REMOVED_GRACE_PERIOD_MS = 60_000;
export { REASON_WRONG_FILE_TYPE };

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
  private readonly pattern: RegExp | undefined;
  private tracked = new Map<string, TrackedDevice>();
  private specs = new Map<string, readonly ContainerDeviceSpec[]>();
  /** The nodes every container gets (sharedPaths), as last found. */
  private shared: readonly ContainerDeviceSpec[] = [];
  private readonly warned = new Set<string>();
  /** What the last scan found wrong, one line each, for `dpo probe`. */
  private problems: string[] = [];

  constructor(
    private readonly config: DevFSBackend,
    options: DevFSBackendOptions,
  ) {
    super("DevFS", options.logger, options.rescanIntervalMs ?? DEFAULT_DEVFS_RESCAN_INTERVAL_MS, {
      entriesOnly: true,
    });
    this.removedGracePeriodMs = options.removedGracePeriodMs ?? DEFAULT_REMOVED_GRACE_PERIOD_MS;
    const pattern = config.groupBy?.pattern;
    this.pattern = pattern === undefined ? undefined : new RegExp(pattern);
  }

  diagnostics(): readonly string[] {
    return this.problems;
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, this.specs);
    // Several slots of one path, and the shared nodes, go to one container once.
    const devices = uniqueNodes([...physicalIds.flatMap((id) => this.specs.get(id) ?? []), ...this.shared]);
    return { envs: {}, mounts: [], devices, annotations: {} };
  }

  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    const specs = this.specs.get(physicalId);
    if (specs === undefined) return undefined;
    return { deviceNodes: uniqueNodes([...specs, ...this.shared]).map(cdiDeviceNode) };
  }

  /** Every path the globs of `entries` match, with what it is. */
  private async match(
    entries: readonly { glob: string }[],
    lookedIn: Set<string>,
  ): Promise<{ pathIndex: number; containerPath: string; observed: ObservedFileType }[]> {
    const matches: { pathIndex: number; containerPath: string; observed: ObservedFileType }[] = [];
    for (const [pathIndex, entry] of entries.entries()) {
      for (const containerPath of await resolveGlob(this.config.root, entry.glob, lookedIn)) {
        const observed = await observe(join(this.config.root, containerPath));
        // A dangling symlink or a path gone since the directory listing is not (or no longer) a device.
        if (observed !== undefined) matches.push({ pathIndex, containerPath, observed });
      }
    }
    return matches;
  }

  protected async refresh(): Promise<void> {
    if (this.stopped) return;
    const lookedIn = new Set<string>();
    const found = await this.match(this.config.paths, lookedIn);
    const sharedMatches = await this.match(this.config.sharedPaths ?? [], lookedIn);
    const pciAddresses = new Map<string, string | undefined>();
    const keyed: KeyedMatch[] = [];
    const matches: typeof found = [];
    const { sysfsRoot, groupBy, pciVendor } = this.config;
    const byName = sysfsRoot === undefined ? undefined : await classEntries(sysfsRoot);
    for (const match of found) {
      const node =
        sysfsRoot === undefined || byName === undefined
          ? undefined
          : await readNodeSysfs(sysfsRoot, byName, join(this.config.root, match.containerPath));
      // Another vendor's node (a server's on-board VGA beside the GPUs) is not this resource's.
      if (pciVendor !== undefined && node?.pciVendor !== pciVendor) continue;
      matches.push(match);
      pciAddresses.set(match.containerPath, node?.pciAddress);
      let key: string | undefined;
      if (groupBy?.key === "Pattern" && this.pattern !== undefined) {
        key = patternGroupKey(this.pattern, match.containerPath);
      } else if (groupBy !== undefined && groupBy.key !== "Pattern" && node !== undefined) {
        key = sysfsGroupKey(groupBy.key, node);
      }
      keyed.push({ ...match, key });
    }
    const localities = new Map<string, PciLocality>();
    if (sysfsRoot !== undefined) {
      for (const address of new Set(pciAddresses.values())) {
        if (address !== undefined) localities.set(address, await readPciLocality(sysfsRoot, address));
      }
    }
    if (this.stopped) return;
    // Watch before publishing so a device plugged in right after this scan triggers the next one.
    await this.watcher.watch(lookedIn);

    this.problems = [];
    const built = this.build(matches, keyed, pciAddresses);
    const missingShared = (this.config.sharedPaths ?? [])
      .filter((_, index) => !sharedMatches.some((m) => m.pathIndex === index))
      .map(({ glob }) => glob);
    this.warnOnce(missingShared.map((glob) => [`shared:${glob}`, { glob }, "shared path matches nothing"]));
    const devices = built.map(({ device, specs, pciAddress }) => ({
      device: withSharedNodes(
        withLocality(device, pciAddress === undefined ? undefined : localities.get(pciAddress)),
        missingShared,
      ),
      specs,
    }));
    this.shared = sharedMatches.map(({ pathIndex, containerPath }) => ({
      containerPath,
      hostPath: join(this.config.root, containerPath),
      permissions: this.config.sharedPaths?.[pathIndex]?.permissions ?? "rw",
    }));

    this.tracked = trackRemovals(
      this.tracked,
      devices.map(({ device }) => device),
      Date.now(),
      this.removedGracePeriodMs,
    );
    const specs = new Map<string, readonly ContainerDeviceSpec[]>();
    for (const { device, specs: nodes } of devices) specs.set(device.id, nodes);
    for (const id of this.tracked.keys()) {
      const kept = this.specs.get(id);
      if (!specs.has(id) && kept !== undefined) specs.set(id, kept);
    }
    this.specs = specs;

    const before = this.publisher.current();
    const next = [...this.tracked.values()].map(({ device }) => device).sort(byNaturalId);
    if (this.publisher.publish(next)) logDeviceChanges(this.logger, before, next);
  }

  /** The devices of this scan, grouped or one per path, with what is wrong logged once per path. */
  private build(
    matches: readonly DevFSMatch[],
    keyed: readonly KeyedMatch[],
    pciAddresses: ReadonlyMap<string, string | undefined>,
  ): { device: PhysicalDevice; specs: readonly ContainerDeviceSpec[]; pciAddress: string | undefined }[] {
    if (this.config.groupBy !== undefined) {
      const { devices, unkeyed } = groupDevfsDevices(this.config, keyed, pciAddresses);
      this.warnOnce(
        unkeyed.map((m) => [
          `unkeyed:${m.containerPath}`,
          { path: m.containerPath, groupBy: this.config.groupBy?.key },
          "matched path has no group key (no sysfs device or PCI function above it, or the pattern does not match); ignored",
        ]),
      );
      this.warnOnce(
        devices
          .filter(({ device }) => device.reason !== "")
          .map(({ device }) => [
            `group:${device.id}:${device.reason}`,
            { device: device.id, reason: device.reason, paths: device.attributes.paths },
            "device group is incomplete or has a node of the wrong file type",
          ]),
      );
      return devices;
    }
    const { devices, duplicates } = devfsDevices(this.config, matches);
    this.warnOnce(
      duplicates.map((duplicate) => [
        `duplicate:${duplicate.containerPath}`,
        { path: duplicate.containerPath, device: devfsDeviceId(duplicate.containerPath) },
        "path already provides a device with this id (matched by an earlier glob or a similar path); ignored",
      ]),
    );
    for (const { device, spec } of devices) {
      if (device.reason === REASON_WRONG_FILE_TYPE && !this.tracked.has(device.id)) {
        const observed = matches.find((match) => match.containerPath === spec.containerPath)?.observed;
        this.logger.warn(
          { device: device.id, path: spec.hostPath, observed },
          "matched path has the wrong file type",
        );
      }
    }
    return devices.map(({ device, spec }) => ({
      device,
      specs: [spec],
      pciAddress: pciAddresses.get(spec.containerPath),
    }));
  }

  private warnOnce(warnings: readonly [string, Record<string, unknown>, string][]): void {
    for (const [key, fields, message] of warnings) {
      this.problems.push(`${message}: ${JSON.stringify(fields)}`);
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      this.logger.warn(fields, message);
    }
  }
}
