// Health that waits for a reset: NVIDIA's XIDs in three classes, the memory-error counters nvidia-smi
// reports beside the GPU list, and the hold an XID puts on a GPU until what its class needs is seen.
//
// Classes (docs/nvidia.md has the table with sources):
// - Application: the application caused it; the GPU stays healthy (the config's `ignoredXids`).
// - Transient: the GPU is unhealthy until a later poll shows it well (listed, every field readable, no
//   memory pages or rows waiting for a reset).
// - ResetRequired: NVIDIA's catalogue says reset the GPU (or drain it and reset it); a well-looking poll is
//   not enough. The GPU stays unhealthy until a reset is seen, then until a poll shows it well.
//
// "A reset is seen", from what the kernel log and nvidia-smi expose without NVML bindings:
// - the kernel log shows the NVIDIA driver loaded after the XID (`NVRM: loading NVIDIA UNIX ...`): a new
//   driver instance, which re-initializes every GPU;
// - the GPU's volatile uncorrectable ECC count reads lower than when the XID came: volatile counters
//   count since the last driver load or GPU reset (`nvidia-smi --help-query-gpu`), so a drop is one;
// - after the XID a poll could not read the GPU (not listed, "Unable to determine the device handle",
//   `[GPU requires reset]`) and a later one reads it whole again: it went away and came back.
// A reboot restarts the plugin, which starts without holds (XIDs logged before it starts are history).
import type { GpuRow, XidEvent } from "./nvidia-smi.js";

export type XidClass = "Application" | "Transient" | "ResetRequired";

/**
 * XIDs NVIDIA's catalogue (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket (Immediate Action)")
 * resolves by resetting the GPU, draining and resetting it, or rebooting the node:
 * 48 double-bit ECC error, 63 ECC page retirement or row remapping event (applies on reset), 64 page
 * retirement or row remapping failure, 74 NVLink error, 79 GPU fallen off the bus, 94 contained ECC error
 * (the row remap it records applies on reset), 95 uncontained ECC error, 119 GSP RPC timeout, 120 GSP
 * error.
 */
export const RESET_REQUIRED_XIDS: readonly number[] = [48, 63, 64, 74, 79, 94, 95, 119, 120];

/** The class of an XID: Application when the config ignores it, ResetRequired per the catalogue, else Transient. Pure. */
export function classifyXid(xid: number, ignoredXids: readonly number[]): XidClass {
  if (ignoredXids.includes(xid)) return "Application";
  return RESET_REQUIRED_XIDS.includes(xid) ? "ResetRequired" : "Transient";
}

/** The health reason of a held XID: `XID95-ResetRequired`, `XID92-Transient`. */
export function xidReason(xid: number, cls: XidClass): string {
  return `XID${xid}-${cls}`;
}

/** Rows waiting to be remapped, applied only by a GPU reset (Ampere and later). */
export const REASON_ROW_REMAP_PENDING = "RowRemapPending-ResetRequired";
/** Row remapping failed: the GPU needs a reset and, NVIDIA says, service if it repeats. */
export const REASON_ROW_REMAP_FAILURE = "RowRemapFailure-ResetRequired";

/** The memory-error counters of one GPU; undefined where nvidia-smi says `[N/A]` (no ECC, no row remapping). */
export interface HealthCounters {
  readonly eccUncorrectedVolatile: number | undefined;
  readonly eccUncorrectedAggregate: number | undefined;
  readonly remappedRowsPending: boolean | undefined;
  readonly remappedRowsFailure: boolean | undefined;
}

export const HEALTH_QUERY_FIELDS = [
  "uuid",
  "ecc.errors.uncorrected.volatile.total",
  "ecc.errors.uncorrected.aggregate.total",
  "remapped_rows.pending",
  "remapped_rows.failure",
] as const;

/** A second `--query-gpu`, so the GPU list keeps its columns (and its parsers) whatever this one adds. */
export const HEALTH_QUERY_ARGS: readonly string[] = [
  `--query-gpu=${HEALTH_QUERY_FIELDS.join(",")}`,
  "--format=csv,noheader,nounits",
];

const NOT_APPLICABLE = new Set(["[N/A]", "[Not Supported]", "N/A"]);

/** The counters by GPU UUID, and lines it could not read. Pure. */
export function parseHealthQuery(text: string): {
  counters: Map<string, HealthCounters>;
  problems: string[];
} {
  const counters = new Map<string, HealthCounters>();
  const problems: string[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    const values = line.split(",").map((v) => v.trim());
    const [uuid = "", volatile = "", aggregate = "", pending = "", failure = ""] = values;
    if (values.length !== HEALTH_QUERY_FIELDS.length || !uuid.startsWith("GPU-")) {
      problems.push(`line ${i + 1}: expected ${HEALTH_QUERY_FIELDS.join(", ")}: ${JSON.stringify(line)}`);
      return;
    }
    const count = (value: string): number | undefined =>
      /^\d+$/.test(value) ? Number.parseInt(value, 10) : undefined;
    const flag = (value: string): boolean | undefined =>
      value === "Yes" ? true : value === "No" ? false : undefined;
    for (const [name, value] of [
      ["ecc.errors.uncorrected.volatile.total", volatile],
      ["ecc.errors.uncorrected.aggregate.total", aggregate],
      ["remapped_rows.pending", pending],
      ["remapped_rows.failure", failure],
    ] as const) {
      const known = /^\d+$/.test(value) || value === "Yes" || value === "No" || NOT_APPLICABLE.has(value);
      if (!known) problems.push(`line ${i + 1}: ${name} ${JSON.stringify(value)} is not a count, Yes or No`);
    }
    counters.set(uuid, {
      eccUncorrectedVolatile: count(volatile),
      eccUncorrectedAggregate: count(aggregate),
      remappedRowsPending: flag(pending),
      remappedRowsFailure: flag(failure),
    });
  });
  return { counters, problems };
}

