// A stand-in for the kubelet's DRA manager (pkg/kubelet/cm/dra), for tests only: the plugin watcher's
// handler for sockets of type DRAPlugin (validating GetInfo and choosing the gRPC service as a kubelet of
// the node's version does), NodePrepareResources / NodeUnprepareResources for a pod's claims, each
// driver called with its own claims through the service it registered with, and the deletion of every
// ResourceSlice of the node when the kubelet starts.
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { draV1, draV1beta1, type PluginInfo } from "../../src/plugin-runtime/proto/index.js";
import { callWithDeadline, KUBELET_CHANNEL_OPTIONS } from "./kubelet-grpc.js";
import type { PluginTypeHandler } from "./plugin-watcher.js";
import type { V1Pod } from "@kubernetes/client-node";
import {
  chooseDraService,
  claimsByDriver,
  kubeletMinor,
  DRA_V1_SERVICE,
  draValidationMessage,
  isReservedForPod,
  podClaimNames,
  type ClaimForPrepare,
} from "./dra-rules.js";

/** The kubelet's deadline for one NodePrepare/NodeUnprepare call (defaultClientCallTimeout). */
const DRA_CALL_TIMEOUT_MS = 45_000;

/** One registered DRA driver, as the kubelet's DRAPluginManager keeps it. */
export interface SimulatedDraDriver {
  readonly driverName: string;
  readonly endpoint: string;
  /** The gRPC service chosen at registration: `v1.DRAPlugin` or `v1beta1.DRAPlugin`. */
  readonly service: string;
  readonly registrationSocket: string;
}

/** A claim as the kubelet names it in both calls. */
export interface DraClaimRef {
  namespace: string;
  name: string;
  uid: string;
}

/** One claim's answer from NodePrepareResources. */
export interface DraPreparedClaim {
  error: string;
  devices: { requestNames: string[]; poolName: string; deviceName: string; cdiDeviceIds: string[] }[];
}

/** A claim prepared on the node, as the kubelet's claim info cache keeps it. */
export interface PreparedClaim {
  ref: DraClaimRef;
  /** Drivers it was prepared with (each with a result in its allocation). */
  drivers: string[];
  /** What NodePrepareResources answered, all drivers together, each device with the driver that answered. */
  devices: (DraPreparedClaim["devices"][number] & { driver: string })[];
  /** Uids of the pods on the node using it; unprepared when the last one goes. */
  pods: Set<string>;
}

/** A pod's claims after PrepareDynamicResources: its claim names → the CDI device ids prepared. */
export interface DraPreparedPod {
  /** `namespace/name`. */
  pod: string;
  uid: string;
  /** The pod's claim name (spec.resourceClaims[].name) → the ResourceClaim's name and uid. */
  claims: Record<string, { name: string; uid: string }>;
  /** The pod's claim name → every CDI device id its drivers returned, in order. */
  cdiDeviceIds: Record<string, string[]>;
}

/** Reads a ResourceClaim (the kubelet GETs it from the API server each time it prepares a pod). */
export type ReadClaim = (namespace: string, name: string) => Promise<ClaimForPrepare>;

export interface DraManagerEvents {
  registered: [SimulatedDraDriver];
  deregistered: [SimulatedDraDriver];
}

type Client = draV1.DRAPluginClient | draV1beta1.DRAPluginClient;

/** One registered instance of a driver and the kubelet's connection to it. */
interface Instance {
  driver: SimulatedDraDriver;
  client: Client;
}

/**
 * Whether a kubelet keeps every registered instance of a DRA driver (kubernetes/kubernetes#129832, in
 * v1.33.0; plugins_store.go): it uses the newest registration and falls back to the one before when the
 * newest deregisters. Before that (v1.32), a new registration replaced the old one and a deregistration
 * removed the driver by name, whichever instance went.
 */
export function keepsDraInstances(kubeletVersion: string): boolean {
  return (kubeletMinor(kubeletVersion) ?? 34) >= 33;
}

/**
 * Deletes every ResourceSlice matching a field selector (DeleteCollection); resolves when done, also
 * when there was nothing to delete, and rejects with the API server's error otherwise.
 */
export type DeleteResourceSlices = (fieldSelector: string, signal: AbortSignal) => Promise<void>;

export interface SimulatedDraManagerOptions {
  /** The node whose kubelet this is: its slices are deleted when the kubelet starts. */
  nodeName: string;
  deleteSlices: DeleteResourceSlices;
  /** Told about each failed attempt to delete the node's slices (the kubelet logs and retries). */
  onWipeError?: (err: Error) => void;
}

