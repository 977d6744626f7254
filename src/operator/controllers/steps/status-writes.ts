// Reconcile step: write a config's status when it changed, at most once per interval per config, and
// remember what this replica wrote, to tell its own writes from others' and to not announce a transition
// twice while the cache lags behind its last write.
import type { KubernetesObject } from "@kubernetes/client-node";
import { API_VERSION, KIND } from "../../../api/v1beta1/config.js";
import type { DevicePluginConfigStatus } from "../../../api/v1beta1/status.js";
import type { ReconcileResult } from "../../../kube/index.js";
import { previousStatusOf, statusEqual, type StatusEvent } from "../../status/index.js";
import type { StepDeps, StoredConfig } from "../reconciler-deps.js";

/** The status we wrote last and the resourceVersion it produced, until the cache has caught up with it. */
interface WrittenStatus {
  resourceVersion: string;
  status: DevicePluginConfigStatus;
}

/** Orders resourceVersions the way client-go's mutation cache does: as integers when both are. Pure. */
export function newerOrSame(candidate: string | undefined, reference: string): boolean {
  if (candidate === undefined) return false;
  if (/^\d+$/.test(candidate) && /^\d+$/.test(reference)) return BigInt(candidate) >= BigInt(reference);
  return candidate === reference;
}

/**
 * How long a status write has to wait so that writes of one config are at least `intervalMs` apart:
 * undefined when it may go now. Pure.
 */
export function statusWriteDelayMs(
  lastWriteAtMs: number | undefined,
  nowMs: number,
  intervalMs: number,
): number | undefined {
  if (lastWriteAtMs === undefined || nowMs - lastWriteAtMs >= intervalMs) return undefined;
  return intervalMs - (nowMs - lastWriteAtMs);
}

export class StatusWrites {
  private readonly written = new Map<string, WrittenStatus>();
  /** The last status this replica wrote per config, to tell its own writes from someone else's. */
  private readonly lastWritten = new Map<string, DevicePluginConfigStatus>();
  private readonly lastWriteAt = new Map<string, number>();

  constructor(
    private readonly deps: Pick<StepDeps, "applier" | "events" | "metrics" | "now">,
    private readonly intervalMs: number,
  ) {}

  /** The config is gone: nothing of it is remembered. */
  forget(name: string): void {
    this.written.delete(name);
    this.lastWritten.delete(name);
    this.lastWriteAt.delete(name);
  }

  /** Whether `status` is the one this replica wrote last for the config. */
  isOwn(name: string, status: unknown): boolean {
    const mine = this.lastWritten.get(name);
    return mine !== undefined && statusEqual(mine, status as DevicePluginConfigStatus | undefined);
  }

  /**
   * The status to compare against: the cache's, unless our own last write has not reached the cache yet
   * (then the cache would make us write, and announce, the same transition twice).
   */
  previous(name: string, stored: StoredConfig): DevicePluginConfigStatus | undefined {
    const mine = this.written.get(name);
    const rv = stored.metadata?.resourceVersion;
    if (mine && !newerOrSame(rv, mine.resourceVersion)) return mine.status;
    this.written.delete(name);
    return previousStatusOf(stored);
  }

  /**
   * Applies `status` when it differs from `previous`, unless the config's last write is younger than the
   * interval (then: come back when it is not), and records the transitions' Events once written.
   */
  async write(
    stored: StoredConfig,
    status: DevicePluginConfigStatus,
    events: readonly StatusEvent[],
    previous: DevicePluginConfigStatus | undefined = previousStatusOf(stored),
  ): Promise<ReconcileResult> {
    const { deps } = this;
    const name = stored.metadata!.name!;
    if (statusEqual(previous, status)) return {};
    const delayMs = statusWriteDelayMs(this.lastWriteAt.get(name), deps.now().getTime(), this.intervalMs);
    if (delayMs !== undefined) {
      deps.metrics.statusWritesDeferred.inc();
      return { requeueAfterMs: delayMs };
    }
    const object = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name },
      status,
    };
    const result = await deps.applier.applyStatus(object);
    // The interval runs from the write's answer, not its start: a slow write followed by a quick one
    // would otherwise land closer than the interval at the API server, and on its watchers.
    this.lastWriteAt.set(name, deps.now().getTime());
    deps.metrics.statusWrites.inc();
    const rv = (result as KubernetesObject).metadata?.resourceVersion;
    if (rv) this.written.set(name, { resourceVersion: rv, status });
    this.lastWritten.set(name, status);
    const involved = {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name, uid: stored.metadata?.uid, resourceVersion: rv },
    };
    for (const e of events) void deps.events.record(involved, e.type, e.reason, e.message);
    return {};
  }
}