/** The reason the counters alone make a GPU unhealthy; "" when they do not. Pure. */
export function countersReason(counters: HealthCounters | undefined): string {
  if (counters?.remappedRowsFailure === true) return REASON_ROW_REMAP_FAILURE;
  if (counters?.remappedRowsPending === true) return REASON_ROW_REMAP_PENDING;
  return "";
}

/** The kernel log line of a driver load: `NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15 ...`. */
const DRIVER_LOAD = /^\[\s*(\d+(?:\.\d+)?)\]\s+NVRM: loading NVIDIA UNIX/;

/** Timestamps (seconds since boot) of the driver loads in kernel log text. Pure. */
export function parseDriverLoads(text: string): number[] {
  const loads: number[] = [];
  for (const raw of text.split("\n")) {
    const match = DRIVER_LOAD.exec(raw.trim());
    if (match !== null) loads.push(Number.parseFloat(match[1] ?? "0"));
  }
  return loads;
}

/** An XID that holds a GPU unhealthy. */
export interface XidHold {
  readonly xid: number;
  readonly cls: Exclude<XidClass, "Application">;
  readonly detail: string;
  /** Kernel log time of the latest XID of the hold; a driver load after it is a reset. */
  readonly timestamp: number;
  /** The refresh that saw the latest XID; only a later refresh's poll can release the hold. */
  readonly refresh: number;
  /** The volatile uncorrectable ECC count when the XID came, if nvidia-smi gave one. */
  readonly eccAtXid: number | undefined;
  /** A poll after the XID could not read the GPU. */
  readonly wentAway: boolean;
  /** What showed the reset, once one did. */
  readonly resetSeen: string | undefined;
}

/** Whether a poll shows a GPU well: listed, every field readable, nothing waiting for a reset. Pure. */
export function pollShowsWell(row: GpuRow | undefined, counters: HealthCounters | undefined): boolean {
  return (
    row !== undefined &&
    Object.keys(row.fieldErrors).length === 0 &&
    row.pagesPendingRetirement !== true &&
    countersReason(counters) === ""
  );
}

/**
 * The XID holds of a node's GPUs (by UUID): created by XIDs, told about driver loads and polls, and
 * released when their class allows. The decisions are pure given the inputs; the backend feeds it.
 */
export class XidHolds {
  private readonly holds = new Map<string, XidHold>();

  get(uuid: string): XidHold | undefined {
    return this.holds.get(uuid);
  }

  /** What is held: GPU UUIDs, or MIG instances (nvidia-mig.ts migXidKey). A copy, safe to release from. */
  keys(): string[] {
    return [...this.holds.keys()];
  }

  /** Holds the GPU for an XID; a later XID of a hold extends it and keeps the first one's name. */
  hold(
    uuid: string,
    event: XidEvent,
    cls: XidHold["cls"],
    refresh: number,
    eccNow: number | undefined,
  ): void {
    const active = this.holds.get(uuid);
    // A ResetRequired XID after a Transient one makes the hold wait for a reset; the reverse does not.
    const strongest = active?.cls === "ResetRequired" || cls === "ResetRequired" ? "ResetRequired" : cls;
    const first = active !== undefined && active.cls === strongest ? active : undefined;
    this.holds.set(uuid, {
      xid: first?.xid ?? event.xid,
      detail: first?.detail ?? event.detail,
      cls: strongest,
      timestamp: event.timestamp,
      refresh,
      eccAtXid: eccNow ?? active?.eccAtXid,
      wentAway: false,
      resetSeen: undefined,
    });
  }

  /** A driver load at `timestamp`: every hold from before it has seen its reset. */
  driverLoaded(timestamp: number): void {
    for (const [uuid, hold] of this.holds) {
      if (hold.resetSeen === undefined && hold.timestamp < timestamp) {
        this.holds.set(uuid, { ...hold, resetSeen: "the NVIDIA driver loaded again" });
      }
    }
  }

  /**
   * A poll's view of one held GPU (`row` undefined: not listed or not readable). Returns the hold when
   * it is released, undefined otherwise.
   */
  polled(
    uuid: string,
    row: GpuRow | undefined,
    counters: HealthCounters | undefined,
    refresh: number,
  ): XidHold | undefined {
    let hold = this.holds.get(uuid);
    if (hold === undefined) return undefined;
    const readable = row !== undefined && Object.keys(row.fieldErrors).length === 0;
    if (hold.resetSeen === undefined) {
      const ecc = counters?.eccUncorrectedVolatile;
      if (hold.eccAtXid !== undefined && ecc !== undefined && ecc < hold.eccAtXid) {
        hold = { ...hold, resetSeen: "its volatile ECC counters were cleared" };
      } else if (hold.wentAway && readable) {
        hold = { ...hold, resetSeen: "it could not be read, and now can" };
      } else if (!readable && refresh > hold.refresh) {
        hold = { ...hold, wentAway: true };
      }
      this.holds.set(uuid, hold);
    }
    const released =
      refresh > hold.refresh &&
      pollShowsWell(row, counters) &&
      (hold.cls === "Transient" || hold.resetSeen !== undefined);
    if (!released) return undefined;
    this.holds.delete(uuid);
    return hold;
  }
}
