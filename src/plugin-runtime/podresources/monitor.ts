// Follows which containers hold the plugin's devices (device-plugin ids or DRA claims) by polling the
// kubelet's PodResources List. Never fatal: a kubelet without the socket, or one that errs, is logged
// once and polled again with backoff.
import { EventEmitter } from "node:events";
import type { Logger } from "../../observability/json-log.js";
import type { PluginMetrics } from "../metrics.js";
import { PodResourcesListerService, type ListPodResourcesResponse } from "../proto/wire.js";
import { unaryCall } from "../grpc/client.js";
import { statusName } from "../grpc/status.js";
import { sameShares, type HeldShares } from "../devices/held.js";
import { allocationsOf, sameAllocations, type Allocations } from "./allocations.js";
import { readAllocatable } from "./allocatable.js";

/** How often the kubelet is asked by default: node exporters poll it every few seconds to a minute. */
export const DEFAULT_POD_RESOURCES_INTERVAL_MS = 10_000;
/**
 * How long a path that starts waits for the kubelet's first answer before it hands devices out without
 * knowing what the other path holds: one call's deadline.
 */
export const FIRST_ANSWER_WAIT_MS = 5_000;
/** The longest wait between two attempts while the kubelet does not answer. */
const RETRY_MAX_MS = 60_000;
/** Deadline of one List call. */
const CALL_TIMEOUT_MS = 5_000;
/**
 * The kubelet's own client accepts answers up to 16 MiB (podresources.DefaultPodResourcesMaxSize); gRPC
 * clients stop at 4 MiB by default, which a node with many pods and exclusive CPUs can pass.
 */
const MAX_RECEIVE_BYTES = 16 * 1024 * 1024;

export interface PodResourcesMonitorOptions {
  /** The kubelet's PodResources socket (`/var/lib/kubelet/pod-resources/kubelet.sock`). */
  socketPath: string;
  /** The `resource` label of the read metrics, and the device-plugin resource whose ids are followed. */
  resourceName: string;
  /**
   * Which devices of this plugin the containers hold, from one List answer. Default: the ids of
   * `resourceName` (device-plugin mode); a DRA plugin gives its driver's claimed devices instead.
   */
  allocationsOf?: (response: ListPodResourcesResponse) => Allocations;
  /**
   * The physical devices the node's other publish path holds, from the same answer: a DRA plugin reads
   * the device plugin's ids of `resourceName`, a device plugin the DRA driver's claims. Absent: not read.
   */
  heldElsewhereOf?: (response: ListPodResourcesResponse) => HeldShares;
  logger: Logger;
  metrics: PluginMetrics;
  /** Time between two successful reads (default 10 s); after a failure the wait doubles, up to 60 s. */
  intervalMs?: number;
  callTimeoutMs?: number;
  retryMaxMs?: number;
  /** Also ask GetAllocatableResources on each read, for the `allocatable` event (capacity-check.ts). */
  readAllocatable?: boolean;
}

export interface PodResourcesMonitorEvents {
  /** The devices held changed (or were learnt for the first time). */
  allocations: [Allocations];
  /** What the other publish path holds changed (or was learnt for the first time). */
  heldElsewhere: [HeldShares];
  /** The ids of the resource the kubelet would hand out now, after each read (readAllocatable). */
  allocatable: [ReadonlySet<string>];
}

/** The gRPC status name of a failed call (UNAVAILABLE when the socket is missing), for the error metric. */
function codeOf(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === "number" ? statusName(code) : "UNKNOWN";
}

export class PodResourcesMonitor extends EventEmitter<PodResourcesMonitorEvents> {
  private readonly log: Logger;
  private readonly intervalMs: number;
  private readonly retryMaxMs: number;
  private readonly callTimeoutMs: number;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private current: Allocations | undefined;
  private held: HeldShares | undefined;
  private readonly answered: Promise<void>;
  private markAnswered: () => void = () => undefined;
  private failures = 0;
  private lastFailure: string | undefined;
  private stopped = false;

  constructor(private readonly opts: PodResourcesMonitorOptions) {
    super();
    this.log = opts.logger.child({ podResources: opts.socketPath });
    this.intervalMs = opts.intervalMs ?? DEFAULT_POD_RESOURCES_INTERVAL_MS;
    this.retryMaxMs = Math.max(opts.retryMaxMs ?? RETRY_MAX_MS, this.intervalMs);
    this.callTimeoutMs = opts.callTimeoutMs ?? CALL_TIMEOUT_MS;
    this.answered = new Promise((resolve) => (this.markAnswered = resolve));
  }

