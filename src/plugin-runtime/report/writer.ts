// Keeps this node's DeviceNodeState current: server-side apply on change, coalesced, retried, never blocking the runtime.
import type { Logger } from "../../observability/json-log.js";
import type { DeviceNodeStateStatus } from "../../api/v1beta1/devicenodestate.js";
import { deviceNodeStateName } from "../../contract/node-state.js";
import { backoffDelayMs } from "../../kube/backoff.js";
import type { DeviceSetSnapshot } from "../devices/device-set.js";
import type { PluginMetrics } from "../metrics.js";
import type { PluginRuntime, PluginRuntimeEvents, RuntimeStatus } from "../runtime.js";
import { ApiError, type ApiRequest } from "./api-client.js";
import {
  buildDeviceNodeState,
  deviceNodeStatePath,
  PLUGIN_FIELD_MANAGER,
  sameReport,
  statusApplyBody,
  trackSince,
  type DeviceSince,
  type NodeStateReport,
} from "./node-state.js";

const APPLY_CONTENT_TYPE = "application/apply-patch+yaml";
const APPLY_QUERY = `?fieldManager=${PLUGIN_FIELD_MANAGER}&force=true`;

/** What the writer reads from the runtime; the runtime itself through `reportSourceOf`. */
export interface ReportSource {
  status(): RuntimeStatus;
  snapshot(): Pick<DeviceSetSnapshot, "physical" | "advertised">;
  /** The node's other publish path, whose pods may hold devices of this one since a switch. */
  readonly otherPath?: "DevicePlugin" | "DRA";
  /** The physical devices the other path's pods hold; absent: never any. */
  heldElsewhere?(): ReadonlySet<string>;
  /** Devices the kubelet has given to containers; undefined while unknown (absent: never known). */
  allocatedDevices?(): number | undefined;
  /**
   * Calls `onChange` after every registration, device or allocation change; returns a function that
   * unsubscribes.
   */
  subscribe(onChange: () => void): () => void;
}

/** What the report reads from a runtime: PluginRuntime, or the DRA mode's DraRuntime of the same shape. */
export interface ReportedRuntime {
  status(): RuntimeStatus;
  readonly devices: Pick<PluginRuntime["devices"], "snapshot">;
  /** The node's other publish path: DRA for the device plugin's runtime, DevicePlugin for DRA's. */
  readonly otherPath: "DevicePlugin" | "DRA";
  heldElsewhere(): ReadonlySet<string>;
  allocatedDevices(): number | undefined;
  on(event: keyof PluginRuntimeEvents, listener: () => void): unknown;
  off(event: keyof PluginRuntimeEvents, listener: () => void): unknown;
}

export function reportSourceOf(runtime: ReportedRuntime): ReportSource {
  return {
    status: () => runtime.status(),
    snapshot: () => runtime.devices.snapshot(),
    otherPath: runtime.otherPath,
    heldElsewhere: () => runtime.heldElsewhere(),
    allocatedDevices: () => runtime.allocatedDevices(),
    subscribe: (onChange) => {
      const listener = (): void => onChange();
      runtime.on("registered", listener);
      runtime.on("unregistered", listener);
      runtime.on("registrationError", listener);
      runtime.on("standby", listener);
      runtime.on("devices", listener);
      runtime.on("allocations", listener);
      runtime.on("selfHeal", listener);
      return () => {
        runtime.off("registered", listener);
        runtime.off("unregistered", listener);
        runtime.off("registrationError", listener);
        runtime.off("standby", listener);
        runtime.off("devices", listener);
        runtime.off("allocations", listener);
        runtime.off("selfHeal", listener);
      };
    },
  };
}

export interface ReportApi {
  request(req: ApiRequest): Promise<unknown>;
}