/**
 * The kubelet's backoff for deleting the node's slices (wipeResourceSlices in
 * pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go): 1 s, doubling, 20% jitter, at most 5 minutes.
 */
const WIPE_BACKOFF = { initialMs: 1_000, factor: 2, jitter: 0.2, maxMs: 5 * 60_000 };

export class SimulatedDraManager extends EventEmitter<DraManagerEvents> implements PluginTypeHandler {
  /** Registered instances per driver, oldest first: the kubelet uses the last. */
  private readonly drivers = new Map<string, Instance[]>();
  /**
   * Every NodePrepareResources / NodeUnprepareResources call made, in order, for assertions; `ms` is how
   * long a NodePrepareResources call took, set when it answered.
   */
  readonly calls: {
    method: "prepare" | "unprepare";
    driver: string;
    service: string;
    claims: string[];
    ms?: number;
  }[] = [];

  /** Ends the deletion of the node's slices when the manager is closed or restarted. */
  private wipeAbort = new AbortController();

  /**
   * `kubeletVersion` is the node's `status.nodeInfo.kubeletVersion`: it decides the service chosen.
   * Without `options` nothing is deleted at start (tests of the gRPC side alone).
   */
  constructor(
    private readonly kubeletVersion: string,
    private readonly options?: SimulatedDraManagerOptions,
  ) {
    super();
  }

