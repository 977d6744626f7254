// Mock backend: N simulated devices whose health follows an optional JSON file, so demos and tests can
// inject failures and recoveries the way real hardware produces them.
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import { cdiEnvName, type CdiContainerEdits } from "../../cdi/spec.js";
import type { MockBackend } from "../../api/v1beta1/spec.js";
import type { ContainerAllocation, PhysicalDevice } from "../devices/types.js";
import { RefreshingBackend } from "./refreshing-backend.js";
import { logDeviceChanges } from "./device-list.js";

/** Env var listing the mock device ids a container got (comma-separated). */
export const MOCK_DEVICE_IDS_ENV = "MOCK_DEVICE_IDS";
/** Prefix of the per-device env var a CDI device sets (`MOCK_DEVICE_FOO_0=foo-0`). */
export const MOCK_CDI_ENV_PREFIX = "MOCK_DEVICE_";
/** Reason of a device the health file marks Unhealthy without giving one. */
export const REASON_MARKED_UNHEALTHY = "MarkedUnhealthy";
export const DEFAULT_MOCK_POLL_INTERVAL_MS = 1000;

const HEALTH_VALUES: readonly string[] = ["Healthy", "Unhealthy"];
const MAX_REASON_LENGTH = 256;
type Health = "Healthy" | "Unhealthy";
/** The health file: device id → "Healthy" | "Unhealthy" | { health, reason }. Absent ids are Healthy. */
export type MockHealthFile = Record<string, Health | { health: Health; reason?: string | undefined }>;

export type HealthFileParse = { ok: true; file: MockHealthFile } | { ok: false; problem: string };

const isHealth = (value: unknown): value is Health =>
  typeof value === "string" && HEALTH_VALUES.includes(value);

/**
 * What is wrong with one entry, or undefined when it is fine. Checked by hand rather than with a zod
 * schema: the long-running plugin reads this file and otherwise never loads zod (docs/benchmarks.md).
 */
function entryProblem(entry: unknown): string | undefined {
  if (typeof entry === "string") {
    return isHealth(entry) ? undefined : `must be "Healthy" or "Unhealthy", not ${JSON.stringify(entry)}`;
  }
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    return `must be "Healthy", "Unhealthy" or an object, not ${Array.isArray(entry) ? "an array" : typeof entry}`;
  }
  const unknown = Object.keys(entry).filter((key) => key !== "health" && key !== "reason");
  if (unknown.length > 0) return `unknown field ${JSON.stringify(unknown[0])}`;
  const { health, reason } = entry as { health?: unknown; reason?: unknown };
  if (!isHealth(health)) return `health: must be "Healthy" or "Unhealthy"`;
  if (reason !== undefined && (typeof reason !== "string" || reason.length > MAX_REASON_LENGTH)) {
    return `reason: must be a string of at most ${MAX_REASON_LENGTH} characters`;
  }
  return undefined;
}

/** Parses the health file's text; a problem names the offending entry. Pure. */
export function parseHealthFile(text: string): HealthFileParse {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, problem: `not JSON: ${(error as Error).message}` };
  }
  const want = '(want id → "Healthy" | "Unhealthy" | {health, reason})';
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return { ok: false, problem: `file: must be an object ${want}` };
  }
  for (const [id, entry] of Object.entries(json)) {
    const problem = entryProblem(entry);
    if (problem !== undefined) return { ok: false, problem: `${id}: ${problem} ${want}` };
  }
  return { ok: true, file: json as MockHealthFile };
}

/** The configured devices, all healthy: `<idPrefix>-<i>` on NUMA node i % numaNodes. Pure. */
export function mockDevices(config: MockBackend): PhysicalDevice[] {
  return Array.from({ length: config.devices }, (_, index) => ({
    id: config.ids?.[index] ?? `${config.idPrefix}-${index}`,
    numaNode: config.numaNodes > 0 ? index % config.numaNodes : undefined,
    health: "Healthy" as const,
    reason: "",
    attributes: { ...config.attributes, index: String(index) },
  }));
}

