// What `kubectl dpo rollout status` decides and prints, from a DevicePluginConfig as the API server returns
// it: whether the rollout is over and with which exit code, the counts of its progress line, the time left
// at the current pace, and kubectl's duration syntax for --timeout. Pure: the command feeds it what its
// watch sees and the clock's readings.
import type { DevicePluginConfigStatus } from "../api/v1beta1/status.js";

/** The parts of a DevicePluginConfig the rollout view reads, as the API server returns them. */
export interface ConfigView {
  metadata: { name: string; generation?: number };
  spec?: { upgrade?: { paused?: boolean } };
  status?: DevicePluginConfigStatus;
}

/** Where a rollout stands: still going, or over with the exit code `rollout status` returns. */
export type RolloutVerdict =
  | { readonly done: false; readonly message: string }
  | { readonly done: true; readonly exitCode: 0 | 1; readonly message: string };

function condition(status: DevicePluginConfigStatus, type: string) {
  return status.conditions?.find((c) => c.type === type);
}

function nodesOf(updated: number, total: number): string {
  return `${updated} of ${total} node${total === 1 ? "" : "s"} updated`;
}

/**
 * The rollout's verdict, as `kubectl rollout status` gives a DaemonSet's: done (exit 0) once every targeted
 * node runs the current spec's revision, failed (exit 1) once the operator rolled it back, gave up on it or
 * cannot go on (Stalled), waiting otherwise. A status the operator wrote for an older generation says
 * nothing about the current spec, so it is waited out.
 */
export function rolloutVerdict(config: ConfigView): RolloutVerdict {
  const name = `config "${config.metadata.name}"`;
  const status = config.status;
  const generation = config.metadata.generation;
  if (
    status?.observedGeneration === undefined ||
    (generation !== undefined && status.observedGeneration < generation)
  ) {
    return {
      done: false,
      message: `Waiting for the operator to observe generation ${generation ?? "?"} of ${name}...`,
    };
  }
  const upgrade = status.upgrade;
  const stalled = condition(status, "Stalled");
  if (upgrade?.phase === "RolledBack") {
    return {
      done: true,
      exitCode: 1,
      message: `${name} was rolled back to revision ${upgrade.currentRevision}: ${upgrade.message ?? "the new revision failed on some nodes"}`,
    };
  }
  if (upgrade?.phase === "Failed") {
    return {
      done: true,
      exitCode: 1,
      message: `${name} rollout failed: ${upgrade.message ?? `${nodesOf(upgrade.updated, upgrade.total)}`}`,
    };
  }
  if (stalled?.status === "True") {
    return { done: true, exitCode: 1, message: `${name} is stalled (${stalled.reason}): ${stalled.message}` };
  }
  if (upgrade === undefined) {
    const nodes = status.nodes;
    if (nodes !== undefined && nodes.updated >= nodes.desired) {
      return { done: true, exitCode: 0, message: `${name} successfully rolled out` };
    }
    return {
      done: false,
      message: `Waiting for ${name} rollout to finish: ${nodesOf(nodes?.updated ?? 0, nodes?.desired ?? 0)}...`,
    };
  }
  const progress = nodesOf(upgrade.updated, upgrade.total);
  switch (upgrade.phase) {
    case "Complete":
      if (upgrade.updated >= upgrade.total) {
        return { done: true, exitCode: 0, message: `${name} successfully rolled out` };
      }
      return { done: false, message: `Waiting for ${name} rollout to finish: ${progress}...` };
    case "Paused":
      return {
        done: false,
        message: `Waiting for ${name} rollout to finish: paused with ${progress} (kubectl dpo rollout resume ${config.metadata.name})...`,
      };
    case "RollingBack":
      return {
        done: false,
        message: `Waiting for ${name} to roll back to revision ${upgrade.currentRevision}: ${upgrade.message ?? progress}...`,
      };
    default:
      return { done: false, message: `Waiting for ${name} rollout to finish: ${progress}...` };
  }
}

/** The counts of a rollout's progress line. */
export interface RolloutProgress {
  phase: string;
  updated: number;
  total: number;
  /** Targeted nodes where a plugin of any revision is registered and advertised. */
  serving: number;
  /** Nodes carrying the config's Replace taint (no new pod may land there while they advertise nothing). */
  fenced: number;
  /** Nodes the rollout has not started yet. */
  waiting: number;
  inFlight: number;
}

