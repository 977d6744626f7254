// Keeps this node's ResourceSlices current: lists the pool once, then applies the plan from slices.ts after
// every device change (coalesced), continuing the pool generation the API server has. Errors back off with
// jitter; a conflict or a vanished object re-reads the pool. With a watch, a slice someone else changed or
// deleted (the kubelet deletes every slice of its node when it starts) re-reads the pool and publishes it
// again, as the upstream kubelet plugin helper's ResourceSlice controller does. Never deletes the pool on
// stop: a restarted or upgraded plugin takes over the same slices, and only the operator removes them.
import type { Logger } from "../../observability/json-log.js";
import type { ApiClient } from "../report/api-client.js";
import { ApiError } from "../report/api-client.js";
import { NodeSliceWatch, type SliceObservation } from "./slice-watch.js";
import { DEFAULT_TAINT_PROBE_RETRY_MS, type DeviceTaintProbe } from "./taint-support.js";
import { publishedDeviceChunks } from "./taints.js";
import {
  planSlices,
  RESOURCE_SLICES_PATH,
  SLICE_FIELD_DRIVER,
  SLICE_FIELD_NODE_NAME,
  type PoolDevice,
  type ResourceSlice,
  type SliceOp,
} from "./slices.js";

/** Device changes closer together than this are published as one. */
export const DEFAULT_SLICE_COALESCE_MS = 50;
const DEFAULT_RETRY_BASE_MS = 250;
const DEFAULT_RETRY_MAX_MS = 30_000;
const SLICES_PATH = RESOURCE_SLICES_PATH;
/** Observations kept while a pass runs; past this many, the pass's result is re-read whatever they said. */
const MAX_OBSERVATIONS_DURING_PASS = 100;
/**
 * Slices changed behind the plugin's back are published again at once the first time, after this
 * delay the second time within RESYNC_STREAK_MS, doubling up to DEFAULT_RESYNC_MAX_MS. A kubelet wipes
 * the node's slices once per start; something that keeps deleting them (the operator removing the pool
 * of a config that left DRA while its old plugin still runs) is answered at a slow pace, not fought.
 */
const DEFAULT_RESYNC_BACKOFF_MS = 1_000;
const DEFAULT_RESYNC_MAX_MS = 30_000;
const RESYNC_STREAK_MS = 60_000;

export interface SlicePublisherOptions {
  readonly client: Pick<ApiClient, "request">;
  readonly driver: string;
  readonly node: string;
  readonly configName: string;
  /** The node's devices now, with DRA names, health and typed attributes. */
  readonly devices: () => readonly PoolDevice[];
  readonly logger: Logger;
  readonly coalesceMs?: number;
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
  /** Called after every successful pass (also when nothing had to change). */
  readonly onPublished?: (state: PublishedPool) => void;
  /**
   * Other instances of the driver on the node (a surge upgrade): while a newer one is live, this one
   * stands by and writes nothing; when it goes, this one publishes its own view again. Checked before
   * every pass and every `handoverPollMs` in between.
   */
  readonly handover?: { newerLiveInstance(): Promise<string | undefined> };
  readonly handoverPollMs?: number;
  /**
   * Watches the node's slices of the driver through this client and publishes again as soon as they
   * differ from what this instance wrote: changed or deleted by someone else (the kubelet deletes every
   * slice of its node when it starts, and does not tell its plugins). Absent: nothing but a device
   * change or a failed pass leads to a pass.
   */
  readonly watch?: Pick<ApiClient, "request" | "watch">;
  /** The watch's first and largest delay after a failed list or watch. */
  readonly watchRetryBaseMs?: number;
  readonly watchRetryMaxMs?: number;
  /** The delay before publishing again after a second change behind the plugin's back, and the most. */
  readonly resyncBackoffMs?: number;
  readonly resyncMaxMs?: number;
  /**
   * Where the API server keeps device taints (the probe says), unhealthy devices stay in the slice with
   * dpo's NoSchedule taint. Absent, or while the probe has no answer: they are left out.
   */
  readonly deviceTaints?: DeviceTaintProbe;
  /** How soon a pass is tried again while the taint probe has no answer and a device is unhealthy. */
  readonly taintProbeRetryMs?: number;
}