/** Applies the health file to the devices; returns the result and the file's ids that are no device. Pure. */
export function applyHealthFile(
  devices: readonly PhysicalDevice[],
  file: MockHealthFile,
): { devices: PhysicalDevice[]; unknownIds: string[] } {
  const known = new Set(devices.map((device) => device.id));
  const unknownIds = Object.keys(file)
    .filter((id) => !known.has(id))
    .sort();
  const result = devices.map((device): PhysicalDevice => {
    const entry = Object.hasOwn(file, device.id) ? file[device.id] : undefined;
    if (entry === undefined) return { ...device, health: "Healthy", reason: "" };
    const health = typeof entry === "string" ? entry : entry.health;
    const given = typeof entry === "string" ? undefined : entry.reason;
    const reason = given ?? (health === "Unhealthy" ? REASON_MARKED_UNHEALTHY : "");
    return { ...device, health, reason };
  });
  return { devices: result, unknownIds };
}

export interface MockBackendOptions {
  readonly logger: Logger;
  /** How often the health file is re-read even without a file-system event (fallback). */
  readonly pollIntervalMs?: number;
}

export class MockDeviceBackend extends RefreshingBackend {
  private readonly baseDevices: readonly PhysicalDevice[];
  private readonly knownIds: ReadonlySet<string>;
  /** What the last read of the health file saw, so an unchanged file is neither re-applied nor re-warned. */
  private lastSeen: string | undefined;
  private health: MockHealthFile = {};
  private readonly warnedUnknownIds = new Set<string>();

  constructor(
    private readonly config: MockBackend,
    options: MockBackendOptions,
  ) {
    super("Mock", options.logger, options.pollIntervalMs ?? DEFAULT_MOCK_POLL_INTERVAL_MS);
    this.baseDevices = mockDevices(config);
    this.knownIds = new Set(this.baseDevices.map((device) => device.id));
  }

  allocate(physicalIds: readonly string[]): ContainerAllocation {
    this.assertKnown(physicalIds, this.knownIds);
    return {
      envs: { [MOCK_DEVICE_IDS_ENV]: physicalIds.join(",") },
      mounts: [],
      devices: [],
      annotations: {},
    };
  }

  /** A mock device has no device node: its CDI edit is an env var naming it, one variable per device. */
  cdiContainerEdits(physicalId: string): CdiContainerEdits | undefined {
    if (!this.knownIds.has(physicalId)) return undefined;
    return { env: [`${cdiEnvName(MOCK_CDI_ENV_PREFIX, physicalId)}=${physicalId}`] };
  }

  protected override async begin(): Promise<readonly PhysicalDevice[]> {
    const healthFile = this.config.healthFile;
    if (healthFile === undefined) {
      this.publisher.publish(this.baseDevices);
      logDeviceChanges(this.logger, [], this.baseDevices);
      return this.publisher.current();
    }
    // Watching the directory, not the file: an atomic rename-replace swaps the file's inode, which
    // would silently end a watch on the file itself. Armed before the first read so no change slips by.
    await this.watcher.watch([dirname(healthFile)]);
    await this.runner.runNow();
    this.refreshPeriodically();
    return this.publisher.current();
  }

  protected async refresh(): Promise<void> {
    const path = this.config.healthFile;
    if (path === undefined || this.stopped) return;
    let seen: string;
    let text: string | undefined;
    try {
      text = await readFile(path, "utf8");
      seen = `content:${text}`;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unknown";
      seen = code === "ENOENT" ? "missing" : `error:${code}`;
      if (seen !== this.lastSeen && code !== "ENOENT") {
        this.logger.warn({ path, err: error }, "cannot read health file; keeping the last known health");
      }
    }
    if (this.stopped) return;
    // The directory watch may have been lost (directory re-created); re-arm it on every look.
    void this.watcher.watch([dirname(path)]);
    if (seen === this.lastSeen) return;
    this.lastSeen = seen;

    if (seen === "missing") {
      this.health = {};
    } else if (text === undefined) {
      return;
    } else if (text.trim() === "") {
      // A writer that truncates then writes shows us an empty file for a moment; wait for the content.
      this.logger.debug({ path }, "health file is empty; keeping the last known health");
      return;
    } else {
      const parsed = parseHealthFile(text);
      if (!parsed.ok) {
        this.logger.warn(
          { path, problem: parsed.problem },
          "health file is invalid; keeping the last known health",
        );
        return;
      }
      this.health = parsed.file;
    }

    const { devices, unknownIds } = applyHealthFile(this.baseDevices, this.health);
    for (const id of unknownIds) {
      if (this.warnedUnknownIds.has(id)) continue;
      this.warnedUnknownIds.add(id);
      this.logger.warn({ path, device: id }, "health file names a device this backend does not have");
    }
    const before = this.publisher.current();
    if (this.publisher.publish(devices)) logDeviceChanges(this.logger, before, devices);
  }
}