export interface NodeStateWriterOptions {
  api: ReportApi;
  source: ReportSource;
  namespace: string;
  /** The DevicePluginConfig served; its uid makes it the owner (without one the report has no owner). */
  config: { name: string; uid?: string | undefined };
  nodeName: string;
  resourceName: string;
  /** The plugin revision and pod (from the pod's env); absent when run outside the operator. */
  revision?: string | undefined;
  podUID?: string | undefined;
  pluginVersion: string;
  configHash?: string;
  logger: Logger;
  metrics: PluginMetrics;
  /** At most one write per this interval; changes in between are folded into the next write. */
  minIntervalMs?: number;
  /**
   * A report whose only news is the allocated count is written at most this often (default 30 s), with
   * the count current at that moment; any other change writes at once and carries the count along.
   * Pods come and go far more often than devices or registrations change: on a busy node every read of
   * the PodResources API would otherwise be a write to the API server, on every node.
   */
  allocatedMinIntervalMs?: number;
  /** First and largest delay between attempts after a failure. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Epoch milliseconds (tests). */
  now?: () => number;
}

export interface StopOptions {
  /** Time allowed for the last write (and any write in flight); the shutdown budget is the caller's. */
  budgetMs?: number;
  /** Why the plugin stops, reported as the registration's lastError. */
  reason?: string;
}

type Failure = "transient" | "vanished" | "refused";

/**
 * Writes the report when something changed, never on a timer. The first write creates the object
 * (metadata and spec) with server-side apply, then every write applies the status subresource, which
 * is the only way to set status when the CRD has one. Level-triggered: each write reads the runtime's
 * state at that moment, so a burst of changes becomes one write of the latest state.
 */
export class NodeStateWriter {
  readonly name: string;
  private readonly path: string;
  private readonly log: Logger;
  private readonly minIntervalMs: number;
  private readonly allocatedMinIntervalMs: number;
  private readonly retryBaseMs: number;
  private readonly retryMaxMs: number;
  private readonly now: () => number;
  private readonly abort = new AbortController();

  private since: DeviceSince = new Map();
  private unsubscribe: (() => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The pending timer only waits to write an allocated count: news of any other kind goes first. */
  private waitingForAllocated = false;
  private inFlight: Promise<void> | undefined;
  private dirty = false;
  private started = false;
  private stopped = false;
  private lastAttemptAtMs = Number.NEGATIVE_INFINITY;
  private failures = 0;
  private lastFailureMessage: string | undefined;
  private objectApplied = false;
  private lastWritten: DeviceNodeStateStatus | undefined;

  constructor(private readonly opts: NodeStateWriterOptions) {
    this.name = deviceNodeStateName(opts.config.name, opts.nodeName, opts.revision);
    this.path = deviceNodeStatePath(opts.namespace, this.name);
    this.log = opts.logger.child({ deviceNodeState: this.name, namespace: opts.namespace });
    this.minIntervalMs = opts.minIntervalMs ?? 200;
    this.allocatedMinIntervalMs = opts.allocatedMinIntervalMs ?? 30_000;
    this.retryBaseMs = opts.retryBaseMs ?? 500;
    // 8 s at most between attempts: after an API outage a node's report is right again within seconds.
    // A recovering API server sheds a crowd of plugins with 429 and Retry-After, which is honoured.
    this.retryMaxMs = opts.retryMaxMs ?? 8_000;
    this.now = opts.now ?? Date.now;
  }

  /** The status last accepted by the API server. */
  get written(): DeviceNodeStateStatus | undefined {
    return this.lastWritten;
  }

  /** Follows the runtime's changes and writes the current state once. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    if (this.opts.config.uid === undefined || this.opts.config.uid === "") {
      this.log.warn(
        "the config file has no metadata.uid: the node report gets no owner and outlives its config",
      );
    }
    this.unsubscribe = this.opts.source.subscribe(() => this.changed());
    this.changed();
  }

  /**
   * Stops following changes and tries one last write saying the plugin is no longer registered, so
   * the operator sees it went away. Resolves within `budgetMs` whatever the API server does.
   */
  async stop(options: StopOptions = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    clearTimeout(this.timer);
    const budgetMs = options.budgetMs ?? 1_000;
    let expire: NodeJS.Timeout | undefined;
    // Aborting ends the requests; the race also ends the wait should an answer never come anyway.
    const expired = new Promise<void>((resolve) => {
      expire = setTimeout(() => {
        this.abort.abort();
        resolve();
      }, budgetMs);
    });
    try {
      await Promise.race([this.finalWrite(options.reason ?? "the plugin stopped", budgetMs), expired]);
    } finally {
      clearTimeout(expire);
    }
  }

  private async finalWrite(reason: string, budgetMs: number): Promise<void> {
    try {
      await this.inFlight;
      if (!this.started || this.abort.signal.aborted) return;
      const report = this.build({ reason });
      await this.write(report);
      this.opts.metrics.reportWrites.inc({ result: "ok" });
      this.log.info({ registration: report.status.registration.state }, "final node report written");
    } catch (err) {
      this.opts.metrics.reportWrites.inc({ result: "error" });
      this.log.warn({ err: (err as Error).message, budgetMs }, "final node report not written");
    }
  }

  private changed(): void {
    if (this.stopped) return;
    // Every change is seen here, so a flip and a flip back between two writes still moves `since`.
    this.since = trackSince(this.since, this.opts.source.snapshot().physical, this.isoNow());
    this.dirty = true;
    if (this.waitingForAllocated) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.waitingForAllocated = false;
    }
    this.schedule();
  }

