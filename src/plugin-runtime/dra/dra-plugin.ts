// The kubelet-facing DRA plugin: the DRAPlugin service in v1 and v1beta1 from one implementation on one
// unix socket, with the optional DRAResourceHealth stream (v1 and v1alpha1) beside it, registered through
// the kubelet's plugin watcher. Prepares claims by writing one CDI spec
// file per claim; devices and claims come from injected sources, so nothing here calls the API server.
import { mkdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../../observability/json-log.js";
import { cdiSpecText, DEFAULT_CDI_DIR, writeCdiSpecFile } from "../../cdi/index.js";
import { DRA_PLUGINS_DIR, PLUGINS_REGISTRY_DIR } from "../../contract/kubelet-paths.js";
import {
  DRA_HEALTH_SERVICES,
  DRA_PLUGIN_TYPE,
  DRA_SUPPORTED_SERVICES,
  draHealthV1,
  draHealthV1alpha1,
  draV1,
  draV1beta1,
} from "../proto/wire.js";
import { PluginWatcherRegistration } from "../registration/plugin-watcher.js";
import {
  monotonicStartMs,
  nextSocketSequence,
  removeStaleSockets,
  socketFileName,
  socketPath,
  socketPrefix,
} from "../registration/sockets.js";
import {
  GrpcServer,
  type SendUnaryData,
  type ServerUnaryCall,
  type ServiceError,
  type ServiceImplementation,
} from "../grpc/server.js";
import { Status } from "../grpc/status.js";
import type { ClaimReference, DraResourceClaim, ResourceClaimGetter } from "./claim.js";
import { ClaimOverlap } from "./claim-overlap.js";
import type { DraNodeDevice } from "./devices.js";
import { DraHealthStreams } from "./health-stream.js";
import {
  claimReferenceProblem,
  claimSpecFileName,
  claimUidProblem,
  draCdiKind,
  planClaimPreparation,
  type DriverOnNode,
  type PreparedDevice,
} from "./prepare.js";
import { shutdownServer } from "../server/shutdown.js";

/**
 * Budget for reading one claim. The kubelet gives a whole NodePrepareResources call 45 s
 * (defaultClientCallTimeout in pkg/kubelet/cm/dra/plugin); a claim that cannot be read within this gets
 * an error of its own and the kubelet asks again.
 */
export const DEFAULT_CLAIM_READ_TIMEOUT_MS = 20_000;
/**
 * Most claims one call may name. A pod references at most a few claims and the kubelet asks per pod;
 * a request beyond this is malformed and refused whole, before any claim is read.
 */
export const MAX_CLAIMS_PER_REQUEST = 1_024;
/** The DRA socket's name starts with this; the directory is the driver's own. */
export const DRA_SOCKET_PREFIX = "dra-";

export interface DraPluginOptions {
  /** The DRA driver name (a DNS subdomain, e.g. `foo.example.com`): registration name and CDI vendor. */
  readonly driverName: string;
  /** This node's name: the pool whose devices this plugin prepares. */
  readonly nodeName: string;
  /** This node's devices with their current health (e.g. draDevicesOf(backend)); called on every prepare. */
  readonly devices: () => readonly DraNodeDevice[];
  /** What a container gets for one request's devices together (DriverOnNode.requestEdits). */
  readonly requestEdits?: DriverOnNode["requestEdits"];
  readonly claims: ResourceClaimGetter;
  readonly logger: Logger;
  /** Directory of the DRA socket; default `/var/lib/kubelet/plugins/<driver>`. */
  readonly pluginDir?: string;
  /** The plugin watcher's directory; default `/var/lib/kubelet/plugins_registry`. */
  readonly registryDir?: string;
  /** Where the claims' CDI specs go; default `/var/run/cdi`. */
  readonly cdiDir?: string;
  readonly claimReadTimeoutMs?: number;
  /** Called with every verdict of the kubelet (NotifyRegistrationStatus), after it is recorded. */
  readonly onRegistrationStatus?: (status: DraRegistrationStatus) => void;
  /** Told how long each call the kubelet made took to answer, once answered (the latency metrics). */
  readonly onAnswered?: (method: DraCall, seconds: number) => void;
  /** How often the health stream repeats the complete list although nothing changed. */
  readonly healthHeartbeatMs?: number;
}

/**
 * What the plugin lists in supported_versions: the DRAPlugin services first (a kubelet takes the first it
 * knows, and older ones skip names they do not know), then the health services the kubelet looks for by
 * name (pickHealthService).
 */
export const DRA_REGISTERED_SERVICES: readonly string[] = [...DRA_SUPPORTED_SERVICES, ...DRA_HEALTH_SERVICES];

/** The kubelet's two calls to a DRA plugin. */
export type DraCall = "NodePrepareResources" | "NodeUnprepareResources";

/** The kubelet's verdict from NotifyRegistrationStatus. */
export interface DraRegistrationStatus {
  readonly registered: boolean;
  readonly error: string;
}

/** A claim's outcome, before it is put into either version's message. */
type PrepareOutcome = { readonly devices: readonly PreparedDevice[]; readonly error: string };

export class DraPlugin {
  private readonly log: Logger;
  private readonly kind: string;
  private readonly pluginDir: string;
  private readonly registryDir: string;
  private readonly cdiDir: string;
  /** This instance's place among the driver's instances on the node (socket names): not the wall clock. */
  private readonly startedAtMs = monotonicStartMs();
  private server: GrpcServer | undefined;
  private endpointPath: string | undefined;
  private registration: PluginWatcherRegistration | undefined;
  private lastStatus: DraRegistrationStatus | undefined;
  /** File writes and removals one at a time, so a prepare and an unprepare of one claim cannot interleave. */
  private fileChain: Promise<unknown> = Promise.resolve();
  /** Which prepares an unprepare of one of their claims overtook while they read the claims. */
  private readonly overlap = new ClaimOverlap();
  /** The kubelet's device health streams (DRAResourceHealth). */
  readonly health: DraHealthStreams;

  constructor(private readonly opts: DraPluginOptions) {
    const kind = draCdiKind(opts.driverName);
    if (!kind.ok) throw new Error(`DRA plugin: ${kind.problem}`);
    if (opts.nodeName === "") throw new Error("DRA plugin: the node name is empty");
    this.kind = kind.kind;
    this.log = opts.logger.child({ driver: opts.driverName, node: opts.nodeName });
    this.pluginDir = opts.pluginDir ?? join(DRA_PLUGINS_DIR, opts.driverName);
    this.registryDir = opts.registryDir ?? PLUGINS_REGISTRY_DIR;
    this.cdiDir = opts.cdiDir ?? DEFAULT_CDI_DIR;
    this.health = new DraHealthStreams({
      pool: opts.nodeName,
      devices: () => opts.devices(),
      logger: this.log,
      heartbeatMs: opts.healthHeartbeatMs,
    });
  }

  /** The devices' health may have changed: every open health stream gets the complete list again. */
  healthChanged(): void {
    this.health.changed();
  }

  /** `<driver>/device`: the CDI kind of every device this plugin prepares. */
  get cdiKind(): string {
    return this.kind;
  }

  /** Absolute path of the DRA socket while serving. */
  get endpoint(): string | undefined {
    return this.endpointPath;
  }

  /** Absolute path of the registration socket in plugins_registry while serving. */
  get registrationSocket(): string | undefined {
    return this.registration?.socketPath;
  }

  /** The kubelet's last verdict; undefined until it has given one. */
  registrationStatus(): DraRegistrationStatus | undefined {
    return this.lastStatus;
  }

  /** Serves the DRA socket first, then the registration socket, so the kubelet finds a live endpoint. */
  async start(): Promise<void> {
    await this.serve();
    await this.register();
  }

  /**
   * Serves the DRA socket without registering: other instances of the driver on the node see this one
   * from then on (see handover.ts), and the kubelet does not know it yet.
   */
  async serve(): Promise<void> {
    if (this.server !== undefined) return;
    await mkdir(this.pluginDir, { recursive: true, mode: 0o750 });
    await mkdir(this.registryDir, { recursive: true, mode: 0o750 });
    const registryPrefix = socketPrefix(`dra_${this.opts.driverName}`);
    // Sockets of crashed earlier instances; a live one belongs to an instance still running (an upgrade).
    await removeStaleSockets(this.pluginDir, DRA_SOCKET_PREFIX, new Set());
    await removeStaleSockets(this.registryDir, registryPrefix, new Set());

    const path = socketPath(
      this.pluginDir,
      socketFileName(DRA_SOCKET_PREFIX, this.startedAtMs, nextSocketSequence()),
    );
    const server = new GrpcServer();
    server.addService(draV1.DRAPluginService, this.v1Service());
    server.addService(draV1beta1.DRAPluginService, this.v1beta1Service());
    server.addService(draHealthV1.DRAResourceHealthService, this.health.v1Service());
    server.addService(draHealthV1alpha1.DRAResourceHealthService, this.health.v1alpha1Service());
    await server.listen(path);
    this.server = server;
    this.endpointPath = path;
    this.log.info({ socket: path, services: DRA_REGISTERED_SERVICES }, "serving the DRA plugin");
  }

  /** Registers the served DRA socket with the kubelet through the plugin watcher. */
  async register(): Promise<void> {
    if (this.server === undefined) throw new Error("DRA plugin: register() before serve()");
    if (this.registration !== undefined) return;
    const registryPrefix = socketPrefix(`dra_${this.opts.driverName}`);
    this.registration = new PluginWatcherRegistration({
      registryDir: this.registryDir,
      socketName: () => socketFileName(registryPrefix, this.startedAtMs, nextSocketSequence(), "-reg.sock"),
      pluginType: DRA_PLUGIN_TYPE,
      resourceName: this.opts.driverName,
      endpointPath: () => this.endpointPath ?? "",
      supportedVersions: DRA_REGISTERED_SERVICES,
      logger: this.log,
      onStatus: (registered, error) => {
        this.lastStatus = { registered, error };
        if (registered) this.log.info({ socket: this.endpointPath }, "registered with the kubelet");
        else this.log.warn({ error }, "the kubelet refused the DRA plugin registration");
        this.opts.onRegistrationStatus?.(this.lastStatus);
      },
    });
    await this.registration.serve();
  }

  /** Stops both sockets and removes them; prepared claims' CDI files stay (the kubelet still owns them). */
  async stop(): Promise<void> {
    const server = this.server;
    const path = this.endpointPath;
    this.server = undefined;
    this.endpointPath = undefined;
    await this.registration?.close();
    this.registration = undefined;
    // Open health streams would keep the server from shutting down gracefully.
    this.health.close();
    if (server) {
      await shutdownServer(server, 500);
    }
    if (path) await unlink(path).catch(() => undefined);
  }

  /**
   * Prepares each claim: reads it, checks its results of this driver against this node's devices, and
   * writes its CDI spec. Every claim of the request gets an outcome keyed by its uid; a failure is that
   * claim's error, never the call's. Claims are read in parallel before any file is touched.
   */
  async prepare(refs: readonly ClaimReference[]): Promise<Map<string, PrepareOutcome>> {
    const unique = uniqueByUid(refs);
    const token = this.overlap.prepareBegan(unique.map((ref) => ref.uid));
    try {
      return await this.prepareClaims(unique, token);
    } catch (err) {
      // A bug or a failing device source: every claim gets the error, the kubelet retries, nothing crashes.
      this.log.error({ err: errorText(err) }, "NodePrepareResources failed");
      const error = `preparing failed: ${errorText(err)}`;
      return new Map(unique.map((ref) => [ref.uid, { devices: [], error }]));
    } finally {
      this.overlap.prepareEnded(unique.map((ref) => ref.uid));
    }
  }

  private async prepareClaims(
    unique: readonly ClaimReference[],
    token: number,
  ): Promise<Map<string, PrepareOutcome>> {
    const claims = await Promise.all(unique.map((ref) => this.readClaim(ref)));
    const devices = new Map(this.opts.devices().map((device) => [device.name, device]));
    const { driverName: driver, nodeName: pool, requestEdits } = this.opts;
    const node: DriverOnNode = { driver, pool, cdiKind: this.kind, requestEdits };
    const outcomes = new Map<string, PrepareOutcome>();
    await this.serialized(async () => {
      for (const [i, ref] of unique.entries()) {
        const read = claims[i]!;
        if ("error" in read) {
          outcomes.set(ref.uid, { devices: [], error: read.error });
          continue;
        }
        if (this.overlap.unpreparedSince(ref.uid, token)) {
          // The kubelet already let go of the claim: a spec written now would never be removed.
          const error = `ResourceClaim ${describeRef(ref)}: unprepared while being prepared; not prepared`;
          this.log.warn({ claim: describeRef(ref), error }, "claim not prepared");
          outcomes.set(ref.uid, { devices: [], error });
          continue;
        }
        const plan = planClaimPreparation(ref, read.claim, node, devices);
        if (!plan.ok) {
          this.log.warn({ claim: describeRef(ref), error: plan.error }, "claim not prepared");
          outcomes.set(ref.uid, { devices: [], error: plan.error });
          continue;
        }
        try {
          if (plan.spec !== undefined) {
            await writeCdiSpecFile(this.cdiDir, plan.fileName, cdiSpecText(plan.spec));
          }
          outcomes.set(ref.uid, { devices: plan.devices, error: "" });
          this.log.info(
            { claim: describeRef(ref), devices: plan.devices.map((d) => d.deviceName) },
            "claim prepared",
          );
        } catch (err) {
          const error = `ResourceClaim ${describeRef(ref)}: cannot write CDI spec ${plan.fileName}: ${errorText(err)}`;
          this.log.error({ claim: describeRef(ref), error }, "claim not prepared");
          outcomes.set(ref.uid, { devices: [], error });
        }
      }
    });
    return outcomes;
  }

  /**
   * Removes the CDI spec this driver writes for each claim uid, and nothing else; a file already gone
   * is success, so a retry (or a claim prepared with none of our devices) answers the same.
   */
  async unprepare(refs: readonly ClaimReference[]): Promise<Map<string, string>> {
    try {
      return await this.unprepareClaims(refs);
    } catch (err) {
      this.log.error({ err: errorText(err) }, "NodeUnprepareResources failed");
      return new Map(uniqueByUid(refs).map((ref) => [ref.uid, `unpreparing failed: ${errorText(err)}`]));
    }
  }

  private async unprepareClaims(refs: readonly ClaimReference[]): Promise<Map<string, string>> {
    const outcomes = new Map<string, string>();
    this.overlap.unprepareBegan(refs.map((ref) => ref.uid));
    await this.serialized(async () => {
      for (const ref of uniqueByUid(refs)) {
        // Only the uid matters here: the claim may be gone from the API already.
        const problem = claimUidProblem(ref.uid);
        if (problem !== undefined) {
          outcomes.set(ref.uid, problem);
          continue;
        }
        const fileName = claimSpecFileName(this.kind, ref.uid);
        try {
          await unlink(join(this.cdiDir, fileName));
          this.log.info({ claim: describeRef(ref), file: fileName }, "claim unprepared");
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOENT") {
            this.log.debug({ claim: describeRef(ref) }, "claim already unprepared");
          } else {
            outcomes.set(
              ref.uid,
              `ResourceClaim ${describeRef(ref)}: cannot remove CDI spec ${fileName}: ${errorText(err)}`,
            );
            continue;
          }
        }
        outcomes.set(ref.uid, "");
      }
    });
    return outcomes;
  }

  private async readClaim(ref: ClaimReference): Promise<{ claim: DraResourceClaim } | { error: string }> {
    const problem = claimReferenceProblem(ref);
    if (problem !== undefined) return { error: problem };
    const timeoutMs = this.opts.claimReadTimeoutMs ?? DEFAULT_CLAIM_READ_TIMEOUT_MS;
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        controller.abort();
        reject(new Error(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      const claim = await Promise.race([this.opts.claims.getResourceClaim(ref, controller.signal), deadline]);
      if (claim === undefined) return { error: `ResourceClaim ${describeRef(ref)} not found` };
      return { claim };
    } catch (err) {
      return { error: `cannot read ResourceClaim ${describeRef(ref)}: ${errorText(err)}` };
    } finally {
      clearTimeout(timer);
    }
  }

  private serialized(work: () => Promise<void>): Promise<void> {
    const run = this.fileChain.then(work, work);
    this.fileChain = run.catch(() => undefined);
    return run;
  }

  /** A request naming more claims than any pod could is refused whole, before anything is read. */
  private tooMany(count: number): ServiceError | undefined {
    if (count <= MAX_CLAIMS_PER_REQUEST) return undefined;
    return {
      code: Status.INVALID_ARGUMENT,
      details: `malformed request: ${count} claims, at most ${MAX_CLAIMS_PER_REQUEST}`,
    };
  }

  private answered(method: DraCall, startedMs: number): void {
    this.opts.onAnswered?.(method, (performance.now() - startedMs) / 1000);
  }

  /**
   * The two DRAPlugin services, answered by the same implementation: v1beta1 has the same messages as v1
   * in another package, so only the response types differ.
   */
  private serviceAnswering<PrepareResponse, UnprepareResponse>(
    prepared: (claims: ReturnType<typeof toPrepareMap>) => PrepareResponse,
    unprepared: (claims: ReturnType<typeof toUnprepareMap>) => UnprepareResponse,
  ) {
    type Call = ServerUnaryCall<{ claims: readonly ClaimReference[] }>;
    return {
      nodePrepareResources: (call: Call, callback: SendUnaryData<PrepareResponse>) => {
        const refused = this.tooMany(call.request.claims.length);
        if (refused) return callback(refused, null);
        const started = performance.now();
        void this.prepare(call.request.claims).then((outcomes) => {
          callback(null, prepared(toPrepareMap(outcomes)));
          this.answered("NodePrepareResources", started);
        });
      },
      nodeUnprepareResources: (call: Call, callback: SendUnaryData<UnprepareResponse>) => {
        const refused = this.tooMany(call.request.claims.length);
        if (refused) return callback(refused, null);
        const started = performance.now();
        void this.unprepare(call.request.claims).then((outcomes) => {
          callback(null, unprepared(toUnprepareMap(outcomes)));
          this.answered("NodeUnprepareResources", started);
        });
      },
    };
  }

  private v1Service(): ServiceImplementation<typeof draV1.DRAPluginService> {
    return this.serviceAnswering(
      (claims) => draV1.NodePrepareResourcesResponse.fromPartial({ claims }),
      (claims) => draV1.NodeUnprepareResourcesResponse.fromPartial({ claims }),
    );
  }

  private v1beta1Service(): ServiceImplementation<typeof draV1beta1.DRAPluginService> {
    return this.serviceAnswering(
      (claims) => draV1beta1.NodePrepareResourcesResponse.fromPartial({ claims }),
      (claims) => draV1beta1.NodeUnprepareResourcesResponse.fromPartial({ claims }),
    );
  }
}

/**
 * One claim's answer in the fields both DRA services share: v1 adds `share_id` (consumable capacity), which
 * v1beta1 lacks and this plugin does not hand out, so one shape fills either response.
 */
interface PreparedClaimAnswer {
  devices: { requestNames: string[]; poolName: string; deviceName: string; cdiDeviceIds: string[] }[];
  error: string;
}

function toPrepareMap(outcomes: ReadonlyMap<string, PrepareOutcome>): Record<string, PreparedClaimAnswer> {
  return Object.fromEntries(
    [...outcomes].map(([uid, outcome]) => [
      uid,
      {
        devices: outcome.devices.map((d) => ({
          requestNames: [...d.requestNames],
          poolName: d.poolName,
          deviceName: d.deviceName,
          cdiDeviceIds: [...d.cdiDeviceIds],
        })),
        error: outcome.error,
      },
    ]),
  );
}

function toUnprepareMap(outcomes: ReadonlyMap<string, string>): Record<string, { error: string }> {
  return Object.fromEntries([...outcomes].map(([uid, error]) => [uid, { error }]));
}

/** The first reference per uid: the answer is keyed by uid, so a repeated one gets one outcome. */
function uniqueByUid(refs: readonly ClaimReference[]): ClaimReference[] {
  const seen = new Map<string, ClaimReference>();
  for (const ref of refs) if (!seen.has(ref.uid)) seen.set(ref.uid, ref);
  return [...seen.values()];
}

function describeRef(ref: ClaimReference): string {
  return `${ref.namespace}/${ref.name} (uid ${ref.uid})`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
