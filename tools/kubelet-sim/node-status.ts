// Writes a simulated node's device-plugin resources into Node.status the way the kubelet does: one
// patch of nodes/status at a time per node, always carrying the latest counts.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { setTimeout as delay } from "node:timers/promises";
import { kubeRequest } from "../../src/kube/request.js";

/** What the kubelet advertises for one resource; `null` takes the resource out of the node status. */
export type AdvertisedResource = { capacity: number; allocatable: number } | null;

/** Pure: the strategic-merge patch that moves the node from `written` to `desired`; undefined if none. */
export function nodeResourcePatch(
  written: ReadonlyMap<string, AdvertisedResource>,
  desired: ReadonlyMap<string, AdvertisedResource>,
):
  | { status: { capacity: Record<string, string | null>; allocatable: Record<string, string | null> } }
  | undefined {
  const capacity: Record<string, string | null> = {};
  const allocatable: Record<string, string | null> = {};
  let changed = false;
  for (const [resource, want] of desired) {
    const have = written.get(resource);
    const same =
      have !== undefined &&
      (have === null || want === null
        ? have === want
        : have.capacity === want.capacity && have.allocatable === want.allocatable);
    if (same) continue;
    changed = true;
    capacity[resource] = want === null ? null : String(want.capacity);
    allocatable[resource] = want === null ? null : String(want.allocatable);
  }
  return changed ? { status: { capacity, allocatable } } : undefined;
}

const RETRY_INITIAL_MS = 250;
const RETRY_MAX_MS = 5_000;

export class NodeStatusWriter {
  private readonly desired = new Map<string, AdvertisedResource>();
  private readonly written = new Map<string, AdvertisedResource>();
  private loop: Promise<void> | undefined;
  private dirty = false;
  private readonly abort = new AbortController();
  private readonly skipTicks = new AbortController();
  /** Patches sent, for tests of the coalescing. */
  patches = 0;

  /** When the kubelet's status-sync ticks fall: `phase + k * syncIntervalMs`. */
  private readonly phase: number;

  /**
   * `syncIntervalMs`: the kubelet writes device-plugin counts only on its periodic node-status sync
   * (`nodeStatusUpdateFrequency`, 10 s by default; nothing triggers an earlier write when a plugin
   * registers or goes), so a change reaches the API at the next tick. 0 writes at once.
   */
  constructor(
    private readonly kc: KubeConfig,
    readonly node: string,
    private readonly log: Logger,
    private readonly syncIntervalMs = 0,
  ) {
    this.phase = Date.now() - Math.random() * syncIntervalMs;
  }

  /** Records the latest counts of `resource` and makes sure a patch carrying them goes out. */
  set(resource: string, value: AdvertisedResource): void {
    this.desired.set(resource, value);
    this.kick();
  }

  /** Every resource this writer ever put into the node status. */
  resources(): string[] {
    return [...this.desired.keys()];
  }

  /** Resolves once the node status carries the latest counts (or the writer was closed). */
  async settled(): Promise<void> {
    while (this.loop !== undefined) await this.loop;
  }

  /** From now on writes go out at once, without waiting for a sync tick (the simulator stopping). */
  writeImmediately(): void {
    this.skipTicks.abort();
  }

  /** Stops retrying; a patch in flight still completes. */
  close(): void {
    this.abort.abort();
  }

  private kick(): void {
    if (this.loop !== undefined) {
      // The running loop sends the latest counts next: at most one patch in flight, the last one wins.
      this.dirty = true;
      return;
    }
    this.loop = this.run().finally(() => {
      this.loop = undefined;
    });
  }

  private async run(): Promise<void> {
    let retryMs = RETRY_INITIAL_MS;
    do {
      if (this.syncIntervalMs > 0 && !this.skipTicks.signal.aborted) {
        const now = Date.now();
        const next = this.phase + Math.ceil((now - this.phase) / this.syncIntervalMs) * this.syncIntervalMs;
        await delay(next - now, undefined, {
          signal: AbortSignal.any([this.abort.signal, this.skipTicks.signal]),
        }).catch(() => undefined);
      }
      this.dirty = false;
      if (this.abort.signal.aborted) return;
      const snapshot = new Map(this.desired);
      const patch = nodeResourcePatch(this.written, snapshot);
      if (patch === undefined) continue;
      try {
        await kubeRequest(this.kc, {
          method: "PATCH",
          path: `/api/v1/nodes/${encodeURIComponent(this.node)}/status`,
          body: patch,
          contentType: "application/strategic-merge-patch+json",
        });
        this.patches++;
        for (const [resource, value] of snapshot) this.written.set(resource, value);
        this.log.debug({ node: this.node, patch: patch.status }, "node status patched");
        retryMs = RETRY_INITIAL_MS;
      } catch (err) {
        this.log.warn({ node: this.node, err: (err as Error).message, retryMs }, "node status patch failed");
        await delay(retryMs, undefined, { signal: this.abort.signal }).catch(() => undefined);
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
        this.dirty = true;
      }
    } while (this.dirty);
  }
}