  /** What the kubelet last said the other publish path holds; undefined until it first answered. */
  get heldElsewhere(): HeldShares | undefined {
    return this.held;
  }

  /**
   * Resolves once the first read ended (answered, or failed: a kubelet without the API), after
   * `timeoutMs` at most, or on stop: true when the kubelet answered. A path that starts during a switch
   * waits on it before it hands devices out, so it never offers one the other path's pods still hold.
   */
  async firstAnswer(timeoutMs: number): Promise<boolean> {
    if (this.current !== undefined) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      return await Promise.race([
        this.answered.then(() => !this.stopped && this.current !== undefined),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What the kubelet last said the containers hold; undefined until it first answered. A failed read
   * keeps the last answer: only the kubelet allocates, so what it said holds while it does not answer.
   */
  get allocations(): Allocations | undefined {
    return this.current;
  }

  /** Reads at once, then every interval; returns without waiting for the first answer. */
  start(): void {
    if (this.stopped || this.polling !== undefined || this.timer !== undefined) return;
    this.opts.metrics.podResourcesUp.set({ resource: this.opts.resourceName }, 0);
    this.poll();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.markAnswered();
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.polling;
  }

  private poll(): void {
    this.timer = undefined;
    if (this.stopped) return;
    this.polling = this.readOnce()
      .then(
        () => this.succeeded(),
        (err: unknown) => this.failed(err),
      )
      .then((delayMs) => {
        this.polling = undefined;
        if (this.stopped) return;
        this.timer = setTimeout(() => this.poll(), delayMs);
        // The plugin's servers keep the process alive; polling must not.
        this.timer.unref();
      });
  }

  private async readOnce(): Promise<void> {
    // A connection per call, closed with it: a kubelet that restarted is reached on the next poll, with
    // no connection left in a backoff in between.
    const response = await unaryCall(
      this.opts.socketPath,
      PodResourcesListerService.list,
      {},
      {
        timeoutMs: this.callTimeoutMs,
        maxReceiveBytes: MAX_RECEIVE_BYTES,
      },
    );
    if (this.stopped) return;
    // The other path's holds first: a listener of `allocations` reads them too.
    const held = this.opts.heldElsewhereOf?.(response);
    if (held !== undefined && !sameShares(this.held, held)) {
      this.held = held;
      this.emit("heldElsewhere", held);
    }
    const next = this.opts.allocationsOf?.(response) ?? allocationsOf(response, this.opts.resourceName);
    const changed = !sameAllocations(this.current, next);
    this.current = next;
    this.markAnswered();
    if (changed) this.emit("allocations", next);
    if (this.opts.readAllocatable === true) await this.readAllocatable();
  }

  /** Never fails the read: a kubelet that does not answer it is judged on the next one (capacity-check.ts). */
  private async readAllocatable(): Promise<void> {
    try {
      const ids = await readAllocatable(
        this.opts.socketPath,
        this.opts.resourceName,
        this.callTimeoutMs,
        MAX_RECEIVE_BYTES,
      );
      if (!this.stopped) this.emit("allocatable", ids);
    } catch (err) {
      this.log.debug({ code: codeOf(err), err: (err as Error).message }, "GetAllocatableResources failed");
    }
  }

  private succeeded(): number {
    this.opts.metrics.podResourcesUp.set({ resource: this.opts.resourceName }, 1);
    if (this.failures > 0 || this.lastFailure !== undefined) {
      this.log.info({ failures: this.failures }, "reading the kubelet's PodResources API again");
    }
    this.failures = 0;
    this.lastFailure = undefined;
    return this.intervalMs;
  }

  private failed(err: unknown): number {
    this.markAnswered();
    if (this.stopped) return this.intervalMs;
    this.failures++;
    const code = codeOf(err);
    const message = (err as Error).message;
    this.opts.metrics.podResourcesUp.set({ resource: this.opts.resourceName }, 0);
    this.opts.metrics.podResourcesErrors.inc({ resource: this.opts.resourceName, code });
    const delay = Math.min(this.intervalMs * 2 ** Math.min(this.failures - 1, 20), this.retryMaxMs);
    const fields = { code, err: message, retryInMs: delay };
    // Once per kind of failure (grpc-js messages carry changing details): a node without the API would
    // otherwise log on every poll forever.
    if (code !== this.lastFailure) {
      this.log.warn(
        fields,
        "cannot read the kubelet's PodResources API: device allocations not known until it answers",
      );
    } else {
      this.log.debug(fields, "the kubelet's PodResources API still does not answer");
    }
    this.lastFailure = code;
    return delay;
  }
}