  private schedule(delayMs?: number): void {
    if (this.stopped || !this.dirty || this.inFlight !== undefined || this.timer !== undefined) return;
    const delay = delayMs ?? Math.max(0, this.lastAttemptAtMs + this.minIntervalMs - this.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.waitingForAllocated = false;
      this.flush();
    }, delay);
    // The runtime's servers keep the process alive; a pending report must not.
    this.timer.unref();
  }

  private flush(): void {
    if (this.stopped || !this.dirty) return;
    this.dirty = false;
    const report = this.build();
    if (this.objectApplied && sameReport(this.lastWritten, report.status)) {
      this.opts.metrics.reportWrites.inc({ result: "unchanged" });
      return;
    }
    const allocatedDueAtMs = this.lastAttemptAtMs + this.allocatedMinIntervalMs;
    if (
      this.objectApplied &&
      this.lastWritten !== undefined &&
      sameReport({ ...this.lastWritten, allocated: undefined }, { ...report.status, allocated: undefined }) &&
      this.now() < allocatedDueAtMs
    ) {
      // Only the allocated count moved: written when due, with whatever the count is by then. Any
      // other change before that cancels the wait (see changed()).
      this.dirty = true;
      this.schedule(allocatedDueAtMs - this.now());
      this.waitingForAllocated = this.timer !== undefined;
      return;
    }
    this.lastAttemptAtMs = this.now();
    let retryInMs: number | undefined;
    this.inFlight = this.write(report).then(
      () => {
        this.opts.metrics.reportWrites.inc({ result: "ok" });
        if (this.failures > 0) this.log.info({ failures: this.failures }, "node report written again");
        else this.log.debug({ registration: report.status.registration.state }, "node report written");
        this.failures = 0;
        this.lastFailureMessage = undefined;
      },
      (err: unknown) => {
        this.opts.metrics.reportWrites.inc({ result: "error" });
        this.dirty = true;
        retryInMs = this.onFailure(err);
      },
    );
    void this.inFlight.finally(() => {
      this.inFlight = undefined;
      this.schedule(retryInMs);
    });
  }

  private async write(report: NodeStateReport): Promise<void> {
    if (!this.objectApplied) {
      await this.apply(this.path, report.object);
      this.objectApplied = true;
    }
    try {
      await this.apply(`${this.path}/status`, statusApplyBody(report));
    } catch (err) {
      // Deleted behind our back (by hand, or by garbage collection): the next attempt re-creates it.
      if (err instanceof ApiError && err.code === 404) {
        this.objectApplied = false;
        throw new VanishedError(err);
      }
      throw err;
    }
    this.lastWritten = report.status;
  }

  private apply(path: string, body: object): Promise<unknown> {
    return this.opts.api.request({
      method: "PATCH",
      path: `${path}${APPLY_QUERY}`,
      body,
      contentType: APPLY_CONTENT_TYPE,
      signal: this.abort.signal,
    });
  }

  /** Logs the failure once per distinct message and returns the delay before the next attempt. */
  private onFailure(err: unknown): number {
    this.failures++;
    const vanished = err instanceof VanishedError;
    const apiError = vanished ? err.cause : err instanceof ApiError ? err : undefined;
    const kind: Failure = vanished ? "vanished" : failureKind(apiError);
    const message = (err as Error).message;
    const retryAfterMs = (apiError?.retryAfterSeconds ?? 0) * 1_000;
    const delay =
      kind === "refused"
        ? this.retryMaxMs
        : kind === "vanished"
          ? this.retryBaseMs
          : backoffDelayMs({ baseMs: this.retryBaseMs, maxMs: this.retryMaxMs }, this.failures, retryAfterMs);
    const fields = { err: message, code: apiError?.code, reason: apiError?.reason, retryInMs: delay };
    if (message === this.lastFailureMessage) {
      this.log.debug(fields, "node report still not written");
    } else if (kind === "refused") {
      this.log.error({ ...fields, hint: refusalHint(apiError) }, "the API server refused the node report");
    } else {
      this.log.warn(fields, "node report not written; will retry");
    }
    this.lastFailureMessage = message;
    return delay;
  }

  private build(final?: { reason: string }): NodeStateReport {
    const status = this.opts.source.status();
    const snapshot = this.opts.source.snapshot();
    const now = this.isoNow();
    this.since = trackSince(this.since, snapshot.physical, now);
    return buildDeviceNodeState({
      namespace: this.opts.namespace,
      config: this.opts.config,
      nodeName: this.opts.nodeName,
      resourceName: this.opts.resourceName,
      revision: this.opts.revision,
      podUID: this.opts.podUID,
      pluginVersion: this.opts.pluginVersion,
      kubeletAPIVersion: status.kubeletAPIVersion,
      configHash: this.opts.configHash,
      registration: final
        ? {
            registered: false,
            since: now,
            lastError: final.reason,
            socket: status.socketPath,
            selfHeal: status.selfHeal,
          }
        : {
            registered: status.registered,
            standingBy: status.standingBy !== undefined,
            since: new Date(status.registrationChangedAtMs).toISOString(),
            lastError: status.lastRegistrationError,
            socket: status.socketPath,
            selfHeal: status.selfHeal,
          },
      physical: snapshot.physical,
      advertised: snapshot.advertised,
      heldElsewhere: this.heldElsewhere(),
      allocated: this.opts.source.allocatedDevices?.(),
      since: this.since,
      now,
    });
  }

  private heldElsewhere(): { by: "DevicePlugin" | "DRA"; ids: ReadonlySet<string> } | undefined {
    const { otherPath } = this.opts.source;
    const ids = this.opts.source.heldElsewhere?.();
    return otherPath === undefined || ids === undefined || ids.size === 0
      ? undefined
      : { by: otherPath, ids };
  }

  private isoNow(): string {
    return new Date(this.now()).toISOString();
  }
}

/** The status write found no object although this writer created it: it was deleted since. */
class VanishedError extends Error {
  override readonly cause: ApiError;
  constructor(cause: ApiError) {
    super(`the DeviceNodeState was deleted; re-creating it: ${cause.message}`, { cause });
    this.name = "VanishedError";
    this.cause = cause;
  }
}

/**
 * transient: no answer, throttled, a server error, or a rejected token that may have rotated — back
 * off and retry. refused: RBAC, a missing CRD or namespace, a schema the server rejects — a person
 * must act, so retry slowly. (vanished, the object deleted under us, is told apart by the writer.)
 */
function failureKind(err: ApiError | undefined): Failure {
  if (err === undefined || err.transient || err.code === 401) return "transient";
  return "refused";
}

function refusalHint(err: ApiError | undefined): string {
  switch (err?.code) {
    case 403:
      return "the plugin's ServiceAccount needs create and patch on devicenodestates and patch on devicenodestates/status in this namespace (config/rbac)";
    case 404:
      return "the DeviceNodeState CRD is not installed (config/crd) or the namespace does not exist";
    case 422:
      return "the report does not match the installed DeviceNodeState CRD: are the CRDs from the same dpo version?";
    default:
      return "see the error";
  }
}
