// One plugin pod of the processless mode: what its `dpo plugin` would do, without the process. It registers
// with the node's simulated device manager in-process (or first stands by for an older instance, as the
// plugin's Standby decides), streams its devices, answers Allocate, keeps its DeviceNodeState with the
// plugin's own writer, and stops as the plugin does on SIGTERM.
import type { V1Pod } from "@kubernetes/client-node";
import { EventEmitter } from "node:events";
import { join } from "node:path";
import type { Logger } from "pino";
import { standbyWanted } from "../../src/contract/node-upgrade.js";
import type { PluginMetrics } from "../../src/plugin-runtime/metrics.js";
import type {
  AllocateRequest,
  DevicePluginClient,
  DevicePluginOptions,
} from "../../src/plugin-runtime/proto/index.js";
import {
  NodeStateWriter,
  readNodeAnnotations,
  type ReportApi,
} from "../../src/plugin-runtime/report/index.js";
import type { RuntimeStatus } from "../../src/plugin-runtime/runtime.js";
import type { SimulatedDeviceManager } from "./device-manager.js";
import {
  listAndWatchDevices,
  processlessAllocation,
  processlessSocketName,
  PROCESSLESS_KUBELET_API_VERSION,
  type ProcesslessPluginSpec,
  type ProcesslessTiming,
} from "./processless-rules.js";

/** The real plugin's first delay before registering again after the kubelet dropped it (runtime.ts). */
const REREGISTER_BASE_MS = 100;
const REREGISTER_MAX_MS = 30_000;
/** The real plugin's budget for its final report on SIGTERM (cli/plugin.ts FINAL_REPORT_BUDGET_MS). */
const FINAL_REPORT_BUDGET_MS = 1_000;
/** What a Mock plugin offers the kubelet: no pre-start hook; preferred allocation is not simulated. */
const OPTIONS: DevicePluginOptions = { preStartRequired: false, getPreferredAllocationAvailable: false };

export interface ProcesslessPluginSetup {
  spec: ProcesslessPluginSpec;
  pod: V1Pod;
  slot: string;
  deviceManager: SimulatedDeviceManager;
  /** The node's device-plugins directory as the plugin would see it (its report names its socket there). */
  devicePluginDir: string;
  api: ReportApi;
  metrics: PluginMetrics;
  /** The version the plugin reports: this tree's, as the built plugin the simulator would run. */
  pluginVersion: string;
  timing: ProcesslessTiming;
  log: Logger;
  /** Devices of this resource the kubelet has given to the node's pods (the plugin reads PodResources). */
  allocatedDevices: () => number;
  /** Whether a plugin of the same resource started after this one still serves on the node. */
  newerInstanceServes: (plugin: ProcesslessPlugin) => boolean;
  /**
   * The newest plugin of the same resource started before this one that still serves on the node (its
   * socket would be live), if any: the only case in which the plugin reads its Node to decide on standby.
   */
  olderInstanceServing: (plugin: ProcesslessPlugin) => ProcesslessPlugin | undefined;
}

let sequence = 0;

export class ProcesslessPlugin {
  readonly startedAtMs = Date.now();
  readonly startedAt = new Date(this.startedAtMs).toISOString();
  readonly writer: NodeStateWriter;
  private socketName: string | undefined;
  private registered = false;
  private registrationChangedAtMs = this.startedAtMs;
  private lastError: string | undefined;
  private stream: InProcessStream | undefined;
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private shortStreams = 0;
  private stopping: Promise<void> | undefined;
  /** Its ListAndWatch has ended and its socket is gone: what a newer instance standing by waits for. */
  private ended = false;
  /** The older instance's socket this one stands by for (Standby in the plugin). */
  private standingBy: string | undefined;
  /** What the Node's record said, per older instance (by its start): the Node is read once for each. */
  private readonly standbyWanted = new Map<number, boolean>();

  constructor(private readonly setup: ProcesslessPluginSetup) {
    const { spec } = setup;
    this.writer = new NodeStateWriter({
      api: setup.api,
      source: {
        status: () => this.status(),
        snapshot: () => ({ physical: spec.physical, advertised: spec.advertised }),
        allocatedDevices: () => setup.allocatedDevices(),
        subscribe: (onChange) => {
          this.listeners.add(onChange);
          return () => this.listeners.delete(onChange);
        },
      },
      namespace: spec.namespace,
      config: spec.config,
      nodeName: spec.nodeName,
      resourceName: spec.resourceName,
      revision: spec.revision,
      podUID: spec.podUID,
      pluginVersion: setup.pluginVersion,
      configHash: spec.configHash,
      logger: setup.log,
      metrics: setup.metrics,
    });
    // The process starts, serves and registers; the report writer starts once it has (cli/plugin.ts).
    this.timer = setTimeout(() => {
      void this.registerOrStandBy().then(() => this.writer.start());
    }, setup.timing.startToRegisteredMs);
    this.timer.unref();
  }