/** How often an instance looks for a newer one beside it (a readdir; a connect only when one exists). */
export const DEFAULT_HANDOVER_POLL_MS = 1_000;

/** The pool as last written (or found unchanged). */
export interface PublishedPool {
  readonly generation: number;
  readonly slices: number;
  /** Devices in the slices that new claims may get: the healthy (untainted) ones. */
  readonly devices: number;
  /** When the pass that wrote it started (epoch ms), for latency measurements. */
  readonly requestedAtMs: number;
  readonly publishedAtMs: number;
}

interface SliceList {
  items?: ResourceSlice[];
}

/** What the publisher keeps of a watch observation: enough to tell its own writes from anyone else's. */
type SliceSighting = { readonly name: string; readonly resourceVersion?: string; readonly uid?: string };
type Observed =
  | { readonly kind: "list"; readonly slices: readonly SliceSighting[] }
  | {
      readonly kind: "event";
      readonly type: "ADDED" | "MODIFIED" | "DELETED";
      readonly slice: SliceSighting;
    };

function sighting(slice: ResourceSlice): SliceSighting {
  return {
    name: slice.metadata.name,
    resourceVersion: slice.metadata.resourceVersion,
    uid: slice.metadata.uid,
  };
}

function compact(observation: SliceObservation): Observed {
  return observation.kind === "list"
    ? { kind: "list", slices: observation.slices.map(sighting) }
    : { kind: "event", type: observation.type, slice: sighting(observation.slice) };
}

/**
 * Whether an observation of the API server agrees with the slices this instance last wrote or read
 * (`known`, by name). A list must hold exactly those, each at the same resourceVersion; an add or
 * update must be one of them at its resourceVersion (our own write coming back); a delete must be of a
 * slice no longer known, or of an earlier object of that name (another uid: we deleted and re-created
 * it). Anything else was done by someone else, or is older than what we know: read the pool again. Pure.
 */
export function observationAgrees(known: ReadonlyMap<string, SliceSighting>, observed: Observed): boolean {
  if (observed.kind === "list") {
    return (
      observed.slices.length === known.size &&
      observed.slices.every((s) => {
        const k = known.get(s.name);
        return k !== undefined && k.resourceVersion === s.resourceVersion;
      })
    );
  }
  const k = known.get(observed.slice.name);
  if (observed.type === "DELETED") {
    return k === undefined || (k.uid !== undefined && k.uid !== observed.slice.uid);
  }
  return k !== undefined && k.resourceVersion === observed.slice.resourceVersion;
}