/** The progress of the config's rollout, `fenced` counted from the Nodes' taints by the caller. */
export function rolloutProgress(config: ConfigView, fenced: number): RolloutProgress {
  const status = config.status;
  const upgrade = status?.upgrade;
  const total = upgrade?.total ?? status?.nodes?.desired ?? 0;
  const updated = upgrade?.updated ?? status?.nodes?.updated ?? 0;
  const inFlight = (upgrade?.inFlight?.length ?? 0) + (upgrade?.inFlightOmitted ?? 0);
  return {
    phase: upgrade?.phase ?? "Unknown",
    updated,
    total,
    serving: status?.nodes?.available ?? status?.nodes?.ready ?? 0,
    fenced,
    waiting: Math.max(0, total - updated - inFlight),
    inFlight,
  };
}

/**
 * The pace of a rollout as nodes are updated: from the first reading to the last, so a rollout that has
 * moved no node yet has no pace, and the estimate follows what the operator actually achieved.
 */
export class RolloutPace {
  private first: { atMs: number; updated: number } | undefined;
  private last: { atMs: number; updated: number } | undefined;

  observe(atMs: number, updated: number): void {
    if (this.first === undefined || updated < this.first.updated) this.first = { atMs, updated };
    this.last = { atMs, updated };
  }

  /** Milliseconds until `total` nodes are updated at the pace so far; undefined while no node has moved. */
  remainingMs(total: number): number | undefined {
    if (this.first === undefined || this.last === undefined) return undefined;
    const moved = this.last.updated - this.first.updated;
    const elapsed = this.last.atMs - this.first.atMs;
    if (moved <= 0 || elapsed <= 0) return undefined;
    return Math.max(0, Math.round(((total - this.last.updated) * elapsed) / moved));
  }
}

/** `45s`, `1m20s`, `2h5m`: kubectl's way of writing a duration, rounded to seconds. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${seconds % 60 === 0 ? "" : `${seconds % 60}s`}`;
  const hours = Math.floor(minutes / 60);
  return `${hours}h${minutes % 60 === 0 ? "" : `${minutes % 60}m`}`;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * A duration as kubectl's --timeout takes it (Go's time.ParseDuration: `30s`, `5m`, `1h30m`, `0`), in ms; 0
 * waits forever. A bare number is refused, as kubectl does, because nobody can tell its unit.
 */
export function parseDuration(flag: string, text: string): number {
  if (text === "0") return 0;
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text) {
    throw new Error(`--${flag}: '${text}' is not a duration such as 30s, 5m or 1h30m (0 waits forever)`);
  }
  return Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * (UNIT_MS[p[2]!] ?? 0), 0));
}

/** The counts as words, for a plain line and the end of the live one. */
function countsText(p: RolloutProgress): string {
  return `${p.updated}/${p.total} updated, ${p.serving} serving, ${p.fenced} fenced, ${p.waiting} waiting`;
}

/**
 * The live line a terminal shows: a bar of updated nodes, the counts, the time left at the current pace
 * (none once every node is updated) and until --timeout. Never wider than `columns`, so it never wraps (a wrapped line cannot be redrawn).
 */
export function formatProgressLine(
  name: string,
  p: RolloutProgress,
  remainingMs: number | undefined,
  timeoutLeftMs: number | undefined,
  columns: number,
): string {
  const width = 20;
  const filled = p.total === 0 ? width : Math.min(width, Math.round((p.updated / p.total) * width));
  const bar = `[${"#".repeat(filled)}${"-".repeat(width - filled)}]`;
  const eta =
    remainingMs === undefined || p.updated >= p.total ? "" : `, ~${formatDuration(remainingMs)} left`;
  const timeout = timeoutLeftMs === undefined ? "" : ` (timeout in ${formatDuration(timeoutLeftMs)})`;
  const line = `${name} ${bar} ${p.phase}: ${countsText(p)}${eta}${timeout}`;
  return line.length <= columns ? line : `${line.slice(0, Math.max(0, columns - 1))}…`;
}

/** The plain line printed whenever the counts change, where standard output is no terminal. */
export function formatProgressPlain(name: string, p: RolloutProgress): string {
  return `config "${name}" ${p.phase}: ${countsText(p)}`;
}