  get uid(): string {
    return this.setup.pod.metadata?.uid ?? "";
  }

  get running(): boolean {
    return this.stopping === undefined;
  }

  get isRegistered(): boolean {
    return this.registered;
  }

  /** Whether it still serves its socket (until its stop has ended ListAndWatch). */
  get serving(): boolean {
    return !this.ended && this.socketName !== undefined;
  }

  get resourceName(): string {
    return this.setup.spec.resourceName;
  }

  /** What the plugin's runtime would say of itself (RuntimeStatus), for its node report. */
  status(): RuntimeStatus {
    const socketPath =
      this.socketName === undefined ? undefined : join(this.setup.devicePluginDir, this.socketName);
    return {
      serving: this.running && this.socketName !== undefined,
      registered: this.registered,
      socketPath,
      registrationSocketPath: undefined,
      kubeletAPIVersion: this.registered ? PROCESSLESS_KUBELET_API_VERSION : "",
      lastRegistrationError: this.lastError,
      registrationChangedAtMs: this.registrationChangedAtMs,
      kubeletRestarts: 0,
      standingBy: this.standingBy,
    };
  }

  /** An instance on the node stopped: one standing by looks again (the plugin's socket-removal event). */
  olderInstanceStopped(): void {
    if (this.standingBy !== undefined && this.running) void this.registerOrStandBy();
  }