  /**
   * What the kubelet's DRA plugin manager does when the kubelet starts (NewDRAPluginManager, v1.35.4 and
   * v1.37.2): no driver has registered yet and none may come back, so it deletes every ResourceSlice
   * whose spec.nodeName is this node, of every driver, with one DeleteCollection, retried with backoff
   * until it succeeds. The kubelet does it in the background; this resolves when it is done (or the
   * manager closed), so a test knows the slices a plugin wrote before are gone.
   */
  async start(): Promise<void> {
    const options = this.options;
    if (options === undefined) return;
    const signal = this.wipeAbort.signal;
    const selector = `spec.nodeName=${options.nodeName}`;
    for (let delayMs = WIPE_BACKOFF.initialMs; !signal.aborted;) {
      try {
        await options.deleteSlices(selector, signal);
        return;
      } catch (err) {
        if (signal.aborted) return;
        options.onWipeError?.(err as Error);
      }
      const jittered = delayMs * (1 + Math.random() * WIPE_BACKOFF.jitter);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, jittered);
        signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
      delayMs = Math.min(delayMs * WIPE_BACKOFF.factor, WIPE_BACKOFF.maxMs);
    }
  }

  /**
   * A kubelet restart: the new process knows no plugin until the plugin watcher finds their sockets
   * again, keeps the claims it prepared (its checkpoint), and deletes the node's slices again.
   */
  async restart(): Promise<void> {
    this.wipeAbort.abort();
    this.forgetDrivers();
    this.wipeAbort = new AbortController();
    await this.start();
  }

  /** The instance the kubelet uses for each registered driver. */
  registered(): SimulatedDraDriver[] {
    return [...this.drivers.values()].flatMap((list) => list.slice(-1).map((i) => i.driver));
  }

  /** The instance the kubelet uses for the driver. */
  driver(name: string): SimulatedDraDriver | undefined {
    return this.drivers.get(name)?.at(-1)?.driver;
  }

  /** Every registered instance of the driver, oldest first. */
  instances(name: string): SimulatedDraDriver[] {
    return (this.drivers.get(name) ?? []).map((i) => i.driver);
  }

  /**
   * ValidatePlugin then RegisterPlugin. From v1.33 a newer registration of a driver is added beside the
   * older ones (an endpoint registered twice is refused, as plugins_store.go does); before, it replaces
   * the older one.
   */
  register(info: PluginInfo, socketPath: string): Promise<void> {
    const endpoint = info.endpoint === "" ? socketPath : info.endpoint;
    const chosen = chooseDraService(this.kubeletVersion, info.supportedVersions);
    if ("error" in chosen) {
      return Promise.reject(new Error(draValidationMessage(info.name, endpoint, chosen.error)));
    }
    const list = this.drivers.get(info.name) ?? [];
    if (list.some((i) => i.driver.endpoint === endpoint)) {
      return Promise.reject(new Error(`endpoint ${endpoint} already registered for plugin ${info.name}`));
    }
    const Ctor = chosen.service === DRA_V1_SERVICE ? draV1.DRAPluginClient : draV1beta1.DRAPluginClient;
    const client = new Ctor(`unix://${endpoint}`, grpc.credentials.createInsecure(), KUBELET_CHANNEL_OPTIONS);
    const driver: SimulatedDraDriver = {
      driverName: info.name,
      endpoint,
      service: chosen.service,
      registrationSocket: socketPath,
    };
    if (keepsDraInstances(this.kubeletVersion)) {
      this.drivers.set(info.name, [...list, { driver, client }]);
    } else {
      for (const old of list) old.client.close();
      this.drivers.set(info.name, [{ driver, client }]);
    }
    this.emit("registered", driver);
    return Promise.resolve();
  }

  /**
   * DeRegisterPlugin when a registration socket goes. From v1.33 only that instance is removed and the
   * kubelet falls back to the newest one left; before, the driver goes whichever instance's socket it was.
   */
  deregister(info: PluginInfo, socketPath: string): void {
    const list = this.drivers.get(info.name);
    if (list === undefined) return;
    const gone = keepsDraInstances(this.kubeletVersion)
      ? list.filter((i) => i.driver.registrationSocket === socketPath)
      : list;
    if (gone.length === 0) return;
    const left = list.filter((i) => !gone.includes(i));
    if (left.length > 0) this.drivers.set(info.name, left);
    else this.drivers.delete(info.name);
    for (const i of gone) {
      i.client.close();
      this.emit("deregistered", i.driver);
    }
  }

  /**
   * NodePrepareResources for `claims` of `driverName`, through the service it registered with. Resolves
   * with each claim's answer by uid; rejects when the driver is not registered or the call fails.
   */
  async prepare(driverName: string, claims: readonly DraClaimRef[]): Promise<Map<string, DraPreparedClaim>> {
    const { driver, client } = this.registeredDriver(driverName);
    const record: SimulatedDraManager["calls"][number] = {
      method: "prepare",
      driver: driverName,
      service: driver.service,
      claims: uids(claims),
    };
    this.calls.push(record);
    const started = performance.now();
    const res = await callWithDeadline<draV1.NodePrepareResourcesRequest, draV1.NodePrepareResourcesResponse>(
      client.nodePrepareResources.bind(client),
      { claims: claims.map((c) => ({ ...c })) },
      DRA_CALL_TIMEOUT_MS,
    );
    record.ms = performance.now() - started;
    return new Map(
      Object.entries(res.claims).map(([uid, r]) => [
        uid,
        {
          error: r.error,
          devices: r.devices.map((d) => ({
            requestNames: [...d.requestNames],
            poolName: d.poolName,
            deviceName: d.deviceName,
            cdiDeviceIds: [...d.cdiDeviceIds],
          })),
        },
      ]),
    );
  }

  /** NodeUnprepareResources for `claims` of `driverName`: each claim's error by uid ("" when done). */
  async unprepare(driverName: string, claims: readonly DraClaimRef[]): Promise<Map<string, string>> {
    const { driver, client } = this.registeredDriver(driverName);
    this.calls.push({
      method: "unprepare",
      driver: driverName,
      service: driver.service,
      claims: uids(claims),
    });
    const res = await callWithDeadline<
      draV1.NodeUnprepareResourcesRequest,
      draV1.NodeUnprepareResourcesResponse
    >(
      client.nodeUnprepareResources.bind(client),
      { claims: claims.map((c) => ({ ...c })) },
      DRA_CALL_TIMEOUT_MS,
    );
    return new Map(Object.entries(res.claims).map(([uid, r]) => [uid, r.error]));
  }

  /** Claims prepared on the node, by uid. */
  readonly prepared = new Map<string, PreparedClaim>();

  /**
   * The kubelet's PrepareResources for one pod (pkg/kubelet/cm/dra/manager.go): every claim read,
   * checked to be reserved for the pod, and those not prepared yet sent to their drivers, one
   * NodePrepareResources per driver; the first failure aborts with the kubelet's message, and the pod
   * does not start. Claims prepared before the failure stay prepared, as in the kubelet's cache.
   */
  async preparePod(pod: V1Pod, readClaim: ReadClaim): Promise<DraPreparedPod> {
    const namespace = pod.metadata?.namespace ?? "";
    const podUid = pod.metadata?.uid ?? "";
    const wrap = (message: string): Error => new Error(`prepare dynamic resources: ${message}`);
    const claims: { podClaimName: string; claim: ClaimForPrepare; ref: DraClaimRef }[] = [];
    for (const { podClaimName, claimName } of podClaimNames(pod)) {
      if (claimName === undefined) {
        throw wrap(
          `pod ${namespace}/${pod.metadata?.name}: ResourceClaim for ${podClaimName} not created yet`,
        );
      }
      let claim: ClaimForPrepare;
      try {
        claim = await readClaim(namespace, claimName);
      } catch (err) {
        throw wrap(`fetch ResourceClaim ${claimName}: ${(err as Error).message}`);
      }
      const uid = claim.metadata?.uid ?? "";
      if (!isReservedForPod(pod, claim)) {
        throw wrap(
          `pod ${pod.metadata?.name} (${podUid}) is not allowed to use ResourceClaim ${claimName} (${uid})`,
        );
      }
      claims.push({ podClaimName, claim, ref: { namespace, name: claimName, uid } });
    }
    const unprepared = claims.filter((c) => !this.prepared.has(c.ref.uid));
    for (const [driver, batch] of claimsByDriver(unprepared.map((c) => ({ ...c.claim, ref: c.ref })))) {
      let answers: Map<string, DraPreparedClaim>;
      try {
        answers = await this.prepare(
          driver,
          batch.map((c) => c.ref),
        );
      } catch (err) {
        throw wrap(`NodePrepareResources: ${(err as Error).message}`);
      }
      for (const { ref } of batch) {
        const answer = answers.get(ref.uid);
        if (answer === undefined) throw wrap(`NodePrepareResources skipped 1 ResourceClaims`);
        if (answer.error !== "") {
          throw wrap(`NodePrepareResources failed for ResourceClaim ${ref.name}: ${answer.error}`);
        }
        const entry = this.prepared.get(ref.uid) ?? {
          ref,
          drivers: [],
          devices: [],
          pods: new Set<string>(),
        };
        entry.drivers.push(driver);
        entry.devices.push(...answer.devices.map((d) => ({ ...d, driver })));
        // The pod holds it at once, so a later failure of the pod's prepare still unprepares it on delete.
        entry.pods.add(podUid);
        this.prepared.set(ref.uid, entry);
      }
    }
    const result: DraPreparedPod = {
      pod: `${namespace}/${pod.metadata?.name}`,
      uid: podUid,
      claims: {},
      cdiDeviceIds: {},
    };
    for (const { podClaimName, ref } of claims) {
      // A claim with no result of any driver (nothing to prepare) is prepared as empty.
      const entry = this.prepared.get(ref.uid) ?? { ref, drivers: [], devices: [], pods: new Set<string>() };
      this.prepared.set(ref.uid, entry);
      entry.pods.add(podUid);
      result.claims[podClaimName] = { name: ref.name, uid: ref.uid };
      result.cdiDeviceIds[podClaimName] = entry.devices.flatMap((d) => d.cdiDeviceIds);
    }
    return result;
  }

  /**
   * The kubelet's UnprepareResources for a pod that is gone: its claims no other pod on the node uses
   * are unprepared, one NodeUnprepareResources per driver. A failure leaves the claim prepared (and the
   * pod's reference on it) and throws, so the caller tries again.
   */
  async unpreparePod(podUid: string): Promise<void> {
    const released = [...this.prepared.values()].filter((c) => c.pods.has(podUid));
    for (const c of released) c.pods.delete(podUid);
    const last = released.filter((c) => c.pods.size === 0);
    const byDriver = new Map<string, PreparedClaim[]>();
    for (const c of last) for (const d of c.drivers) byDriver.set(d, [...(byDriver.get(d) ?? []), c]);
    const failed = new Set<PreparedClaim>();
    const errors: string[] = [];
    for (const [driver, batch] of byDriver) {
      try {
        const answers = await this.unprepare(
          driver,
          batch.map((c) => c.ref),
        );
        for (const c of batch) {
          const error = answers.get(c.ref.uid);
          if (error === undefined || error !== "") {
            failed.add(c);
            errors.push(
              `NodeUnprepareResources failed for ResourceClaim ${c.ref.name}: ${error ?? "skipped"}`,
            );
          }
        }
      } catch (err) {
        for (const c of batch) failed.add(c);
        errors.push(`NodeUnprepareResources: ${(err as Error).message}`);
      }
    }
    for (const c of last) {
      if (failed.has(c)) c.pods.add(podUid);
      else this.prepared.delete(c.ref.uid);
    }
    if (errors.length > 0) throw new Error(`unprepare dynamic resources: ${errors.join("; ")}`);
  }

  close(): void {
    this.wipeAbort.abort();
    this.forgetDrivers();
  }

  private forgetDrivers(): void {
    for (const list of this.drivers.values()) for (const { client } of list) client.close();
    this.drivers.clear();
  }

  private registeredDriver(driverName: string): Instance {
    const d = this.drivers.get(driverName)?.at(-1);
    // The kubelet's error when no plugin of the driver is registered (DRAPluginManager.GetPlugin).
    if (d === undefined) throw new Error(`DRA driver ${driverName} is not registered`);
    return d;
  }
}

function uids(claims: readonly DraClaimRef[]): string[] {
  return claims.map((c) => c.uid);
}