export class SlicePublisher {
  private readonly log: Logger;
  /** The pool as the API server holds it after our last successful pass; undefined: list first. */
  private known: ResourceSlice[] | undefined;
  /** The slices of the last pass: their taints' times outlive a deletion of the slices (kubelet start). */
  private lastPublished: ResourceSlice[] = [];
  private lastGeneration = 0;
  private published: PublishedPool | undefined;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private pending = false;
  /** When the oldest unpublished change was signalled. */
  private requestedAtMs: number | undefined;
  private retryMs: number;
  private stopped = false;
  private readonly abort = new AbortController();
  /** The socket of the newer instance that publishes the pool meanwhile; undefined: this one does. */
  private newerInstance: string | undefined;
  private handoverTimer: NodeJS.Timeout | undefined;
  private sliceWatch: NodeSliceWatch | undefined;
  /** What the watch said while a pass ran: judged against what the pass leaves once it ends. */
  private observedDuringPass: Observed[] = [];
  private observationsOverflowed = false;
  /** Changes behind the plugin's back, each within RESYNC_STREAK_MS of the one before, and the last one's time. */
  private resyncStreak = 0;
  private lastResyncAtMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly opts: SlicePublisherOptions) {
    this.log = opts.logger.child({ component: "resourceslices" });
    this.retryMs = opts.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
  }

  /** The newer instance this one stands by for, or undefined while this one publishes. */
  standingByFor(): string | undefined {
    return this.newerInstance;
  }

  /** The pool as last published; undefined before the first successful pass. */
  state(): PublishedPool | undefined {
    return this.published;
  }

  /** The last pass's error; undefined once a pass succeeds. */
  error(): string | undefined {
    return this.lastError;
  }

  /**
   * Publishes now and resolves after the first pass, successful or not (failures keep retrying); then
   * watches the slices, when given a watch.
   */
  async start(): Promise<void> {
    this.requestedAtMs = Date.now();
    await this.run();
    if (this.stopped) return;
    if (this.opts.handover !== undefined) this.pollHandover();
    if (this.opts.watch !== undefined) {
      // After the first pass: the watch's first list then shows our own writes, which agree.
      this.sliceWatch = new NodeSliceWatch({
        client: this.opts.watch,
        node: this.opts.node,
        driver: this.opts.driver,
        logger: this.opts.logger,
        retryBaseMs: this.opts.watchRetryBaseMs,
        retryMaxMs: this.opts.watchRetryMaxMs,
        onObservation: (observation) => this.observe(compact(observation)),
      });
      this.sliceWatch.start();
    }
  }

  /** Signals that the devices changed: a pass follows within the coalescing delay. */
  changed(): void {
    if (this.stopped) return;
    this.requestedAtMs ??= Date.now();
    if (this.timer !== undefined) return;
    this.schedule(this.opts.coalesceMs ?? DEFAULT_SLICE_COALESCE_MS);
  }

  /** Stops publishing and waits for a pass in flight; the slices stay as they are. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.handoverTimer);
    this.timer = undefined;
    this.abort.abort();
    await Promise.all([this.sliceWatch?.stop(), this.running?.catch(() => undefined)]);
  }

  /** A pass in flight owns `known`: what the watch says meanwhile waits for its end. */
  private observe(observed: Observed): void {
    if (this.stopped) return;
    if (this.running === undefined) {
      this.judge([observed], false);
    } else if (this.observedDuringPass.length < MAX_OBSERVATIONS_DURING_PASS) {
      this.observedDuringPass.push(observed);
    } else {
      this.observationsOverflowed = true;
    }
  }

  /**
   * Reads the pool again and publishes when the API server's slices are not what this instance last saw
   * of them. Nothing to do while `known` is unset (a pass that lists is due anyway) or while a newer
   * instance publishes the pool.
   */
  private judge(observed: readonly Observed[], overflowed: boolean): void {
    if (this.stopped || this.known === undefined || this.newerInstance !== undefined) return;
    const known = new Map(this.known.map((slice) => [slice.metadata.name, sighting(slice)]));
    const differs = overflowed ? observed[0] : observed.find((o) => !observationAgrees(known, o));
    if (differs === undefined) return;
    const now = Date.now();
    this.resyncStreak = now - this.lastResyncAtMs < RESYNC_STREAK_MS ? this.resyncStreak + 1 : 1;
    this.lastResyncAtMs = now;
    const delayMs =
      this.resyncStreak === 1
        ? (this.opts.coalesceMs ?? DEFAULT_SLICE_COALESCE_MS)
        : Math.min(
            (this.opts.resyncBackoffMs ?? DEFAULT_RESYNC_BACKOFF_MS) * 2 ** (this.resyncStreak - 2),
            this.opts.resyncMaxMs ?? DEFAULT_RESYNC_MAX_MS,
          );
    this.log.info(
      {
        ...(differs.kind === "list"
          ? { listed: differs.slices.map((s) => s.name), known: [...known.keys()] }
          : {
              event: differs.type,
              slice: differs.slice.name,
              resourceVersion: differs.slice.resourceVersion,
            }),
        publishInMs: delayMs,
      },
      "this node's ResourceSlices changed behind the plugin's back; publishing them again",
    );
    this.known = undefined;
    this.requestedAtMs ??= now;
    // A pass already due re-reads the pool anyway (known is unset); it is not put off.
    if (this.timer === undefined) this.schedule(delayMs);
  }

  /** Looks for a newer instance every handoverPollMs, so a handover in either direction is noticed idle too. */
  private pollHandover(): void {
    this.handoverTimer = setTimeout(() => {
      void this.standsBy().then((standing) => {
        // Standing by: nothing to do. Publishing: a pass only if this instance just took the pool back,
        // which standsBy signalled through `requestedAtMs`.
        if (!standing && this.requestedAtMs !== undefined && this.timer === undefined) void this.run();
        if (!this.stopped) this.pollHandover();
      });
    }, this.opts.handoverPollMs ?? DEFAULT_HANDOVER_POLL_MS);
    this.handoverTimer.unref();
  }

  /**
   * Whether a newer instance publishes the pool now; records the change and logs it. Taking the pool
   * back forgets what this instance knew of the slices (the newer one wrote them since) and asks for a
   * pass, so the pool shows this instance's devices again.
   */
  private async standsBy(): Promise<boolean> {
    const handover = this.opts.handover;
    if (handover === undefined) return false;
    let newer: string | undefined;
    try {
      newer = await handover.newerLiveInstance();
    } catch (err) {
      // Cannot tell: keep the last answer rather than flap.
      this.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        "looking for a newer instance failed",
      );
      return this.newerInstance !== undefined;
    }
    if (newer !== undefined && this.newerInstance === undefined) {
      this.log.info(
        { newerInstance: newer },
        "a newer instance of the driver publishes the pool; standing by",
      );
    } else if (newer === undefined && this.newerInstance !== undefined) {
      this.log.info(
        { newerInstance: this.newerInstance },
        "the newer instance is gone; publishing the pool again",
      );
      this.known = undefined;
      this.requestedAtMs ??= Date.now();
    }
    this.newerInstance = newer;
    return newer !== undefined;
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, delayMs);
    this.timer.unref();
  }

  /** One pass at a time; a change during a pass makes one more pass right after it. */
  private run(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running !== undefined) {
      this.pending = true;
      return this.running;
    }
    const run = this.pass().finally(() => {
      this.running = undefined;
      const observed = this.observedDuringPass.splice(0);
      const overflowed = this.observationsOverflowed;
      this.observationsOverflowed = false;
      if (observed.length > 0) this.judge(observed, overflowed);
      if (this.pending && !this.stopped) {
        this.pending = false;
        void this.run();
      }
    });
    this.running = run;
    return run;
  }

  private async pass(): Promise<void> {
    // A newer instance's slices are not ours to change; the change waits until it is gone.
    if (await this.standsBy()) return;
    const requestedAtMs = this.requestedAtMs ?? Date.now();
    this.requestedAtMs = undefined;
    try {
      const existing = this.known ?? (await this.list());
      const input = {
        driver: this.opts.driver,
        node: this.opts.node,
        configName: this.opts.configName,
        devices: this.opts.devices(),
      };
      const unhealthy = input.devices.some((device) => device.health !== "Healthy");
      const probe = this.opts.deviceTaints;
      // Asked only once a device is unhealthy: with all healthy, both forms of the pool are the same.
      const taintsKept = unhealthy && probe !== undefined && (await probe.kept(this.abort.signal));
      const carried = [...this.lastPublished, ...existing];
      const chunks = publishedDeviceChunks(input.devices, carried, taintsKept, new Date());
      const plan = planSlices(input, existing, this.lastGeneration, chunks);
      const after = new Map(existing.map((slice) => [slice.metadata.name, slice]));
      let learned = false;
      for (const op of plan.ops) {
        const result = await this.execute(op);
        if (op.op === "delete") after.delete(op.name);
        else if (result !== undefined) {
          after.set(result.metadata.name, result);
          learned = (probe?.learn(op.slice, result) ?? false) || learned;
        }
      }
      this.known = this.lastPublished = [...after.values()];
      this.lastGeneration = plan.generation;
      // A write showed taints dropped after all (the gate went off): publish without the unhealthy devices.
      if (learned && probe?.state() === "Dropped") this.pending = true;
      // No answer on taints yet: try again later, so an unhealthy device does not stay out for good.
      if (unhealthy && probe?.state() === "Unknown" && this.timer === undefined) {
        this.schedule(this.opts.taintProbeRetryMs ?? DEFAULT_TAINT_PROBE_RETRY_MS);
      }
      const devices = [...after.values()].reduce(
        (n, slice) => n + (slice.spec.devices ?? []).filter((d) => (d.taints?.length ?? 0) === 0).length,
        0,
      );
      this.published = {
        generation: plan.generation,
        slices: after.size,
        devices,
        requestedAtMs,
        publishedAtMs: Date.now(),
      };
      if (plan.ops.length > 0) {
        this.log.info(
          { generation: plan.generation, slices: after.size, devices, ops: plan.ops.map((op) => op.op) },
          "ResourceSlices published",
        );
      }
      if (this.lastError !== undefined) this.log.info("ResourceSlices publishing recovered");
      this.lastError = undefined;
      this.retryMs = this.opts.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
      this.opts.onPublished?.(this.published);
    } catch (err) {
      if (this.stopped) return;
      // Whatever failed, the next pass starts from the API server's view, not from our guess.
      this.known = undefined;
      this.requestedAtMs ??= requestedAtMs;
      const conflict = err instanceof ApiError && (err.code === 409 || err.code === 404);
      const message = err instanceof Error ? err.message : String(err);
      // A conflict means someone else wrote meanwhile: re-read at once (with a little jitter); other
      // errors back off exponentially with full jitter up to the cap.
      const delay = conflict
        ? Math.round(Math.random() * 50)
        : Math.round(this.retryMs / 2 + (Math.random() * this.retryMs) / 2);
      if (!conflict) this.retryMs = Math.min(this.retryMs * 2, this.opts.retryMaxMs ?? DEFAULT_RETRY_MAX_MS);
      if (message !== this.lastError || !conflict) {
        this.log.warn({ err: message, retryInMs: delay }, "publishing ResourceSlices failed");
      }
      this.lastError = message;
      this.schedule(delay);
    }
  }

  private async list(): Promise<ResourceSlice[]> {
    const selector = `${SLICE_FIELD_NODE_NAME}=${this.opts.node},${SLICE_FIELD_DRIVER}=${this.opts.driver}`;
    const list = await this.opts.client.request<SliceList>({
      method: "GET",
      path: `${SLICES_PATH}?fieldSelector=${encodeURIComponent(selector)}`,
      signal: this.abort.signal,
    });
    return list.items ?? [];
  }

  private async execute(op: SliceOp): Promise<ResourceSlice | undefined> {
    const signal = this.abort.signal;
    switch (op.op) {
      case "create":
        return this.opts.client.request<ResourceSlice>({
          method: "POST",
          path: SLICES_PATH,
          body: op.slice,
          signal,
        });
      case "update":
        return this.opts.client.request<ResourceSlice>({
          method: "PUT",
          path: `${SLICES_PATH}/${op.slice.metadata.name}`,
          body: op.slice,
          signal,
        });
      case "delete":
        try {
          await this.opts.client.request({
            method: "DELETE",
            path: `${SLICES_PATH}/${op.name}`,
            body:
              op.resourceVersion === undefined
                ? undefined
                : {
                    apiVersion: "v1",
                    kind: "DeleteOptions",
                    preconditions: { resourceVersion: op.resourceVersion },
                  },
            signal,
          });
        } catch (err) {
          // Already gone is what we wanted.
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
        return undefined;
    }
  }
}