  /** SIGTERM: the runtime stops (ListAndWatch ends) while the final report says NotRegistered. */
  stop(reason = "the plugin stopped (SIGTERM)"): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.timer);
      await new Promise((resolve) => setTimeout(resolve, this.setup.timing.stopMs).unref());
      // As the plugin's shutdown: the final report (built from the status as it is, the negotiated
      // version still in it) and the runtime's stop at once; the runtime says unregistered last.
      const final = this.writer.stop({ budgetMs: FINAL_REPORT_BUDGET_MS, reason });
      const stream = this.stream;
      this.stream = undefined;
      stream?.endFromPlugin();
      await final;
      this.ended = true;
      this.setRegistered(false);
    })();
    return this.stopping;
  }

  /**
   * Registers, unless an older instance serves the node and the node's upgrade record says this revision
   * stands by (the plugin's Standby): then it serves, reports StandingBy, and registers once that
   * instance has stopped. The Node is read only when an older instance serves, once per such instance;
   * a failed read, no revision: registers.
   */
  private async registerOrStandBy(): Promise<void> {
    const { spec, log } = this.setup;
    const older = this.setup.olderInstanceServing(this);
    if (older === undefined || spec.revision === undefined) return this.leaveStandby();
    let wanted = this.standbyWanted.get(older.startedAtMs);
    if (wanted === undefined) {
      try {
        const annotations = await readNodeAnnotations(this.setup.api, spec.nodeName);
        wanted = standbyWanted(annotations, spec.config.name, spec.revision);
      } catch (err) {
        log.warn(
          { err: (err as Error).message },
          "processless plugin: cannot read the node's upgrade record",
        );
        wanted = false;
      }
      this.standbyWanted.set(older.startedAtMs, wanted);
    }
    // The older one may have stopped, or this one, while the Node was read.
    if (!wanted || !older.serving || !this.running) return this.leaveStandby();
    if (this.standingBy !== undefined) return;
    this.socketName ??= processlessSocketName(this.resourceName, this.startedAtMs, sequence++);
    this.standingBy = older.status().socketPath;
    log.info({ olderInstance: this.standingBy }, "processless plugin: standing by");
    this.changed();
  }

  private leaveStandby(): void {
    if (this.standingBy !== undefined) {
      this.setup.log.info(
        { olderInstance: this.standingBy },
        "processless plugin: registering after standing by",
      );
      this.standingBy = undefined;
    }
    this.register();
  }

  /** Register on a fresh socket, as the runtime does on start and after the kubelet dropped it. */
  private register(): void {
    if (!this.running) return;
    this.socketName = processlessSocketName(this.resourceName, this.startedAtMs, sequence++);
    try {
      this.setup.deviceManager.registerInProcess(
        {
          version: PROCESSLESS_KUBELET_API_VERSION,
          endpoint: this.socketName,
          resourceName: this.resourceName,
          options: OPTIONS,
        },
        this.client(),
        OPTIONS,
      );
      this.lastError = undefined;
      this.setRegistered(true);
    } catch (err) {
      this.lastError = (err as Error).message;
      this.setup.log.warn({ err: this.lastError }, "processless plugin: registration refused");
      this.changed();
    }
  }

  private setRegistered(registered: boolean): void {
    if (this.registered === registered) return;
    this.registered = registered;
    this.registrationChangedAtMs = Date.now();
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }

  /**
   * The kubelet ended ListAndWatch while the plugin serves (a kubelet before v1.37 does that when an older
   * instance's stream ends, kubernetes #121994): not registered, and registering again after the runtime's
   * backoff unless a newer instance serves the resource (see Reregistration).
   */
  private droppedByKubelet(openedAtMs: number): void {
    if (!this.running) return;
    this.shortStreams = Date.now() - openedAtMs >= 30_000 ? 1 : this.shortStreams + 1;
    this.lastError = "the kubelet ended ListAndWatch; registering again";
    this.setRegistered(false);
    const delay = Math.min(REREGISTER_MAX_MS, REREGISTER_BASE_MS * 2 ** (this.shortStreams - 1));
    const retry = (): void => {
      if (!this.running) return;
      if (this.setup.newerInstanceServes(this)) {
        this.timer = setTimeout(retry, 1_000).unref();
        return;
      }
      this.register();
    };
    this.timer = setTimeout(retry, delay).unref();
  }

  /**
   * The device manager calls a plugin through grpc-js's client: this one answers the calls it makes
   * (options, ListAndWatch, Allocate) in-process, callback last as grpc-js takes it. The cast is the one
   * place the two meet; the other methods of the client are never called on an in-process endpoint.
   */
  private client(): DevicePluginClient {
    const unary =
      <Req, Res>(answer: (req: Req) => Res) =>
      (req: Req, ...rest: unknown[]): { cancel(): void } => {
        const callback = rest.find((a) => typeof a === "function") as (err: Error | null, res?: Res) => void;
        setImmediate(() => {
          if (!this.running) return callback(grpcError(14, "UNAVAILABLE", "the plugin stopped"));
          try {
            callback(null, answer(req));
          } catch (err) {
            callback(grpcError(3, "INVALID_ARGUMENT", (err as Error).message));
          }
        });
        return { cancel: () => undefined };
      };
    const client = {
      getDevicePluginOptions: unary(() => OPTIONS),
      allocate: unary((req: AllocateRequest) => ({
        containerResponses: req.containerRequests.map((r) =>
          processlessAllocation(this.resourceName, this.setup.spec.advertised, r.devicesIds),
        ),
      })),
      listAndWatch: () => {
        const stream = new InProcessStream((openedAtMs) => {
          if (this.stream === stream) this.droppedByKubelet(openedAtMs);
        });
        this.stream = stream;
        const devices = listAndWatchDevices(this.setup.spec.advertised);
        // After the device manager has attached its listeners, as the first message of a real stream.
        setImmediate(() => stream.send({ devices }));
        return stream;
      },
      close: () => undefined,
    };
    return client as unknown as DevicePluginClient;
  }
}

/** A ListAndWatch stream with both ends in this process: the plugin sends and ends, the kubelet cancels. */
class InProcessStream extends EventEmitter {
  private readonly openedAtMs = Date.now();
  private ended = false;

  constructor(private readonly onCancel: (openedAtMs: number) => void) {
    super();
  }

  send(message: unknown): void {
    if (!this.ended) this.emit("data", message);
  }

  /** The plugin stops serving: the kubelet sees the stream end. */
  endFromPlugin(): void {
    if (this.ended) return;
    this.ended = true;
    this.emit("end");
  }

  /** The kubelet's side: it stops watching this endpoint. */
  cancel(): void {
    if (this.ended) return;
    this.ended = true;
    this.onCancel(this.openedAtMs);
  }
}

/** An error as grpc-js hands a failed call to its callback: `<code> <NAME>: <details>`. */
function grpcError(code: number, name: string, details: string): Error & { code: number; details: string } {
  return Object.assign(new Error(`${code} ${name}: ${details}`), { code, details });
}
